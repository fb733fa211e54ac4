package openshell.protocol;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The reset tap on the bytes of a real frame sequence, cut at every possible read boundary:
 * it adds exactly one empty END_STREAM DATA frame before the reset of a stream whose request
 * half is open, reports that stream once, and passes every other byte unchanged.
 */
class ResetTapTest {
    private static final byte[] PREFACE = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII);

    @Test
    void addsEndStreamBeforeTheResetOfAnOpenStreamAtEveryReadBoundary() {
        ByteArrayOutputStream in = new ByteArrayOutputStream();
        in.writeBytes(PREFACE);
        in.writeBytes(frame(0x4, 0, 0, new byte[6]));            // SETTINGS
        in.writeBytes(frame(0x1, 0x4, 1, new byte[5]));          // HEADERS, stream 1 open
        in.writeBytes(frame(0x0, 0, 1, new byte[3]));            // DATA
        byte[] beforeReset = in.toByteArray();
        in.writeBytes(frame(0x3, 0, 1, new byte[4]));            // RST_STREAM 1: open, so ended first
        in.writeBytes(frame(0x1, 0x5, 3, new byte[2]));          // HEADERS with END_STREAM, stream 3
        in.writeBytes(frame(0x3, 0, 3, new byte[4]));            // RST_STREAM 3: request already ended
        in.writeBytes(frame(0x1, 0x4, 5, new byte[2]));          // HEADERS, stream 5 open
        in.writeBytes(frame(0x0, 0x1, 5, new byte[0x10])); // DATA with END_STREAM
        in.writeBytes(frame(0x3, 0, 5, new byte[4]));            // RST_STREAM 5: request already ended
        byte[] wire = in.toByteArray();

        ByteArrayOutputStream expected = new ByteArrayOutputStream();
        expected.writeBytes(beforeReset);
        expected.writeBytes(frame(0x0, 0x1, 1, new byte[0]));
        expected.writeBytes(Arrays.copyOfRange(wire, beforeReset.length, wire.length));

        for (int size = 1; size <= wire.length; size++) {
            List<Integer> resets = new ArrayList<>();
            ResetTap tap = new ResetTap(chunks(wire, size), resets::add);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            for (byte[] chunk = tap.get(); chunk != null; chunk = tap.get()) {
                out.writeBytes(chunk);
            }
            assertArrayEquals(expected.toByteArray(), out.toByteArray(), "reads of " + size + " bytes");
            assertEquals(List.of(1), resets, "reads of " + size + " bytes");
        }
    }

    private static java.util.function.Supplier<byte[]> chunks(byte[] wire, int size) {
        Deque<byte[]> queue = new ArrayDeque<>();
        for (int at = 0; at < wire.length; at += size) {
            queue.add(Arrays.copyOfRange(wire, at, Math.min(wire.length, at + size)));
        }
        return queue::poll;
    }

    private static byte[] frame(int type, int flags, int streamId, byte[] payload) {
        byte[] frame = new byte[9 + payload.length];
        frame[0] = (byte) (payload.length >>> 16);
        frame[1] = (byte) (payload.length >>> 8);
        frame[2] = (byte) payload.length;
        frame[3] = (byte) type;
        frame[4] = (byte) flags;
        frame[5] = (byte) (streamId >>> 24);
        frame[6] = (byte) (streamId >>> 16);
        frame[7] = (byte) (streamId >>> 8);
        frame[8] = (byte) streamId;
        System.arraycopy(payload, 0, frame, 9, payload.length);
        return frame;
    }
}
