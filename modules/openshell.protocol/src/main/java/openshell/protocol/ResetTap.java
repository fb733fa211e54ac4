package openshell.protocol;

import java.util.HashSet;
import java.util.Set;
import java.util.function.IntConsumer;
import java.util.function.Supplier;

/**
 * Watches the HTTP/2 frames a runtime link reads, before Helidon does, for the supervisor's
 * RST_STREAM. Helidon 4.1.7's server marks a reset stream closed but neither tells its gRPC
 * call nor wakes the stream's task, which waits for request data forever. So for a reset
 * of a stream whose request half is still open, this puts an empty DATA frame with
 * END_STREAM for that stream in place of the RST_STREAM (a legal frame for the client to have
 * sent) and reports the reset first: the waiting task wakes on that frame and
 * {@link StreamRelease} ends the call as cancelled. Every other byte passes unchanged.
 *
 * <p>Runs on the link's connection thread only (Helidon's reader), so it needs no locking.
 */
final class ResetTap extends FrameTap {
    private static final int PREFACE_BYTES = 24;

    private final IntConsumer reset;
    // Streams whose request half is open: HEADERS seen, END_STREAM not yet.
    private final Set<Integer> open = new HashSet<>();

    /**
     * @param source the link's plaintext bytes
     * @param reset  told the id of each reset stream whose request half was open, before
     *               the bytes that carry it are handed on
     */
    ResetTap(Supplier<byte[]> source, IntConsumer reset) {
        super(source, PREFACE_BYTES);
        this.reset = reset;
    }

    @Override
    Verdict frame(int type, int flags, int streamId, int length) {
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
            // The END_STREAM replaces the reset: the call is cancelled through StreamRelease, whose
            // stream then ends and is pruned on its own thread. A reset still behind it could reach
            // Helidon's connection after that pruning, which it takes for a frame on a stream never
            // created (a newer one is open): a connection error, the whole link closed with GOAWAY.
            return new Verdict(true, endStream(streamId));
        }
        return Verdict.PASS;
    }

    private static byte[] endStream(int streamId) {
        return header(0, DATA, END_STREAM, streamId);
    }
}
