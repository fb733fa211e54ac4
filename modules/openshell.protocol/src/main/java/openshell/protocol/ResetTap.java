package openshell.protocol;

import java.io.ByteArrayOutputStream;
import java.util.HashSet;
import java.util.Set;
import java.util.function.IntConsumer;
import java.util.function.Supplier;

/**
 * Watches the HTTP/2 frames a runtime link reads, before Helidon does, for the supervisor's
 * RST_STREAM. Helidon 4.1.7's server marks a reset stream closed but neither tells its gRPC
 * call nor wakes the stream's task, which waits for request data forever. So for a reset
 * of a stream whose request half is still open, this puts an empty DATA frame with
 * END_STREAM for that stream just before the RST_STREAM (a legal sequence for the client to
 * have sent) and reports the reset first: the waiting task wakes on that frame and
 * {@link StreamRelease} ends the call as cancelled. Every other byte passes unchanged.
 *
 * <p>Runs on the link's connection thread only (Helidon's reader), so it needs no locking.
 */
final class ResetTap implements Supplier<byte[]> {
    private static final int PREFACE_BYTES = 24;
    private static final int HEADER_BYTES = 9;
    private static final int DATA = 0x0;
    private static final int HEADERS = 0x1;
    private static final int RST_STREAM = 0x3;
    private static final int END_STREAM = 0x1;

    private final Supplier<byte[]> source;
    private final IntConsumer reset;
    // Streams whose request half is open: HEADERS seen, END_STREAM not yet.
    private final Set<Integer> open = new HashSet<>();
    private final byte[] header = new byte[HEADER_BYTES];
    private int headerFill;
    private long prefaceLeft = PREFACE_BYTES;
    private long payloadLeft;
    private final java.util.List<int[]> injections = new java.util.ArrayList<>();

    /**
     * @param source the link's plaintext bytes
     * @param reset  told the id of each reset stream whose request half was open, before
     *               the bytes that carry it are handed on
     */
    ResetTap(Supplier<byte[]> source, IntConsumer reset) {
        this.source = source;
        this.reset = reset;
    }

    @Override
    public byte[] get() {
        while (true) {
            byte[] chunk = source.get();
            if (chunk == null) {
                return null;
            }
            byte[] out = scan(chunk);
            if (out.length > 0) {
                return out;
            }
            // Only part of a frame header so far: it is held back until it is whole.
        }
    }

    // Most chunks pass as they are; a copy is made only to add a frame or hold back a split header.
    private byte[] scan(byte[] chunk) {
        // Bytes of a frame header split across reads were held back: they go out with the rest.
        byte[] held = headerFill == 0 ? null : java.util.Arrays.copyOf(header, headerFill);
        injections.clear();
        int at = 0;
        while (at < chunk.length) {
            if (prefaceLeft > 0) {
                int n = (int) Math.min(prefaceLeft, chunk.length - at);
                prefaceLeft -= n;
                at += n;
            } else if (payloadLeft > 0) {
                int n = (int) Math.min(payloadLeft, chunk.length - at);
                payloadLeft -= n;
                at += n;
            } else {
                int start = at - headerFill;
                int n = Math.min(HEADER_BYTES - headerFill, chunk.length - at);
                System.arraycopy(chunk, at, header, headerFill, n);
                headerFill += n;
                at += n;
                if (headerFill == HEADER_BYTES) {
                    headerFill = 0;
                    int injected = frame();
                    if (injected != 0) {
                        injections.add(new int[] {start, injected});
                    }
                }
            }
        }
        if (held == null && injections.isEmpty() && headerFill == 0) {
            return chunk;
        }
        // Positions are relative to this chunk; a header begun in the last one starts below 0.
        int offset = held == null ? 0 : held.length;
        byte[] data = chunk;
        if (held != null) {
            data = java.util.Arrays.copyOf(held, held.length + chunk.length);
            System.arraycopy(chunk, 0, data, held.length, chunk.length);
        }
        int keep = data.length - headerFill;
        ByteArrayOutputStream out = new ByteArrayOutputStream(keep + HEADER_BYTES * injections.size());
        int from = 0;
        for (int[] injection : injections) {
            int position = injection[0] + offset;
            out.write(data, from, position - from);
            from = position;
            out.writeBytes(endStream(injection[1]));
        }
        out.write(data, from, keep - from);
        return out.toByteArray();
    }

    // Returns the stream id to end before this frame, or 0.
    private int frame() {
        payloadLeft = ((header[0] & 0xffL) << 16) | ((header[1] & 0xffL) << 8) | (header[2] & 0xffL);
        int type = header[3] & 0xff;
        int flags = header[4] & 0xff;
        int streamId = ((header[5] & 0x7f) << 24) | ((header[6] & 0xff) << 16) | ((header[7] & 0xff) << 8)
                | (header[8] & 0xff);
        boolean endStream = (flags & END_STREAM) != 0;
        if (type == HEADERS && streamId != 0) {
            // A HEADERS frame on an open stream is its trailers; END_STREAM sits on the HEADERS
            // frame even when CONTINUATION frames follow.
            if (endStream) {
                open.remove(streamId);
            } else {
                open.add(streamId);
            }
        } else if (type == DATA && endStream) {
            open.remove(streamId);
        } else if (type == RST_STREAM && open.remove(streamId)) {
            reset.accept(streamId);
            return streamId;
        }
        return 0;
    }

    private static byte[] endStream(int streamId) {
        return new byte[] {0, 0, 0, DATA, END_STREAM,
                (byte) (streamId >>> 24), (byte) (streamId >>> 16), (byte) (streamId >>> 8), (byte) streamId};
    }
}
