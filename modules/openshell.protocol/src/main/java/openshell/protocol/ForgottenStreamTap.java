package openshell.protocol;

import java.io.ByteArrayOutputStream;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.concurrent.CompletableFuture;
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
 * for one is dropped and its length counted for the connection window, given back with the
 * next batch ({@link StreamWindows}; the bytes were received, nobody will read them). HEADERS
 * are never dropped; the calls keep a stream known until its END_STREAM arrived, so none follows.
 *
 * <p>Every header block is flattened ({@link HpackFlattener}): its HEADERS frame and any
 * CONTINUATIONs become one block that needs no dynamic table, because Helidon's client decodes
 * each stream's headers on that stream's thread against one shared table, and two streams doing
 * so at once failed the link. A block that is not valid HPACK, a CONTINUATION out of place or a
 * PUSH_PROMISE (push is disabled) ends the connection. Every other byte passes unchanged.
 *
 * <p>{@link #get()} runs on the connection's reader thread only; {@link #forget} on any.
 */
final class ForgottenStreamTap extends FrameTap {
    /**
     * Forgotten stream ids remembered; the oldest is let go when one more is forgotten. With
     * at most {@link ProtocolLimits#MAX_CONCURRENT_STREAMS} streams open at once, a late frame
     * for a stream forgotten this many streams ago does not happen.
     */
    static final int MAX_FORGOTTEN_STREAMS = 1024;

    private final IntConsumer connectionCredit;
    private final HpackFlattener hpack = new HpackFlattener();
    // The header block being gathered (a HEADERS frame without END_HEADERS so far), or null.
    private ByteArrayOutputStream block;
    private int blockStream;
    private int blockFlags;
    private final LinkedHashSet<Integer> forgotten = new LinkedHashSet<>();
    private volatile long framesDropped;
    private final CompletableFuture<Void> peerSettings = new CompletableFuture<>();

    /**
     * @param source           the connection's plaintext bytes, as the server sent them
     * @param connectionCredit counts dropped bytes for the connection window
     */
    ForgottenStreamTap(Supplier<byte[]> source, IntConsumer connectionCredit) {
        super(source, 0);
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

    /**
     * Completes when the server's first SETTINGS frame (not an acknowledgement) was read: from
     * then on the peer is known to speak HTTP/2 on this connection, not merely to have finished TLS.
     *
     * @return the future
     */
    CompletableFuture<Void> peerSettings() {
        return peerSettings;
    }

    /** @return frames dropped so far */
    long framesDropped() {
        return framesDropped;
    }

    @Override
    Verdict frame(int type, int flags, int streamId, int length) {
        if (block != null && (type != CONTINUATION || streamId != blockStream)) {
            throw new Refused("frame of type " + type + " on stream " + streamId
                    + " inside the header block of stream " + blockStream);
        }
        if (type == HEADERS || type == CONTINUATION || type == PUSH_PROMISE) {
            if (type == PUSH_PROMISE) {
                throw new Refused("PUSH_PROMISE on stream " + streamId + ", but push is disabled");
            }
            if (type == CONTINUATION && block == null) {
                throw new Refused("CONTINUATION on stream " + streamId + " without a header block");
            }
            if (streamId == 0 || length > ProtocolLimits.MAX_FRAME_BYTES) {
                throw new Refused("header frame of " + length + " bytes on stream " + streamId);
            }
            return Verdict.REWRITE;
        }
        if (type == SETTINGS && streamId == 0 && (flags & SETTINGS_ACK) == 0) {
            peerSettings.complete(null);
        }
        if (streamId == 0 || (type != DATA && type != RST_STREAM && type != WINDOW_UPDATE) || !forgets(streamId)) {
            return Verdict.PASS;
        }
        framesDropped++;
        if (type == DATA && length > 0) {
            connectionCredit.accept(length);
        }
        return Verdict.DROP;
    }

    @Override
    byte[] rewrite(int type, int flags, int streamId, byte[] payload) {
        if (type == HEADERS) {
            block = new ByteArrayOutputStream(payload.length);
            blockStream = streamId;
            blockFlags = flags & END_STREAM;
            block.writeBytes(fragment(flags, payload));
        } else {
            block.writeBytes(payload);
        }
        if (block.size() > HpackFlattener.MAX_BLOCK_BYTES) {
            throw new Refused("header block of stream " + streamId + " over " + HpackFlattener.MAX_BLOCK_BYTES + " bytes");
        }
        if ((flags & END_HEADERS) == 0) {
            return new byte[0];
        }
        byte[] flat;
        try {
            flat = hpack.flatten(block.toByteArray());
        } catch (HpackFlattener.HpackException e) {
            throw new Refused("header block of stream " + streamId + ": " + e.getMessage());
        } finally {
            block = null;
        }
        return frames(blockStream, blockFlags, flat);
    }

    /** @return the header block fragment of a HEADERS payload: padding and priority removed */
    private static byte[] fragment(int flags, byte[] payload) {
        int from = 0;
        int to = payload.length;
        if ((flags & PADDED) != 0) {
            if (payload.length == 0) {
                throw new Refused("padded HEADERS without its pad length");
            }
            from = 1;
            to -= payload[0] & 0xff;
        }
        if ((flags & PRIORITY) != 0) {
            from += 5;
        }
        if (to < from) {
            throw new Refused("HEADERS padding or priority longer than the frame");
        }
        return Arrays.copyOfRange(payload, from, to);
    }

    /** @return the block as a HEADERS frame and as many CONTINUATIONs as the frame size needs */
    private static byte[] frames(int streamId, int endStream, byte[] flat) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(flat.length + HEADER_BYTES * 2);
        int at = 0;
        boolean first = true;
        do {
            int n = Math.min(ProtocolLimits.MAX_FRAME_BYTES, flat.length - at);
            boolean last = at + n == flat.length;
            int type = first ? HEADERS : CONTINUATION;
            int flags = (first ? endStream : 0) | (last ? END_HEADERS : 0);
            out.writeBytes(header(n, type, flags, streamId));
            out.write(flat, at, n);
            at += n;
            first = false;
        } while (at < flat.length);
        return out.toByteArray();
    }
}
