package openshell.protocol;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The reset tap on the bytes of a real frame sequence, cut at every possible read boundary:
 * it puts exactly one empty END_STREAM DATA frame in place of the reset of a stream whose
 * request half is open, reports that stream once, and passes every other byte unchanged.
 */
class ResetTapTest {
    private static final byte[] PREFACE = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII);

    @Test
    void replacesTheResetOfAnOpenStreamWithItsEndStreamAtEveryReadBoundary() {
        ByteArrayOutputStream in = new ByteArrayOutputStream();
        in.writeBytes(PREFACE);
        in.writeBytes(FrameBytes.frame(0x4, 0, 0, new byte[6]));            // SETTINGS
        in.writeBytes(FrameBytes.frame(0x1, 0x4, 1, new byte[5]));          // HEADERS, stream 1 open
        in.writeBytes(FrameBytes.frame(0x0, 0, 1, new byte[3]));            // DATA
        byte[] beforeReset = in.toByteArray();
        in.writeBytes(FrameBytes.frame(0x3, 0, 1, new byte[4]));            // RST_STREAM 1: open, so ended instead
        byte[] afterReset = in.toByteArray();
        in.writeBytes(FrameBytes.frame(0x1, 0x5, 3, new byte[2]));          // HEADERS with END_STREAM, stream 3
        in.writeBytes(FrameBytes.frame(0x3, 0, 3, new byte[4]));            // RST_STREAM 3: request already ended
        in.writeBytes(FrameBytes.frame(0x1, 0x4, 5, new byte[2]));          // HEADERS, stream 5 open
        in.writeBytes(FrameBytes.frame(0x0, 0x1, 5, new byte[0x10])); // DATA with END_STREAM
        in.writeBytes(FrameBytes.frame(0x3, 0, 5, new byte[4]));            // RST_STREAM 5: request already ended
        byte[] wire = in.toByteArray();

        ByteArrayOutputStream expected = new ByteArrayOutputStream();
        expected.writeBytes(beforeReset);
        // The reset of the open stream becomes its END_STREAM: a reset behind it could reach Helidon
        // after the stream was pruned, which Helidon takes for a connection error.
        expected.writeBytes(FrameBytes.frame(0x0, 0x1, 1, new byte[0]));
        expected.writeBytes(Arrays.copyOfRange(wire, afterReset.length, wire.length));

        for (int size = 1; size <= wire.length; size++) {
            List<Integer> resets = new ArrayList<>();
            ResetTap tap = new ResetTap(FrameBytes.reads(wire, size), resets::add);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            for (byte[] chunk = tap.get(); chunk != null; chunk = tap.get()) {
                out.writeBytes(chunk);
            }
            assertArrayEquals(expected.toByteArray(), out.toByteArray(), "reads of " + size + " bytes");
            assertEquals(List.of(1), resets, "reads of " + size + " bytes");
        }
        java.util.Random random = new java.util.Random(7);
        for (int run = 0; run < 300; run++) {
            List<Integer> resets = new ArrayList<>();
            ResetTap tap = new ResetTap(FrameBytes.randomReads(wire, random), resets::add);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            for (byte[] chunk = tap.get(); chunk != null; chunk = tap.get()) {
                out.writeBytes(chunk);
            }
            assertArrayEquals(expected.toByteArray(), out.toByteArray(), "random cut " + run);
            assertEquals(List.of(1), resets, "random cut " + run);
        }
    }
}
