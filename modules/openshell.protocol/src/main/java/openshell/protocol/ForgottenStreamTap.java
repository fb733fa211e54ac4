package openshell.protocol;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.function.IntConsumer;
import java.util.function.Supplier;

/**
 * Reads a client connection's HTTP/2 frames before Helidon does and drops the frames that
 * arrive for a stream the client already forgot. Helidon 4.1.7's client connection looks a
 * WINDOW_UPDATE or RST_STREAM's stream up without a null check, so one such frame ends its
 * reader and closes the whole link with every call on it; and it drops DATA for an unknown
 * stream without giving the bytes back to the connection window, so each one shrinks what
 * the peer may send on every other stream until the link stalls. Both happen in ordinary
 * races: the runtime acknowledges a stream's last request bytes with a WINDOW_UPDATE after
 * its trailers, or answers data that crossed a reset.
 *
 * <p>So: a WINDOW_UPDATE or RST_STREAM for a forgotten stream is dropped, and a DATA frame
 * for one is dropped and its length given back to the connection window at once (the bytes
 * were received; nobody will read them). Every other byte passes unchanged. HEADERS are never
 * dropped: the header compression state needs every block; the calls keep a stream known
 * until its END_STREAM arrived, so none follows.
 *
 * <p>{@link #get()} runs on the connection's reader thread only; {@link #forget} on any.
 */
final class ForgottenStreamTap implements Supplier<byte[]> {
    /**
     * Forgotten stream ids remembered; the oldest is let go when one more is forgotten. With
     * at most {@link ProtocolLimits#MAX_CONCURRENT_STREAMS} streams open at once, a late frame
     * for a stream forgotten this many streams ago does not happen.
     */
    static final int MAX_FORGOTTEN_STREAMS = 1024;

    private static final int HEADER_BYTES = 9;
    private static final int DATA = 0x0;
    private static final int RST_STREAM = 0x3;
    private static final int WINDOW_UPDATE = 0x8;
    private static final int NONE = Integer.MIN_VALUE;

    private final Supplier<byte[]> source;
    private final IntConsumer connectionCredit;
    private final LinkedHashSet<Integer> forgotten = new LinkedHashSet<>();

    // The reader thread's parse state.
    private final byte[] header = new byte[HEADER_BYTES];
    private int headerFill;
    private long payloadLeft;
    private boolean dropping;
    private final List<int[]> drops = new ArrayList<>();
    private volatile long framesDropped;

    /**
     * @param source           the connection's plaintext bytes, as the server sent them
     * @param connectionCredit writes a connection-level WINDOW_UPDATE of the given increment
     */
    ForgottenStreamTap(Supplier<byte[]> source, IntConsumer connectionCredit) {
        this.source = source;
        this.connectionCredit = connectionCredit;
    }

    /**
     * The client closed this stream: from now on frames for it are not handed on.
     *
     * @param streamId the stream, positive
     */
    void forget(int streamId) {
        if (streamId <= 0) {
            return;
        }
        synchronized (forgotten) {
            if (forgotten.add(streamId) && forgotten.size() > MAX_FORGOTTEN_STREAMS) {
                Iterator<Integer> oldest = forgotten.iterator();
                oldest.next();
                oldest.remove();
            }
        }
    }

    /** @return whether frames for this stream are dropped now */
    boolean forgets(int streamId) {
        synchronized (forgotten) {
            return forgotten.contains(streamId);
        }
    }

    /** @return frames dropped so far */
    long framesDropped() {
        return framesDropped;
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
            // All dropped, or only part of a frame header so far: read on.
        }
    }

    // Most chunks pass as they are; a copy is made only to drop a frame or hold back a split header.
    private byte[] scan(byte[] chunk) {
        byte[] held = headerFill == 0 ? null : Arrays.copyOf(header, headerFill);
        int offset = held == null ? 0 : held.length;
        drops.clear();
        // Where the frame being dropped began, relative to this chunk (below 0 for a header begun in the
        // last one), or NONE. A frame dropped across chunks: its payload from the start of this one.
        int dropFrom = dropping && payloadLeft > 0 ? 0 : NONE;
        int at = 0;
        while (at < chunk.length) {
            if (payloadLeft > 0) {
                int n = (int) Math.min(payloadLeft, chunk.length - at);
                payloadLeft -= n;
                at += n;
            } else {
                int start = at - headerFill;
                int n = Math.min(HEADER_BYTES - headerFill, chunk.length - at);
                System.arraycopy(chunk, at, header, headerFill, n);
                headerFill += n;
                at += n;
                if (headerFill < HEADER_BYTES) {
                    break;
                }
                headerFill = 0;
                dropping = frame();
                if (dropping) {
                    dropFrom = start;
                }
            }
            if (dropFrom != NONE && payloadLeft == 0) {
                drops.add(new int[] {dropFrom + offset, at + offset});
                dropFrom = NONE;
            }
        }
        if (dropFrom != NONE) {
            drops.add(new int[] {dropFrom + offset, chunk.length + offset});
        }
        if (held == null && drops.isEmpty() && headerFill == 0) {
            return chunk;
        }
        byte[] data = chunk;
        if (held != null) {
            data = Arrays.copyOf(held, held.length + chunk.length);
            System.arraycopy(chunk, 0, data, held.length, chunk.length);
        }
        // A header begun at the end of this chunk waits for the rest.
        int keep = data.length - headerFill;
        ByteArrayOutputStream out = new ByteArrayOutputStream(keep);
        int from = 0;
        for (int[] drop : drops) {
            out.write(data, from, drop[0] - from);
            from = drop[1];
        }
        out.write(data, from, keep - from);
        return out.toByteArray();
    }

    // A whole header is in: whether its frame is dropped.
    private boolean frame() {
        int length = ((header[0] & 0xff) << 16) | ((header[1] & 0xff) << 8) | (header[2] & 0xff);
        payloadLeft = length;
        int type = header[3] & 0xff;
        int streamId = ((header[5] & 0x7f) << 24) | ((header[6] & 0xff) << 16) | ((header[7] & 0xff) << 8)
                | (header[8] & 0xff);
        if (streamId == 0 || (type != DATA && type != RST_STREAM && type != WINDOW_UPDATE) || !forgets(streamId)) {
            return false;
        }
        framesDropped++;
        if (type == DATA && length > 0) {
            connectionCredit.accept(length);
        }
        return true;
    }
}
