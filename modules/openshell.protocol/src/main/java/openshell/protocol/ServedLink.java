package openshell.protocol;

import java.io.IOException;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.AbstractExecutorService;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import javax.net.ssl.SSLSocket;

import io.helidon.common.buffers.DataReader;
import io.helidon.common.concurrency.limits.FixedLimit;
import io.helidon.common.buffers.DataWriter;
import io.helidon.common.socket.PeerInfo;
import io.helidon.common.socket.SocketWriter;
import io.helidon.common.socket.TlsSocket;
import io.helidon.webserver.ConnectionContext;
import io.helidon.webserver.ListenerContext;
import io.helidon.webserver.Router;
import io.helidon.webserver.spi.ServerConnection;

/**
 * One protocol connection on the runtime side, from socket to Helidon's HTTP/2 server
 * connection. Helidon's {@code ServerListener} only accepts from its own TCP
 * {@code ServerSocket}; this class plays its {@code ConnectionHandler} role for a socket we
 * accepted or dialed ourselves (Unix or TCP, either direction), through Helidon's public
 * {@link ConnectionContext} SPI, so HTTP/2 and gRPC routing stay Helidon's.
 */
final class ServedLink implements ConnectionContext {
    private static final System.Logger LOGGER = System.getLogger(ServedLink.class.getName());
    private static final AtomicLong IDS = new AtomicLong();
    private static final ThreadLocal<ServedLink> CURRENT = new ThreadLocal<>();

    private final RuntimeEndpoint endpoint;
    private final ChannelSocket socket;
    private final String id = "link-" + IDS.incrementAndGet();
    private final AtomicBoolean open = new AtomicBoolean(true);
    private final AtomicReference<Refusal> closedFor = new AtomicReference<>();
    private final java.util.concurrent.CountDownLatch ended = new java.util.concurrent.CountDownLatch(1);
    private volatile LinkExecutor executor;
    private volatile boolean promoted;
    private volatile long heardNanos = System.nanoTime();
    private volatile long epoch;
    private volatile TlsSocket helidonSocket;
    private volatile DataReader reader;
    // Streams served by StreamRelease, and resets seen before their stream started.
    private final java.util.Map<Integer, StreamRelease> streams = new ConcurrentHashMap<>();
    private final Set<Integer> earlyResets = ConcurrentHashMap.newKeySet();
    private volatile SocketWriter writer;

    ServedLink(RuntimeEndpoint endpoint, ChannelSocket socket) {
        this.endpoint = endpoint;
        this.socket = socket;
    }

    static Optional<ServedLink> current() {
        return Optional.ofNullable(CURRENT.get());
    }

