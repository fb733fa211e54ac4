package openshell.protocol;

import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Deque;
import java.util.function.Supplier;

/** HTTP/2 frames as bytes, and reads of them cut to a size, for the frame taps' tests. */
final class FrameBytes {
    private FrameBytes() {
    }

    /** @return one frame: the 9-byte header, then the payload */
    static byte[] frame(int type, int flags, int streamId, byte[] payload) {
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

    /** @return reads of the wire of {@code size} bytes each (the last one shorter), then the end */
    static Supplier<byte[]> reads(byte[] wire, int size) {
        Deque<byte[]> queue = new ArrayDeque<>();
        for (int at = 0; at < wire.length; at += size) {
            queue.add(Arrays.copyOfRange(wire, at, Math.min(wire.length, at + size)));
        }
        return queue::poll;
    }

    /** @return reads of the wire cut at random places, some short, some long, then the end */
    static Supplier<byte[]> randomReads(byte[] wire, java.util.Random random) {
        Deque<byte[]> queue = new ArrayDeque<>();
        int at = 0;
        while (at < wire.length) {
            int size = 1 + random.nextInt(random.nextBoolean() ? 12 : 1200);
            queue.add(Arrays.copyOfRange(wire, at, Math.min(wire.length, at + size)));
            at += size;
        }
        return queue::poll;
    }
}
