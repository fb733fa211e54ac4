package openshell.protocol;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.Optional;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.Deadline;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.helidon.common.buffers.BufferData;
import io.helidon.http.Header;
import io.helidon.http.HeaderNames;
import io.helidon.http.Headers;
import io.helidon.http.Method;
import io.helidon.http.WritableHeaders;
import io.helidon.http.http2.Http2Flag;
import io.helidon.http.http2.Http2FrameData;
import io.helidon.http.http2.Http2Headers;
import io.helidon.http.http2.Http2Settings;
import io.helidon.http.http2.Http2StreamState;
import io.helidon.http.http2.WindowSize;
import io.helidon.webclient.http2.Http2ClientStream;
import io.helidon.webclient.http2.Http2StreamConfig;
import io.helidon.webclient.http2.StreamTimeoutException;

/**
 * One gRPC call as one HTTP/2 stream of the link: length-prefixed messages in DATA frames,
 * status in the trailers. Response messages are handed to the listener only against
 * {@link #request(int)} demand; an unread stream stops acknowledging its window, so a slow
 * consumer slows its own sender and no other stream.
 */
final class LinkCall<Q, R> extends ClientCall<Q, R> {
    private static final Duration POLL = Duration.ofMillis(200);
    /**
     * Longest wait of an idle reader between its looks at whether its own side ended the call
     * (a cancel or a deadline; a closed link interrupts it at once): each empty wait doubles the
     * next from {@link #POLL}, so a quiet long-lived stream wakes twice a second rather than five
     * times, and any frame starts again from {@link #POLL}.
     */
    static final Duration IDLE_POLL_MAX = Duration.ofSeconds(2);
    private static final Duration HEADER_WAIT = Duration.ofMillis(200);
    private static final Http2StreamConfig STREAM_CONFIG = new Http2StreamConfig() {
        @Override
        public boolean priorKnowledge() {
            return true;
        }

        @Override
        public int priority() {
            return 0;
        }

        @Override
        public Duration readTimeout() {
            return HEADER_WAIT;
        }
    };

    /**
     * Calls whose runtime side sends under {@link CreditedStream} message credits: their stream
     * starts with {@link ProtocolLimits#CREDITED_STREAM_WINDOW_BYTES}, room for every credit.
     */
    private static final java.util.Set<String> CREDITED = java.util.Set.of(
            openshell.protocol.wire.SandboxRuntimeGrpc.getRelayMethod().getFullMethodName(),
            openshell.protocol.wire.SandboxRuntimeGrpc.getAttachProcessMethod().getFullMethodName());

    private final CallHost link;
    private final MethodDescriptor<Q, R> method;
    private final Semaphore demand = new Semaphore(0);
    private final AtomicBoolean finished = new AtomicBoolean();
    private final AtomicBoolean uploadEnded = new AtomicBoolean();
    private volatile Status cancelled;
    private final AtomicBoolean holdsStream = new AtomicBoolean();
    private final AtomicBoolean resetSent = new AtomicBoolean();
    private final Object writeLock = new Object();
    private volatile Listener<R> listener;
    private volatile CallStream stream;
    // set before the reader starts; used by the reader thread only
    private StreamWindows.Stream window;

    private final CallOptions options;
    private final CallbackQueue callbacks;

    LinkCall(CallHost link, MethodDescriptor<Q, R> method, CallOptions options) {
        this.link = link;
        this.method = method;
        this.options = options;
        this.callbacks = new CallbackQueue(options.getExecutor());
    }

