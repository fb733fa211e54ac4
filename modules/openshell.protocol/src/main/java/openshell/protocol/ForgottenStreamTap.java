package openshell.protocol;

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
 * next batch ({@link StreamWindows}; the bytes were received, nobody will read them). Every other byte passes unchanged. HEADERS are never
 * dropped: the header compression state needs every block; the calls keep a stream known
 * until its END_STREAM arrived, so none follows.
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
}
