package openshell.protocol;

import java.io.IOException;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import javax.net.ssl.SSLSocket;

import io.grpc.Channel;
import io.helidon.common.buffers.BufferData;
import io.helidon.common.buffers.DataWriter;
import io.helidon.common.socket.HelidonSocket;
import io.helidon.common.socket.TlsSocket;
import io.helidon.http.http2.Http2FrameData;
import io.helidon.http.http2.Http2Ping;
import io.helidon.webclient.http2.Http2ClientConnection;
import io.helidon.webclient.http2.Http2ClientImpl;

/**
 * The supervisor's one protocol connection, whichever side dialed: TLS client pinned to the
 * launch CA, then one Helidon HTTP/2 client connection that all calls share as streams.
 * Helidon 4.1.7's own gRPC channel opens a fresh TCP connection per call, which can neither
 * run over a Unix socket nor over a socket the runtime dialed, so {@link #channel()} is a
 * grpc-java {@link Channel} written over Helidon's public HTTP/2 client connection and
 * stream API instead.
 */
public final class SupervisorLink implements AutoCloseable {
    private static final System.Logger LOGGER = System.getLogger(SupervisorLink.class.getName());
    private static final AtomicLong IDS = new AtomicLong();
    private static final Duration WATCHDOG_PERIOD = Duration.ofMillis(500);