    @Override
    public void start(Listener<R> responseListener, Metadata metadata) {
        this.listener = responseListener;
        Deadline deadline = options.getDeadline();
        if (deadline != null) {
            link.schedule(Duration.ofNanos(Math.max(0, deadline.timeRemaining(TimeUnit.NANOSECONDS))), () -> {
                if (!finished.get()) {
                    CallStream opened = stream;
                    if (opened != null) {
                        reset(opened);
                    }
                    finish(Status.DEADLINE_EXCEEDED.withDescription("deadline " + deadline + " passed"), new Metadata());
                }
            });
        }
        if (!link.isOpen()) {
            finish(Status.UNAVAILABLE.withDescription("link closed: " + link.closedFor().orElse(Refusal.TRANSPORT_FAILED)),
                    new Metadata());
            return;
        }
        Optional<String> token;
        try {
            token = link.bearer();
        } catch (ProtocolException e) {
            finish(Status.UNAUTHENTICATED.withDescription(e.getMessage()), new Metadata());
            return;
        }
        WritableHeaders<?> headers = WritableHeaders.create();
        headers.add(HeaderNames.CONTENT_TYPE, "application/grpc");
        headers.add(HeaderNames.create("te"), "trailers");
        token.ifPresent(t -> headers.add(HeaderNames.create("authorization"), "Bearer " + t));
        for (String key : metadata.keys()) {
            if (key.endsWith(Metadata.BINARY_HEADER_SUFFIX)) {
                byte[] value = metadata.get(Metadata.Key.of(key, Metadata.BINARY_BYTE_MARSHALLER));
                headers.add(HeaderNames.create(key), Base64.getEncoder().withoutPadding().encodeToString(value));
            } else if (!key.equals("authorization")) {
                headers.add(HeaderNames.create(key), metadata.get(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER)));
            }
        }
        Http2Headers http2 = Http2Headers.create(headers)
                .method(Method.POST)
                .path("/" + method.getFullMethodName())
                .scheme(link.scheme())
                .authority(link.authority());
        if (!link.takeStream()) {
            finish(Status.RESOURCE_EXHAUSTED.withDescription("the connection has as many calls and streams open as it"
                    + " allows (" + ProtocolLimits.MAX_CONCURRENT_STREAMS + " on a Sandbox Protocol link)"), new Metadata());
            return;
        }
        holdsStream.set(true);
        try {
            CallStream opened = new CallStream(link);
            stream = opened;
            synchronized (writeLock) {
                opened.writeHeaders(http2, false);
            }
            window = link.windows().stream(opened.streamId(), CREDITED.contains(method.getFullMethodName())
                    ? ProtocolLimits.CREDITED_STREAM_WINDOW_BYTES : WindowSize.DEFAULT_WIN_SIZE);
        } catch (RuntimeException e) {
            CallStream failed = stream;
            if (failed != null) {
                failed.close();
            }
            finish(Status.UNAVAILABLE.withDescription("cannot open a stream").withCause(e), new Metadata());
            return;
        }
        try {
            link.executor().execute(this::receive);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // The link closed between opening the stream and starting its reader: the call fails like any
            // call on a closed link, with a status, never with an exception out of start().
            stream.close();
            finish(Status.UNAVAILABLE.withDescription("link closed while the call started").withCause(e), new Metadata());
        }
    }

    @Override
    public void request(int count) {
        demand.release(count);
    }

    @Override
    public void cancel(String message, Throwable cause) {
        Status status = Status.CANCELLED.withDescription(message).withCause(cause);
        // Set before the reset: the reader may see the reset stream fail first, and the caller
        // must still learn that its own cancel ended the call, not a link failure.
        cancelled = status;
        CallStream opened = stream;
        if (opened != null && !finished.get()) {
            reset(opened);
        }
        finish(status, new Metadata());
    }

    @Override
    public void halfClose() {
        CallStream opened = stream;
        if (opened == null || finished.get()) {
            return;
        }
        try {
            endUpload(opened);
        } catch (RuntimeException e) {
            finish(Status.UNAVAILABLE.withDescription("link failed: " + e.getMessage()).withCause(e), new Metadata());
        }
    }

    // Ends the request half once. Also sent after the server's trailers: a stream is only
    // closed, and its slot on the runtime freed, when both halves have ended (StreamRelease).
    private void endUpload(CallStream opened) {
        synchronized (writeLock) {
            if (uploadEnded.compareAndSet(false, true)) {
                opened.writeData(BufferData.empty(), true);
            }
        }
    }

    // RST_STREAM only while the request half is open. After our END_STREAM the runtime frees
    // the slot once its call ends; a reset arriving after Helidon 4.1.7 pruned the stream
    // would be a connection error there (GOAWAY), closing the whole link.
    private void reset(CallStream opened) {
        synchronized (writeLock) {
            if (uploadEnded.compareAndSet(false, true)) {
                resetSent.set(true);
                try {
                    opened.cancel();
                } catch (RuntimeException ignored) {
                    // the call ends either way
                }
            }
        }
    }

    private void serverEnded(CallStream opened, Headers trailers) {
        try {
            endUpload(opened);
        } catch (RuntimeException e) {
            // the link is failing; the call's outcome is already in the trailers
        }
        finish(status(trailers), metadata(trailers));
    }

    @Override
    public void sendMessage(Q message) {
        CallStream opened = stream;
        if (opened == null || finished.get()) {
            return;
        }
        byte[] payload;
        try (InputStream in = method.streamRequest(message)) {
            payload = in.readAllBytes();
        } catch (IOException e) {
            cancel("cannot serialize", e);
            return;
        }
        if (payload.length > ProtocolLimits.MAX_CONTROL_MESSAGE_BYTES) {
            cancel("message of " + payload.length + " bytes exceeds " + ProtocolLimits.MAX_CONTROL_MESSAGE_BYTES, null);
            return;
        }
        BufferData frame = BufferData.create(5 + payload.length);
        frame.write(0);
        frame.writeInt32(payload.length);
        frame.write(payload);
        try {
            synchronized (writeLock) {
                if (!uploadEnded.get()) {
                    opened.writeData(frame, false);
                }
            }
        } catch (RuntimeException e) {
            // The link failed under us: the call fails, the caller's thread does not throw.
            finish(Status.UNAVAILABLE.withDescription("link failed: " + e.getMessage()).withCause(e), new Metadata());
        }
    }

    @Override
    public boolean isReady() {
        return !finished.get() && link.isOpen();
    }

    private void receive() {
        CallStream opened = stream;
        try {
            receive(opened);
        } finally {
            drainThenForget(opened);
        }
    }

    /**
     * Keeps the stream registered until the runtime ended it (trailers or END_STREAM) or the
     * link closed, reading and dropping what still arrives. Helidon 4.1.7's client connection
     * fails the whole link on HEADERS, WINDOW_UPDATE or RST_STREAM for a stream it no longer
     * knows, and a cancelled call's late status or a window update is exactly that.
     */
    private void drainThenForget(CallStream opened) {
        long graceEnds = System.nanoTime() + ProtocolLimits.RESET_GRACE.toNanos();
        try {
            // After our reset, Helidon's client marks the stream CLOSED itself: that is not the runtime's
            // end, whose status may still be on its way (and would fail the link once forgotten).
            while (link.isOpen() && !opened.trailers().isDone() && !(endedByRuntime(opened) && !resetSent.get())
                    && !(resetSent.get() && System.nanoTime() - graceEnds > 0)) {
                Http2FrameData frame;
                try {
                    frame = opened.readOne(POLL);
                } catch (StreamTimeoutException e) {
                    continue;
                }
                if (frame != null) {
                    // The call is over: the stream's window stays, the connection's comes back.
                    link.windows().connectionRead(frame.header().length());
                    if ((frame.header().flags() & Http2Flag.END_OF_STREAM) != 0) {
                        break;
                    }
                }
            }
        } catch (RuntimeException e) {
            // the stream is unusable either way
        } finally {
            opened.close();
        }
    }

    // Read bytes go back to the windows on reading, not on delivery: message credits bound what
    // waits for the application.
    private void read(Http2FrameData frame) {
        window.read(frame.header().length(), (frame.header().flags() & Http2Flag.END_OF_STREAM) != 0);
    }

    private static boolean endedByRuntime(CallStream opened) {
        Http2StreamState state = opened.streamState();
        return state == Http2StreamState.CLOSED || state == Http2StreamState.HALF_CLOSED_REMOTE;
    }

    private void receive(CallStream opened) {
        try {
            Http2Headers headers = null;
            Duration wait = POLL;
            while (headers == null) {
                try {
                    // Helidon's readHeaders() waits its fixed read timeout; this waits as long as idle calls do.
                    if (opened.readOne(wait) != null) {
                        throw new IllegalStateException("DATA before the response headers");
                    }
                    headers = opened.readHeaders();
                } catch (StreamTimeoutException e) {
                    if (!alive()) {
                        return;
                    }
                    wait = idleLonger(wait);
                }
            }
            wait = POLL;
            Headers first = headers.httpHeaders();
            if (first.contains(HeaderNames.create("grpc-status")) || !opened.hasEntity()) {
                serverEnded(opened, first);
                return;
            }
            Metadata initial = metadata(first);
            callbacks.run(() -> listener.onHeaders(initial));
            byte[] pending = new byte[0];
            while (true) {
                if (opened.trailers().isDone()) {
                    serverEnded(opened, opened.trailers().join());
                    return;
                }
                Http2FrameData frame;
                try {
                    frame = opened.readOne(wait);
                } catch (StreamTimeoutException e) {
                    frame = null;
                }
                if (frame == null) {
                    if (!alive()) {
                        return;
                    }
                    wait = idleLonger(wait);
                    continue;
                }
                wait = POLL;
                pending = append(pending, frame.data().readBytes());
                pending = deliver(pending);
                if (pending == null) {
                    // The call ended here (a reset follows): only the connection gets these bytes back.
                    link.windows().connectionRead(frame.header().length());
                    return;
                }
                read(frame);
            }
        } catch (RuntimeException e) {
            // A closed link interrupts its readers: say why it closed, not how the read ended.
            String why = link.isOpen() ? "stream failed: " + e.getMessage()
                    : "link closed: " + link.closedFor().orElse(Refusal.TRANSPORT_FAILED);
            finish(Status.UNAVAILABLE.withDescription(why).withCause(e), new Metadata());
        }
    }

    // Hands complete messages to the listener; returns the unconsumed tail, or null if the call ended.
    private byte[] deliver(byte[] pending) {
        int offset = 0;
        while (pending.length - offset >= 5) {
            if (pending[offset] != 0) {
                cancel("compressed messages are not part of the protocol", null);
                return null;
            }
            int length = ((pending[offset + 1] & 0xff) << 24) | ((pending[offset + 2] & 0xff) << 16)
                    | ((pending[offset + 3] & 0xff) << 8) | (pending[offset + 4] & 0xff);
            if (length < 0 || length > ProtocolLimits.MAX_CONTROL_MESSAGE_BYTES) {
                cancel("response message exceeds " + ProtocolLimits.MAX_CONTROL_MESSAGE_BYTES, null);
                return null;
            }
            if (pending.length - offset - 5 < length) {
                break;
            }
            R message = method.parseResponse(new ByteArrayInputStream(pending, offset + 5, length));
            offset += 5 + length;
            if (!awaitDemand()) {
                return null;
            }
            callbacks.run(() -> listener.onMessage(message));
        }
        byte[] tail = new byte[pending.length - offset];
        System.arraycopy(pending, offset, tail, 0, tail.length);
        return tail;
    }

    private boolean awaitDemand() {
        try {
            while (!demand.tryAcquire(POLL.toMillis(), TimeUnit.MILLISECONDS)) {
                if (!alive()) {
                    return false;
                }
            }
            return !finished.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    static Duration idleLonger(Duration wait) {
        Duration next = wait.multipliedBy(2);
        return next.compareTo(IDLE_POLL_MAX) > 0 ? IDLE_POLL_MAX : next;
    }

    private boolean alive() {
        if (finished.get()) {
            return false;
        }
        if (!link.isOpen()) {
            finish(Status.UNAVAILABLE.withDescription("link closed: " + link.closedFor().orElse(Refusal.TRANSPORT_FAILED)),
                    new Metadata());
            return false;
        }
        return true;
    }

    private void finish(Status outcome, Metadata outcomeTrailers) {
        Status cancel = cancelled;
        Status status = cancel == null ? outcome : cancel;
        Metadata trailers = cancel == null ? outcomeTrailers : new Metadata();
        if (finished.compareAndSet(false, true)) {
            // The stream itself is forgotten by drainThenForget once the runtime ended it (or,
            // after our reset, once RESET_GRACE passed); the supervisor's own slot is free now.
            if (holdsStream.compareAndSet(true, false)) {
                link.returnStream();
            }
            Listener<R> target = listener;
            if (target != null) {
                callbacks.run(() -> target.onClose(status, trailers));
            }
        }
    }

    private static byte[] append(byte[] head, byte[] tail) {
        if (head.length == 0) {
            return tail;
        }
        byte[] joined = new byte[head.length + tail.length];
        System.arraycopy(head, 0, joined, 0, head.length);
        System.arraycopy(tail, 0, joined, head.length, tail.length);
        return joined;
    }

    private static Status status(Headers headers) {
        String code = headers.first(HeaderNames.create("grpc-status")).orElse(null);
        if (code == null) {
            return Status.INTERNAL.withDescription("response without grpc-status");
        }
        Status status;
        try {
            status = Status.fromCodeValue(Integer.parseInt(code.trim()));
        } catch (NumberFormatException e) {
            return Status.INTERNAL.withDescription("bad grpc-status " + code);
        }
        return headers.first(HeaderNames.create("grpc-message"))
                .map(message -> status.withDescription(URLDecoder.decode(message, StandardCharsets.UTF_8)))
                .orElse(status);
    }

    private static Metadata metadata(Headers headers) {
        Metadata metadata = new Metadata();
        for (Header header : headers) {
            String name = header.name().toLowerCase(java.util.Locale.ROOT);
            if (name.startsWith(":") || name.equals("grpc-status") || name.equals("grpc-message")
                    || name.equals("content-type") || name.equals("te")) {
                continue;
            }
            if (name.endsWith(Metadata.BINARY_HEADER_SUFFIX)) {
                metadata.put(Metadata.Key.of(name, Metadata.BINARY_BYTE_MARSHALLER), Base64.getDecoder().decode(header.get()));
            } else {
                metadata.put(Metadata.Key.of(name, Metadata.ASCII_STRING_MARSHALLER), header.get());
            }
        }
        return metadata;
    }

    /**
     * Runs listener callbacks one at a time, in order, on the executor the caller chose
     * (grpc-java's blocking stubs drain theirs on the calling thread).
     */
    private static final class CallbackQueue {
        private final java.util.concurrent.Executor executor;
        private final java.util.ArrayDeque<Runnable> queue = new java.util.ArrayDeque<>();
        private boolean draining;

        CallbackQueue(java.util.concurrent.Executor executor) {
            this.executor = executor;
        }

        void run(Runnable callback) {
            synchronized (queue) {
                queue.add(callback);
                if (draining) {
                    return;
                }
                draining = true;
            }
            if (executor == null) {
                drain();
            } else {
                executor.execute(this::drain);
            }
        }

        private void drain() {
            while (true) {
                Runnable next;
                synchronized (queue) {
                    next = queue.poll();
                    if (next == null) {
                        draining = false;
                        return;
                    }
                }
                next.run();
            }
        }
    }

    /** Helidon's client stream, opened by {@link #writeHeaders}; the subclass only reaches its constructor. */
    static final class CallStream extends Http2ClientStream {
        private final CallHost link;

        CallStream(CallHost link) {
            super(link.connection(), Http2Settings.create(), link.helidonSocket(), STREAM_CONFIG,
                    link.http2Client().prototype(), link.connection().streamIdSequence());
            this.link = link;
        }

        /** The connection's reader forgets the stream first, so no late frame for it reaches Helidon after it did. */
        @Override
        public void close() {
            link.forget(streamId());
            super.close();
        }
    }
}
