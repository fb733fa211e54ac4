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
    private static final int PUSH_PROMISE = 0x5;
    private static final int CONTINUATION = 0x9;
    private static final int END_STREAM = 0x1;
    private static final int END_HEADERS = 0x4;
    private static final int PADDED = 0x8;
    private static final int PRIORITY = 0x20;

    @Test
    void dropsLateFramesForForgottenStreamsAtEveryReadBoundary() {
        ByteArrayOutputStream wire = new ByteArrayOutputStream();
        ByteArrayOutputStream expected = new ByteArrayOutputStream();
        both(wire, expected, FrameBytes.frame(SETTINGS, 0, 0, new byte[6]));
        both(wire, expected, FrameBytes.frame(HEADERS, 0x4, 1, new byte[6]));        // two empty literals
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


    @Test
    void headerBlocksAcrossFramesAndReadsArriveFlatInOneFrame() {
        List<byte[]> blocks = HpackFlattenerTest.serverBlocks().subList(0, 6);
        HpackFlattener reference = new HpackFlattener();
        ByteArrayOutputStream wire = new ByteArrayOutputStream();
        ByteArrayOutputStream expected = new ByteArrayOutputStream();
        both(wire, expected, FrameBytes.frame(SETTINGS, 0, 0, new byte[6]));
        for (int i = 0; i < blocks.size(); i++) {
            byte[] block = blocks.get(i);
            int stream = 1 + 2 * (i / 2);
            int endStream = i % 2 == 1 ? END_STREAM : 0;
            // Padded, with priority, and cut into a HEADERS frame and two CONTINUATIONs.
            int a = block.length / 3;
            int b = 2 * block.length / 3;
            ByteArrayOutputStream first = new ByteArrayOutputStream();
            first.write(3);                                  // pad length
            first.writeBytes(new byte[] {0, 0, 0, 1, 16});  // priority: depends on stream 1, weight 16
            first.write(block, 0, a);
            first.writeBytes(new byte[3]);                   // padding
            wire.writeBytes(FrameBytes.frame(HEADERS, PADDED | PRIORITY | endStream, stream, first.toByteArray()));
            wire.writeBytes(FrameBytes.frame(CONTINUATION, 0, stream, java.util.Arrays.copyOfRange(block, a, b)));
            wire.writeBytes(FrameBytes.frame(CONTINUATION, END_HEADERS, stream,
                    java.util.Arrays.copyOfRange(block, b, block.length)));
            expected.writeBytes(FrameBytes.frame(HEADERS, END_HEADERS | endStream, stream, reference.flatten(block)));
            both(wire, expected, FrameBytes.frame(DATA, 0, stream, new byte[10]));
        }
        byte[] bytes = wire.toByteArray();
        for (int size = 1; size <= bytes.length; size += size < 40 ? 1 : 7) {
            assertPassed(FrameBytes.reads(bytes, size), expected.toByteArray(), "reads of " + size + " bytes");
        }
        Random random = new Random(7);
        for (int run = 0; run < 200; run++) {
            assertPassed(FrameBytes.randomReads(bytes, random), expected.toByteArray(), "random cut " + run);
        }
    }

    @Test
    void aBlockAtTheBoundPassesInFramesOfTheFrameSizeAndOneByteMoreEndsTheConnection() {
        byte[] atBound = bigLiteral(HpackFlattener.MAX_BLOCK_BYTES);
        ByteArrayOutputStream wire = new ByteArrayOutputStream();
        continued(wire, 3, atBound);
        ForgottenStreamTap tap = new ForgottenStreamTap(FrameBytes.reads(wire.toByteArray(), 5000), increment -> { });
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (byte[] chunk = tap.get(); chunk != null; chunk = tap.get()) {
            out.writeBytes(chunk);
        }
        assertTrue(tap.refusal().isEmpty(), () -> "refused: " + tap.refusal());
        ByteArrayOutputStream expected = new ByteArrayOutputStream();
        continued(expected, 3, atBound);
        assertArrayEquals(expected.toByteArray(), out.toByteArray(),
                "a flat block already: the same bytes, in frames of " + ProtocolLimits.MAX_FRAME_BYTES);

        ByteArrayOutputStream over = new ByteArrayOutputStream();
        continued(over, 3, bigLiteral(HpackFlattener.MAX_BLOCK_BYTES + 1));
        assertRefused(over.toByteArray(), "over " + HpackFlattener.MAX_BLOCK_BYTES);
    }

    @Test
    void headerFramesOutOfPlaceEndTheConnectionAndNothingAfterThemPasses() {
        byte[] get = {(byte) 0x82};
        assertRefused(FrameBytes.frame(CONTINUATION, END_HEADERS, 1, get), "CONTINUATION on stream 1 without");
        assertRefused(concat(FrameBytes.frame(HEADERS, 0, 1, get), FrameBytes.frame(DATA, 0, 1, new byte[4])),
                "inside the header block of stream 1");
        assertRefused(concat(FrameBytes.frame(HEADERS, 0, 1, get), FrameBytes.frame(CONTINUATION, END_HEADERS, 3, get)),
                "inside the header block of stream 1");
        assertRefused(FrameBytes.frame(PUSH_PROMISE, END_HEADERS, 1, new byte[5]), "push is disabled");
        assertRefused(FrameBytes.frame(HEADERS, END_HEADERS, 0, get), "on stream 0");
        assertRefused(FrameBytes.frame(HEADERS, END_HEADERS, 1, new byte[ProtocolLimits.MAX_FRAME_BYTES + 1]),
                "header frame of " + (ProtocolLimits.MAX_FRAME_BYTES + 1) + " bytes");
        assertRefused(FrameBytes.frame(HEADERS, END_HEADERS | PADDED, 1, new byte[] {9, (byte) 0x82}), "padding");
        assertRefused(FrameBytes.frame(HEADERS, END_HEADERS, 1, new byte[] {(byte) 0xc0}), "past the dynamic table");
    }

    /** The wire refused at its last frame: what came before passes, nothing after, and the reason is kept. */
    private static void assertRefused(byte[] bad, String reason) {
        byte[] before = FrameBytes.frame(DATA, 0, 1, new byte[3]);
        byte[] after = FrameBytes.frame(DATA, 0, 1, new byte[4]);
        ForgottenStreamTap tap = new ForgottenStreamTap(FrameBytes.reads(concat(before, bad, after), 7), increment -> { });
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (byte[] chunk = tap.get(); chunk != null; chunk = tap.get()) {
            out.writeBytes(chunk);
        }
        assertTrue(tap.refusal().isPresent(), reason + ": refused");
        assertTrue(tap.refusal().orElseThrow().contains(reason), tap.refusal().orElseThrow());
        byte[] passed = out.toByteArray();
        assertTrue(passed.length <= before.length + 9, reason + ": nothing of the bad frame's stream or after it passes");
        assertArrayEquals(java.util.Arrays.copyOf(before, Math.min(before.length, passed.length)),
                java.util.Arrays.copyOf(passed, Math.min(before.length, passed.length)));
        assertEquals(null, tap.get(), "the connection stays ended");
    }

    private static void assertPassed(Supplier<byte[]> reads, byte[] expected, String how) {
        ForgottenStreamTap tap = new ForgottenStreamTap(reads, increment -> { });
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (byte[] chunk = tap.get(); chunk != null; chunk = tap.get()) {
            assertTrue(chunk.length > 0, how + ": an empty read would look like the end of the stream");
            out.writeBytes(chunk);
        }
        assertTrue(tap.refusal().isEmpty(), () -> how + ": " + tap.refusal());
        assertArrayEquals(expected, out.toByteArray(), how);
    }

    /** A HEADERS frame and CONTINUATIONs of at most the frame size carrying the block, END_STREAM on the first. */
    private static void continued(ByteArrayOutputStream wire, int stream, byte[] block) {
        for (int at = 0; at < block.length; at += ProtocolLimits.MAX_FRAME_BYTES) {
            int to = Math.min(block.length, at + ProtocolLimits.MAX_FRAME_BYTES);
            int flags = (at == 0 ? END_STREAM : 0) | (to == block.length ? END_HEADERS : 0);
            wire.writeBytes(FrameBytes.frame(at == 0 ? HEADERS : CONTINUATION, flags, stream,
                    java.util.Arrays.copyOfRange(block, at, to)));
        }
    }

    /** One literal without indexing, new name "a", of exactly {@code size} bytes. */
    private static byte[] bigLiteral(int size) {
        for (int valueLength = size - 4; valueLength > 0; valueLength--) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            out.writeBytes(new byte[] {0x00, 0x01, 'a'});
            HpackFlattener.writeInteger(out, 0x00, 7, valueLength);
            out.writeBytes(new byte[valueLength]);
            if (out.size() == size) {
                return out.toByteArray();
            }
        }
        throw new IllegalArgumentException("no literal of " + size + " bytes");
    }

    private static byte[] concat(byte[]... parts) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (byte[] part : parts) {
            out.writeBytes(part);
        }
        return out.toByteArray();
    }
}
