package openshell.protocol;

import java.util.concurrent.CountDownLatch;

import io.helidon.common.buffers.BufferData;
import io.helidon.http.HttpPrologue;
import io.helidon.http.http2.FlowControl;
import io.helidon.http.http2.Http2Flag;
import io.helidon.http.http2.Http2FrameData;
import io.helidon.http.http2.Http2FrameHeader;
import io.helidon.http.http2.Http2FrameType;
import io.helidon.http.http2.Http2FrameTypes;
import io.helidon.http.http2.Http2Headers;
import io.helidon.http.http2.Http2RstStream;
import io.helidon.http.http2.Http2Settings;
import io.helidon.http.http2.Http2StreamState;
import io.helidon.http.http2.Http2StreamWriter;
import io.helidon.http.http2.Http2WindowUpdate;
import io.helidon.http.http2.StreamFlowControl;
import io.helidon.webserver.ConnectionContext;
import io.helidon.webserver.Router;
import io.helidon.webserver.http2.spi.Http2SubProtocolSelector;
import io.helidon.webserver.http2.spi.SubProtocolResult;

/**
 * Gives a finished gRPC call's HTTP/2 stream slot back to Helidon 4.1.7's server connection.
 *
 * <p>Helidon's {@code Http2Connection} frees a stream slot in two places only: when its
 * stream task ends in state {@code CLOSED}, and when a DATA frame with END_STREAM arrives
 * while the stream is already {@code HALF_CLOSED_LOCAL}. Its {@code Http2ServerStream}
 * copies the state from the sub-protocol handler after each DATA frame and leaves its read
 * loop on {@code CLOSED} or {@code HALF_CLOSED_LOCAL}; Helidon's {@code GrpcProtocolHandler}
 * reports {@code HALF_CLOSED_LOCAL} both when the client ends its side and when the call
 * closes (it writes the trailers straight to the connection writer), and never
 * {@code CLOSED}. So a normal call ends its stream task {@code HALF_CLOSED_LOCAL}, the
 * client's END_STREAM came earlier while the stream still looked {@code OPEN}, and the slot
 * is never freed: a link dies after {@link ProtocolLimits#MAX_CONCURRENT_STREAMS} calls.
 * (Helidon 4.5.0 tracks both halves, {@code GrpcProtocolHandler.nextStreamState}, and its
 * stream loop runs until {@code CLOSED}.)
 *
 * <p>This wrapper, in front of Helidon's gRPC selector, tracks both halves itself: the
 * server's END_STREAM through the stream writer it hands to the selector, the client's
 * through the DATA frames. It reports {@code OPEN} until both have ended and then
 * {@code CLOSED}, so the stream task ends {@code CLOSED} and Helidon frees the slot. When
 * the client ends first, the stream task waits (on its own virtual thread) for the call to
 * close; when the call closes first, the stream keeps reading until the client's
 * END_STREAM (which {@link LinkCall} sends after the trailers) or reset, and frames after
 * the close are not handed to the finished call. A reset the {@link ResetTap} reports
 * cancels the call through {@link CancelBridge}. Only public SPI is used.
 */
final class StreamRelease implements Http2SubProtocolSelector.SubProtocolHandler {
    private static final ThreadLocal<StreamRelease> CURRENT = new ThreadLocal<>();

    private final CountDownLatch localEnd = new CountDownLatch(1);
    private final ServedLink link;
    private final int streamId;
    private volatile Http2SubProtocolSelector.SubProtocolHandler call;
    private volatile boolean remoteEnded;
    private volatile boolean reset;
    private volatile boolean cancelPending;
    private volatile boolean callEnded;
    private volatile Runnable onCancel = () -> { };

    private StreamRelease(ServedLink link, int streamId) {
        this.link = link;
        this.streamId = streamId;
    }

    /** The stream whose call is starting on this thread (for {@link CancelBridge}). */
    static java.util.Optional<StreamRelease> current() {
        return java.util.Optional.ofNullable(CURRENT.get());
    }

    void onCancel(Runnable hook) {
        onCancel = hook;
    }

    /**
     * The supervisor reset this stream ({@link ResetTap}, on the connection thread): the
     * request data still queued is dropped, the call is cancelled when the END_STREAM the
     * tap added reaches it, and the runtime writes nothing more on the stream.
     */
    void cancelPending() {
        cancelPending = true;
    }

