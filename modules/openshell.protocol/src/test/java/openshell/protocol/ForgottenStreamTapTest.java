package openshell.protocol;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.Supplier;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The client's tap on the bytes of a real frame sequence, cut at every read boundary: frames
 * that Helidon's client would fail the link on (WINDOW_UPDATE, RST_STREAM) or silently keep
 * connection window for (DATA) are dropped when their stream was forgotten, the dropped DATA
 * is given back to the connection window, and every other byte passes unchanged.
 */
class ForgottenStreamTapTest {
    private static final int DATA = 0x0;
    private static final int HEADERS = 0x1;
    private static final int RST_STREAM = 0x3;
    private static final int SETTINGS = 0x4;
    private static final int WINDOW_UPDATE = 0x8;

    @Test
    void dropsLateFramesForForgottenStreamsAtEveryReadBoundary() {
        ByteArrayOutputStream wire = new ByteArrayOutputStream();
        ByteArrayOutputStream expected = new ByteArrayOutputStream();
        both(wire, expected, FrameBytes.frame(SETTINGS, 0, 0, new byte[6]));
        both(wire, expected, FrameBytes.frame(HEADERS, 0x4, 1, new byte[5]));
        wire.writeBytes(FrameBytes.frame(WINDOW_UPDATE, 0, 3, new byte[4]));        // forgotten 3: dropped
        both(wire, expected, FrameBytes.frame(DATA, 0, 1, new byte[700]));        // live 1: passes
        wire.writeBytes(FrameBytes.frame(DATA, 0, 3, new byte[1000]));              // forgotten 3: dropped, 1000 credited
        both(wire, expected, FrameBytes.frame(WINDOW_UPDATE, 0, 0, new byte[4]));   // connection level: passes
        wire.writeBytes(FrameBytes.frame(RST_STREAM, 0, 5, new byte[4]));           // forgotten 5: dropped
        both(wire, expected, FrameBytes.frame(HEADERS, 0x5, 5, new byte[3]));     // HEADERS always pass
        wire.writeBytes(FrameBytes.frame(DATA, 0x1, 5, new byte[0]));               // empty DATA: dropped, nothing credited
        wire.writeBytes(FrameBytes.frame(DATA, 0, 3, new byte[33]));                // dropped, 33 credited
        both(wire, expected, FrameBytes.frame(RST_STREAM, 0, 1, new byte[4]));    // live 1: passes
        byte[] bytes = wire.toByteArray();

        for (int size = 1; size <= bytes.length; size++) {
            assertTap(bytes, expected.toByteArray(), FrameBytes.reads(bytes, size), "reads of " + size + " bytes");
        }
        Random random = new Random(42);
        for (int run = 0; run < 500; run++) {
            assertTap(bytes, expected.toByteArray(), FrameBytes.randomReads(bytes, random), "random cut " + run);
        }
    }

    @Test
    void remembersTheLatestForgottenStreamsUpToTheBound() {
        ForgottenStreamTap tap = new ForgottenStreamTap(() -> null, increment -> { });
        for (int id = 1; id <= 2 * ForgottenStreamTap.MAX_FORGOTTEN_STREAMS - 1; id += 2) {
            tap.forget(id);
        }
        assertTrue(tap.forgets(1), "exactly at the bound every forgotten stream is remembered");
        assertTrue(tap.forgets(2 * ForgottenStreamTap.MAX_FORGOTTEN_STREAMS - 1));
        tap.forget(2 * ForgottenStreamTap.MAX_FORGOTTEN_STREAMS + 1);
        assertFalse(tap.forgets(1), "one past the bound the oldest is let go");
        assertTrue(tap.forgets(3));
        assertTrue(tap.forgets(2 * ForgottenStreamTap.MAX_FORGOTTEN_STREAMS + 1));
        tap.forget(0);
        tap.forget(-7);
        assertFalse(tap.forgets(0), "a stream that never had an id is not remembered");
    }

    private static void assertTap(byte[] wire, byte[] expected, Supplier<byte[]> reads, String how) {
        List<Integer> credits = new ArrayList<>();
        ForgottenStreamTap tap = new ForgottenStreamTap(reads, credits::add);
        tap.forget(3);
        tap.forget(5);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (byte[] chunk = tap.get(); chunk != null; chunk = tap.get()) {
            assertTrue(chunk.length > 0, how + ": an empty read would look like the end of the stream");
            out.writeBytes(chunk);
        }
        assertArrayEquals(expected, out.toByteArray(), how);
        assertEquals(List.of(1000, 33), credits, how);
        assertEquals(5, tap.framesDropped(), how);
    }

    private static void both(ByteArrayOutputStream wire, ByteArrayOutputStream expected, byte[] frame) {
        wire.writeBytes(frame);
        expected.writeBytes(frame);
    }

}