    /** Serves the link until it ends; never throws. */
    void serve() {
        CURRENT.set(this);
        try {
            LinkSecurity.checkPeer(endpoint.peerPolicy(), socket);
            endpoint.census().admit(this).ifPresent(evicted -> evicted.close(Refusal.CONNECTION_LIMIT));
            endpoint.schedule(ProtocolLimits.HANDSHAKE_TIMEOUT, () -> {
                if (!promoted) {
                    close(Refusal.HANDSHAKE_TIMEOUT);
                }
            });
            SSLSocket tls = LinkSecurity.serve(endpoint.sslContext(), endpoint.serverName(), socket);
            helidonSocket = TlsSocket.server(tls, id, endpoint.name());
            reader = new DataReader(new ResetTap(helidonSocket, this::reset));
            writer = SocketWriter.create(helidonSocket);
            ServerConnection connection = endpoint.http2().connection(this);
            // No request limit of our own here: the bounds are per link (census, HTTP/2 settings).
            connection.handle(FixedLimit.create());
        } catch (ProtocolException e) {
            closedFor.compareAndSet(null, e.refusal());
            LOGGER.log(System.Logger.Level.DEBUG, "link " + id + " refused: " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (IOException | RuntimeException e) {
            closedFor.compareAndSet(null, Refusal.TRANSPORT_FAILED);
            LOGGER.log(System.Logger.Level.DEBUG, "link " + id + " ended: " + e);
        } finally {
            CURRENT.remove();
            close(Refusal.TRANSPORT_FAILED);
        }
    }

    void register(int streamId, StreamRelease stream) {
        streams.put(streamId, stream);
        if (earlyResets.remove(streamId)) {
            stream.cancelPending();
        }
    }

    void unregister(int streamId, StreamRelease stream) {
        streams.remove(streamId, stream);
    }

    // ResetTap, on the connection thread: exactly one of this and register() hands it over.
    private void reset(int streamId) {
        earlyResets.add(streamId);
        StreamRelease stream = streams.get(streamId);
        if (stream != null && earlyResets.remove(streamId)) {
            stream.cancelPending();
        }
    }

    /** Stream tasks running on this link right now (waiting ones included). */
    int streamTasks() {
        LinkExecutor running = executor;
        return running == null ? 0 : running.running.size();
    }

    /** Called by the bearer check after the first valid token. */
    boolean promote(long credentialEpoch) {
        if (!promoted) {
            synchronized (this) {
                if (!promoted) {
                    if (!endpoint.census().promote(this)) {
                        return false;
                    }
                    promoted = true;
                }
            }
        }
        epoch = Math.max(epoch, credentialEpoch);
        return true;
    }

    boolean isPromoted() {
        return promoted;
    }

    /**
     * When this link's supervisor was last heard: a read on the link, or a sign of it elsewhere
     * ({@link #heard()}). The keepalive watchdog closes the link after too long without either.
     */
    long lastHeardNanos() {
        return socket.lastHeardNanos(heardNanos);
    }

    /** The supervisor of this link was heard outside it: its decisions on the link's descriptor lane. */
    void heard() {
        heardNanos = System.nanoTime();
    }

    boolean isOpen() {
        return open.get();
    }

    Optional<Refusal> closedFor() {
        return Optional.ofNullable(closedFor.get());
    }

    /**
     * Waits until the link has closed (the dialer's wait for its one link to end, without waking).
     *
     * @throws InterruptedException if interrupted first
     */
    void awaitClosed() throws InterruptedException {
        ended.await();
    }

    void close(Refusal reason) {
        if (open.compareAndSet(true, false)) {
            // Whatever throws below, the dialer waiting for this link's end must wake and redial.
            try {
                closedFor.compareAndSet(null, reason);
                endpoint.census().release(this, promoted);
                endpoint.forget(this);
                try {
                    socket.close();
                } catch (IOException ignored) {
                    // closing: nothing left to report to
                }
                // Helidon 4.1.7 does not end a stream task waiting for frames when its connection
                // ends (nor one waiting for its call to close, see StreamRelease): end them here.
                LinkExecutor running = executor;
                if (running != null) {
                    running.interruptAll();
                }
            } finally {
                ended.countDown();
            }
        }
    }

    @Override
    public ListenerContext listenerContext() {
        return endpoint.listenerContext();
    }

    @Override
    public ExecutorService executor() {
        LinkExecutor current = executor;
        if (current == null) {
            synchronized (this) {
                current = executor;
                if (current == null) {
                    current = new LinkExecutor(endpoint.executor(), this);
                    executor = current;
                }
            }
        }
        return current;
    }

    @Override
    public DataWriter dataWriter() {
        return writer;
    }

    @Override
    public DataReader dataReader() {
        return reader;
    }

    @Override
    public Router router() {
        return endpoint.router();
    }

    @Override
    public PeerInfo remotePeer() {
        return helidonSocket.remotePeer();
    }

    @Override
    public PeerInfo localPeer() {
        return helidonSocket.localPeer();
    }

    @Override
    public boolean isSecure() {
        return true;
    }

    @Override
    public String socketId() {
        return endpoint.name();
    }

    @Override
    public String childSocketId() {
        return id;
    }

    @Override
    public String toString() {
        return id;
    }

    /** Runs Helidon's stream tasks with this link as the current one, for the bearer check. */
    private static final class LinkExecutor extends AbstractExecutorService {
        private final ExecutorService delegate;
        private final ServedLink link;
        private final Set<Thread> running = ConcurrentHashMap.newKeySet();
        private final java.util.concurrent.atomic.AtomicInteger preAuthStreams = new java.util.concurrent.atomic.AtomicInteger();

        LinkExecutor(ExecutorService delegate, ServedLink link) {
            this.delegate = delegate;
            this.link = link;
        }

        @Override
        public void execute(Runnable command) {
            // Helidon submits one task per new stream, on the connection thread: the count is exact.
            if (!link.isPromoted() && preAuthStreams.incrementAndGet() > ProtocolLimits.MAX_PRE_AUTH_STREAMS) {
                link.close(Refusal.CONNECTION_LIMIT);
                throw new java.util.concurrent.RejectedExecutionException("link " + link + " is not authenticated");
            }
            delegate.execute(() -> {
                Thread self = Thread.currentThread();
                running.add(self);
                CURRENT.set(link);
                try {
                    if (link.isOpen()) {
                        command.run();
                    }
                } finally {
                    CURRENT.remove();
                    running.remove(self);
                }
            });
        }

        void interruptAll() {
            running.forEach(Thread::interrupt);
        }

        @Override
        public void shutdown() {
            // shared executor: owned by the endpoint
        }

        @Override
        public List<Runnable> shutdownNow() {
            return List.of();
        }

        @Override
        public boolean isShutdown() {
            return !link.isOpen();
        }

        @Override
        public boolean isTerminated() {
            return !link.isOpen();
        }

        @Override
        public boolean awaitTermination(long timeout, TimeUnit unit) {
            return !link.isOpen();
        }

    }
}
