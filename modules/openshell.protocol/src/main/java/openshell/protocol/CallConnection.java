package openshell.protocol;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import java.util.function.Supplier;

import io.grpc.Channel;
import io.helidon.common.buffers.DataWriter;
import io.helidon.common.socket.HelidonSocket;
import io.helidon.webclient.http2.Http2ClientConnection;
import io.helidon.webclient.http2.Http2ClientImpl;

/**
 * One HTTP/2 client connection whose gRPC calls are {@link LinkCall} streams, with its life
 * (open, closed and why), its stream slots, timers and reader threads: what the Sandbox
 * Protocol link and the gateway connection share. Each owner keeps its socket and its public
 * API; this holds none of Helidon's types in a public signature.
 */
final class CallConnection {
    private final AtomicBoolean open = new AtomicBoolean(true);
    private final CompletableFuture<Refusal> closed = new CompletableFuture<>();
    private final ExecutorService executor = Executors.newVirtualThreadPerTaskExecutor();
    private final ScheduledExecutorService timers;
    private final Semaphore streams;
    private final int maxStreams;
    private final HelidonSocket socket;
    private final Http2ClientImpl http2Client;
    private final Http2ClientConnection connection;
    private final DataWriter frames;
    private final ForgottenStreamTap tap;
    private final StreamWindows windows;
    private final Channel channel;
    private final Supplier<Optional<String>> bearer;
    private final String authority;
    private final String scheme;
    private final Consumer<Refusal> onClose;

    /**
     * @param id         the connection's name in logs and thread names
     * @param socket     connected, TLS up if any
     * @param maxStreams calls open at once; the next one fails RESOURCE_EXHAUSTED
     * @param bearer     the token of each call's {@code authorization} header, if any
     * @param authority  each call's {@code :authority}
     * @param scheme     each call's {@code :scheme}
     * @param onClose    runs once when the connection closes (the owner closes its socket)
     */
    CallConnection(String id, HelidonSocket socket, int maxStreams, Supplier<Optional<String>> bearer, String authority,
                   String scheme, Consumer<Refusal> onClose) {
        this.socket = socket;
        this.maxStreams = maxStreams;
        this.streams = new Semaphore(maxStreams);
        this.bearer = bearer;
        this.authority = authority;
        this.scheme = scheme;
        this.onClose = onClose;
        this.timers = Executors.newSingleThreadScheduledExecutor(Thread.ofPlatform().daemon().name(id + "-timer").factory());
        Http2Connections.Opened opened = Http2Connections.open(socket, id, executor, () -> close(Refusal.TRANSPORT_FAILED));
        this.http2Client = opened.client();
        this.connection = opened.connection();
        this.frames = opened.writer();
        this.tap = opened.tap();
        this.windows = opened.windows();
        this.channel = new LinkChannel(new Host());
    }

    Channel channel() {
        return channel;
    }

    boolean isOpen() {
        return open.get();
    }

    CompletableFuture<Refusal> closed() {
        return closed;
    }

    Optional<Refusal> closedFor() {
        return Optional.ofNullable(closed.getNow(null));
    }

    /** @return calls and streams open now */
    int openStreams() {
        return maxStreams - streams.availablePermits();
    }

    /**
     * Waits until the server's SETTINGS arrived, the sign that it serves HTTP/2 on the connection.
     * A peer that finished TLS and then closed, or went quiet, would otherwise look like a link
     * until its first call failed.
     *
     * @param wait how long at most
     * @return whether they arrived before the connection closed and before the wait ran out
     */
    boolean awaitPeerSettings(java.time.Duration wait) {
        try {
            CompletableFuture.anyOf(tap.peerSettings(), closed).get(wait.toNanos(), TimeUnit.NANOSECONDS);
        } catch (java.util.concurrent.TimeoutException | java.util.concurrent.ExecutionException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
        return tap.peerSettings().isDone() && open.get();
    }

    /** @return frames dropped so far because their stream was already closed */
    long framesForClosedStreams() {
        return tap.framesDropped();
    }

    /** @return bytes read on the connection and not yet given back to its window */
    int connectionUnreturned() {
        return windows.connectionUnreturned();
    }

    /**
     * @param streamId a stream of this connection
     * @return whether a call closed it, so late frames for it are dropped
     */
    boolean forgot(int streamId) {
        return tap.forgets(streamId);
    }

    /** @return the one writer of every frame, for frames of the owner's own (pings) */
    DataWriter frames() {
        return frames;
    }

    /** Closes once: the HTTP/2 connection, then the owner's socket; pending deadlines still fire. */
    void close(Refusal reason) {
        if (open.compareAndSet(true, false)) {
            try {
                connection.close();
            } catch (RuntimeException ignored) {
                // the socket close below is what matters
            }
            onClose.accept(reason);
            executor.shutdownNow();
            closed.complete(reason);
            timers.schedule(timers::shutdownNow, 1, TimeUnit.MINUTES);
        }
    }

    /** What a call needs of the connection. */
    private final class Host implements CallHost {
        @Override
        public boolean isOpen() {
            return open.get();
        }

        @Override
        public Optional<Refusal> closedFor() {
            return CallConnection.this.closedFor();
        }

        @Override
        public Optional<String> bearer() {
            return bearer.get();
        }

        @Override
        public boolean takeStream() {
            return streams.tryAcquire();
        }

        @Override
        public void returnStream() {
            streams.release();
        }

        @Override
        public String authority() {
            return authority;
        }

        @Override
        public String scheme() {
            return scheme;
        }

        @Override
        public ExecutorService executor() {
            return executor;
        }

        @Override
        public void schedule(Duration delay, Runnable task) {
            try {
                timers.schedule(task, delay.toNanos(), TimeUnit.NANOSECONDS);
            } catch (RejectedExecutionException e) {
                task.run();
            }
        }

        @Override
        public Http2ClientConnection connection() {
            return connection;
        }

        @Override
        public HelidonSocket helidonSocket() {
            return socket;
        }

        @Override
        public Http2ClientImpl http2Client() {
            return http2Client;
        }

        @Override
        public void forget(int streamId) {
            tap.forget(streamId);
        }

        @Override
        public StreamWindows windows() {
            return windows;
        }
    }
}