    private final ChannelSocket socket;
    private final TokenSlot tokens;
    private final String serverName;
    private final String id = "supervisor-link-" + IDS.incrementAndGet();
    private final AtomicBoolean open = new AtomicBoolean(true);
    private final CompletableFuture<Refusal> closed = new CompletableFuture<>();
    private final ExecutorService executor = Executors.newVirtualThreadPerTaskExecutor();
    private final ScheduledExecutorService timers = Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().daemon().name("supervisor-link-timer").factory());
    private final Http2ClientImpl http2Client;
    private final Http2ClientConnection connection;
    private final TlsSocket helidonSocket;
    private final Channel channel;
    private final Semaphore streams = new Semaphore(ProtocolLimits.MAX_CONCURRENT_STREAMS);
    private volatile long lastPingNanos = System.nanoTime();
    private final DataWriter frames;

    private SupervisorLink(ChannelSocket socket, SSLSocket tls, TokenSlot tokens, String serverName) {
        this.socket = socket;
        this.tokens = tokens;
        this.serverName = serverName;
        this.helidonSocket = TlsSocket.client(tls, id);
        Http2Connections.Opened opened = Http2Connections.open(helidonSocket, id, executor,
                () -> close(Refusal.TRANSPORT_FAILED));
        this.http2Client = opened.client();
        this.connection = opened.connection();
        // One lock for every write: Helidon writes each frame as one call, and so does ping().
        this.frames = opened.writer();
        this.channel = new LinkChannel(new Host());
        Thread.ofVirtual().name(id + "-keepalive").start(this::keepalive);
    }

    static SupervisorLink open(ChannelSocket socket, TlsPin pin, TokenSlot tokens, UnixPeerPolicy peerPolicy) {
        try {
            LinkSecurity.checkPeer(peerPolicy, socket);
            SSLSocket tls = LinkSecurity.call(pin.sslContext(), pin.serverName(), socket);
            return new SupervisorLink(socket, tls, tokens, pin.serverName());
        } catch (IOException e) {
            closeQuietly(socket);
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "TLS to " + pin.serverName() + " failed", e);
        } catch (RuntimeException e) {
            closeQuietly(socket);
            throw e;
        }
    }

    /**
     * The gRPC channel for generated stubs; every call carries the slot's current sandbox
     * token.
     *
     * @return the channel
     */
    public Channel channel() {
        return channel;
    }

    /**
     * Whether the link is still up.
     *
     * @return true while open
     */
    public boolean isOpen() {
        return open.get();
    }

    /**
     * Completes with the reason once the link is closed (including a keepalive timeout).
     *
     * @return the future reason
     */
    public CompletableFuture<Refusal> closed() {
        return closed;
    }

    /**
     * Why the link closed, if it has.
     *
     * @return the reason
     */
    public Optional<Refusal> closedFor() {
        return Optional.ofNullable(closed.getNow(null));
    }

    @Override
    public void close() {
        close(Refusal.TRANSPORT_FAILED);
    }

    void close(Refusal reason) {
        if (open.compareAndSet(true, false)) {
            LOGGER.log(System.Logger.Level.INFO, id + " closed: " + reason);
            try {
                connection.close();
            } catch (RuntimeException ignored) {
                // the socket close below is what matters
            }
            closeQuietly(socket);
            executor.shutdownNow();
            closed.complete(reason);
            // Pending deadlines still fire so no caller waits forever.
            timers.schedule(timers::shutdownNow, 1, TimeUnit.MINUTES);
        }
    }

    /**
     * Calls and streams open on this link right now.
     *
     * @return count, at most {@link ProtocolLimits#MAX_CONCURRENT_STREAMS}
     */
    public int openStreams() {
        return ProtocolLimits.MAX_CONCURRENT_STREAMS - streams.availablePermits();
    }

    /** A stream slot for a new call, or false at {@link ProtocolLimits#MAX_CONCURRENT_STREAMS}. */
    boolean takeStream() {
        return streams.tryAcquire();
    }

    void returnStream() {
        streams.release();
    }

    void schedule(Duration delay, Runnable task) {
        try {
            timers.schedule(task, delay.toNanos(), TimeUnit.NANOSECONDS);
        } catch (RejectedExecutionException e) {
            task.run();
        }
    }

    /** What a call needs of the link; a view, so none of Helidon's types join the link's API. */
    private final class Host implements CallHost {
        @Override
        public boolean isOpen() {
            return SupervisorLink.this.isOpen();
        }

        @Override
        public Optional<Refusal> closedFor() {
            return SupervisorLink.this.closedFor();
        }

        @Override
        public Optional<String> bearer() {
            return Optional.of(tokens.current().sandboxToken());
        }

        @Override
        public boolean takeStream() {
            return SupervisorLink.this.takeStream();
        }

        @Override
        public void returnStream() {
            SupervisorLink.this.returnStream();
        }

        @Override
        public String authority() {
            return serverName;
        }

        @Override
        public String scheme() {
            return "https";
        }

        @Override
        public ExecutorService executor() {
            return executor;
        }

        @Override
        public void schedule(Duration delay, Runnable task) {
            SupervisorLink.this.schedule(delay, task);
        }

        @Override
        public Http2ClientConnection connection() {
            return connection;
        }

        @Override
        public HelidonSocket helidonSocket() {
            return helidonSocket;
        }

        @Override
        public Http2ClientImpl http2Client() {
            return http2Client;
        }
    }

    private void keepalive() {
        while (open.get()) {
            try {
                Thread.sleep(WATCHDOG_PERIOD);
            } catch (InterruptedException e) {
                return;
            }
            long now = System.nanoTime();
            long quiet = now - socket.lastReadNanos();
            if (quiet > ProtocolLimits.KEEPALIVE_TIMEOUT.toNanos()) {
                close(Refusal.PEER_SILENT);
                return;
            }
            if (quiet > ProtocolLimits.KEEPALIVE_INTERVAL.toNanos()
                    && now - lastPingNanos > ProtocolLimits.KEEPALIVE_INTERVAL.toNanos()) {
                lastPingNanos = now;
                try {
                    ping();
                } catch (RuntimeException e) {
                    close(Refusal.TRANSPORT_FAILED);
                    return;
                }
            }
        }
    }

    /**
     * Sends a fresh HTTP/2 PING. Not Helidon 4.1.7's {@code Http2ClientStream.sendPing()}: it
     * writes one shared static frame whose payload the first write consumes, so every later
     * ping went out broken and an idle link died of PEER_SILENT after its second interval.
     */
    private void ping() {
        Http2FrameData frame = Http2Ping.create().toFrameData();
        frames.writeNow(BufferData.create(frame.header().write(), frame.data()));
    }

    private static void closeQuietly(ChannelSocket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // already failing
        }
    }
}