    /** Wraps a sub-protocol selector (Helidon's gRPC one) so each stream it serves is released when done. */
    static Http2SubProtocolSelector around(Http2SubProtocolSelector selector) {
        return (ConnectionContext ctx, HttpPrologue prologue, Http2Headers headers, Http2StreamWriter writer,
                int streamId, Http2Settings serverSettings, Http2Settings clientSettings, StreamFlowControl flowControl,
                Http2StreamState state, Router router) -> {
            StreamRelease release = new StreamRelease(ctx instanceof ServedLink link ? link : null, streamId);
            SubProtocolResult result = selector.subProtocol(ctx, prologue, headers, release.new EndWatch(writer, streamId),
                    streamId, serverSettings, clientSettings, flowControl, state, router);
            if (!result.supported()) {
                return result;
            }
            release.call = result.subProtocol();
            if (release.link != null) {
                release.link.register(streamId, release);
            }
            return new SubProtocolResult(true, release);
        };
    }

    @Override
    public void init() {
        CURRENT.set(this);
        try {
            call.init();
        } finally {
            CURRENT.remove();
        }
    }

    @Override
    public Http2StreamState streamState() {
        if (reset || (remoteEnded && localEnd.getCount() == 0)) {
            if (link != null) {
                link.unregister(streamId, this);
            }
            return Http2StreamState.CLOSED;
        }
        // Never HALF_CLOSED_LOCAL: Helidon would leave its read loop and keep the slot.
        return Http2StreamState.OPEN;
    }

    @Override
    public void rstStream(Http2RstStream rstStream) {
        // Helidon 4.1.7 does not forward RST_STREAM to sub-protocols (it frees the slot itself).
        reset = true;
        localEnd.countDown();
        call.rstStream(rstStream);
    }

    @Override
    public void windowUpdate(Http2WindowUpdate update) {
        call.windowUpdate(update);
    }

    @Override
    public void data(Http2FrameHeader header, BufferData data) {
        boolean end = header.flags(Http2FrameTypes.DATA).endOfStream();
        if (reset) {
            return;
        }
        if (cancelPending) {
            // Request data after a reset has nobody to go to; the END_STREAM is ResetTap's.
            if (end) {
                reset = true;
                remoteEnded = true;
                localEnd.countDown();
                if (!callEnded) {
                    // A call that had already closed was not cancelled.
                    onCancel.run();
                }
            }
            return;
        }
        if (localEnd.getCount() == 0) {
            // The call is closed: later request data has nobody to go to (and could close it twice).
            remoteEnded |= end;
            return;
        }
        call.data(header, data);
        if (!end) {
            return;
        }
        remoteEnded = true;
        try {
            // The client is done; the call may still be answering from another thread. The
            // slot is busy until it closes; a closing link interrupts this wait.
            localEnd.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            reset = true;
        }
    }

    /** The stream writer handed to the gRPC handler: notices when the server ends its half. */
    private final class EndWatch implements Http2StreamWriter {
        private final Http2StreamWriter writer;
        private final int streamId;

        EndWatch(Http2StreamWriter writer, int streamId) {
            this.writer = writer;
            this.streamId = streamId;
        }

        // After the supervisor's reset nothing more goes out on the stream: the supervisor
        // has forgotten it, and Helidon 4.1.7's client fails its connection on frames for
        // streams it does not know.
        private boolean silenced() {
            return cancelPending;
        }

        @Override
        public void write(Http2FrameData frame) {
            if (silenced()) {
                return;
            }
            try {
                writer.write(frame);
            } finally {
                if (frame.header().streamId() == streamId && frame.header().type() == Http2FrameType.RST_STREAM) {
                    // A reset ends both halves.
                    reset = true;
                    localEnd.countDown();
                }
            }
        }

        @Override
        public void writeData(Http2FrameData frame, FlowControl.Outbound flowControl) {
            if (silenced()) {
                localEnd.countDown();
                return;
            }
            try {
                writer.writeData(frame, flowControl);
            } finally {
                if (frame.header().flags(Http2FrameTypes.DATA).endOfStream()) {
                    callEnded = true;
                    localEnd.countDown();
                }
            }
        }

        @Override
        public int writeHeaders(Http2Headers headers, int id, Http2Flag.HeaderFlags flags,
                FlowControl.Outbound flowControl) {
            if (silenced()) {
                localEnd.countDown();
                return 0;
            }
            try {
                return writer.writeHeaders(headers, id, flags, flowControl);
            } finally {
                if (flags.endOfStream()) {
                    callEnded = true;
                    localEnd.countDown();
                }
            }
        }

        @Override
        public int writeHeaders(Http2Headers headers, int id, Http2Flag.HeaderFlags flags, Http2FrameData dataFrame,
                FlowControl.Outbound flowControl) {
            if (silenced()) {
                localEnd.countDown();
                return 0;
            }
            try {
                return writer.writeHeaders(headers, id, flags, dataFrame, flowControl);
            } finally {
                if (flags.endOfStream() || dataFrame.header().flags(Http2FrameTypes.DATA).endOfStream()) {
                    callEnded = true;
                    localEnd.countDown();
                }
            }
        }
    }
}
