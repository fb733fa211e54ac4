package openshell.protocol;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import javax.net.ssl.SSLContext;

import io.grpc.BindableService;
import io.grpc.ServerInterceptors;
import io.helidon.common.context.Context;
import io.helidon.http.encoding.ContentEncodingContext;
import io.helidon.http.media.MediaContext;
import io.helidon.webserver.ListenerConfig;
import io.helidon.webserver.ListenerContext;
import io.helidon.webserver.Router;
import io.helidon.webserver.grpc.GrpcProtocolSelector;
import io.helidon.webserver.grpc.GrpcRouting;
import io.helidon.webserver.http.DirectHandlers;
import io.helidon.webserver.http2.Http2Config;
import io.helidon.webserver.http2.Http2ConnectionSelector;

/**
 * The sandbox runtime's end of the protocol: the TLS server and gRPC service, on a socket
 * it either accepts ({@link Initiator#SUPERVISOR}) or dials itself ({@link Initiator#RUNTIME},
 * redialing after a loss until closed). Every call passes the bearer check and the session
 * gate before the service sees it.
 */
public final class RuntimeEndpoint implements AutoCloseable {
    private static final System.Logger LOGGER = System.getLogger(RuntimeEndpoint.class.getName());
    private static final Duration REDIAL_MIN = Duration.ofMillis(50);
    // Short: the process driver starts the runtime before its supervisor listens, and a failed Unix dial costs one syscall.
    private static final Duration REDIAL_MAX = Duration.ofMillis(250);
    private static final Duration WATCHDOG_PERIOD = Duration.ofMillis(500);
    /** The current call's link's {@link ServedLink#heard()}, set by {@link BearerCheck} on every admitted call. */
    static final io.grpc.Context.Key<Runnable> LINK_HEARD = io.grpc.Context.key("openshell-link-heard");

    private final Transport transport;
    private final Initiator initiator;
    private final RuntimeTlsIdentity identity;
    private final TokenVerifier verifier;
    private final UnixPeerPolicy peerPolicy;
    private final SSLContext sslContext;
    private final String name;
    private final Router router;
    private final Http2ConnectionSelector http2;
    private final ListenerContext listenerContext;
    private final ExecutorService executor = Executors.newVirtualThreadPerTaskExecutor();
    private final ScheduledExecutorService timers;
    private final LinkCensus census;
    private final SessionGate gate = new SessionGate();
    private final Set<ServedLink> links = ConcurrentHashMap.newKeySet();
    private volatile boolean open = true;
    private volatile ServerSocketChannel server;
    private volatile Thread dialer;

    private RuntimeEndpoint(Builder builder) {
        this.transport = Objects.requireNonNull(builder.transport, "transport");
        this.initiator = Objects.requireNonNull(builder.initiator, "initiator");
        this.identity = Objects.requireNonNull(builder.identity, "identity");
        this.verifier = Objects.requireNonNull(builder.verifier, "verifier");
        this.peerPolicy = builder.peerPolicy;
        if (builder.services.isEmpty()) {
            throw new ProtocolException(Refusal.INVALID_ARGUMENT, "no service to serve");
        }
        this.census = new LinkCensus(builder.maxPreAuth, builder.maxControl);
        this.sslContext = identity.sslContext();
        this.name = "runtime-" + identity.serverName();
        // Interceptors are bound into each service definition (last listed runs first): the
        // bearer check must not depend on how a routing applies global interceptors.
        GrpcRouting.Builder grpc = GrpcRouting.builder();
        BearerCheck bearer = new BearerCheck(this);
        MessageBound bound = new MessageBound();
        CancelBridge cancels = new CancelBridge();
        builder.services.forEach(service -> grpc.service(ServerInterceptors.intercept(service, bound, bearer, cancels)));
        this.router = Router.builder().addRouting(grpc).build();
        this.router.beforeStart();
        this.http2 = Http2ConnectionSelector.builder()
                .http2Config(Http2Config.builder()
                        .initialWindowSize(ProtocolLimits.STREAM_WINDOW_BYTES)
                        .maxFrameSize(ProtocolLimits.MAX_FRAME_BYTES)
                        // The supervisor keeps to MAX_CONCURRENT_STREAMS; the slack absorbs slots freed
                        // late, since past this Helidon 4.1.7 closes the link (GOAWAY), not the stream.
                        .maxConcurrentStreams(ProtocolLimits.MAX_CONCURRENT_STREAMS + ProtocolLimits.STREAM_RELEASE_SLACK)
                        .sendErrorDetails(false)
                        // Helidon 4.1.7 counts every cancelled gRPC stream as a "rapid reset" (gRPC
                        // writes bypass the stream's write state) and never restarts its count
                        // window, so its CVE-2023-44487 guard closes a link after 100 cancels in
                        // its life. Unauthenticated peers are bounded by MAX_PRE_AUTH_STREAMS instead.
                        .maxRapidResets(-1)
                        .build())
                // StreamRelease outermost: it must see the stream writer the gRPC handler gets.
                .addSubProtocolSelector(StreamRelease.around(CallScope.around(GrpcProtocolSelector.create())))
                .build();
        ListenerConfig listenerConfig = ListenerConfig.builder().name(name).build();
        MediaContext media = MediaContext.create();
        ContentEncodingContext encoding = ContentEncodingContext.create();
        DirectHandlers direct = DirectHandlers.create();
        Context context = Context.create();
        this.listenerContext = new ListenerContext() {
            @Override
            public Context context() {
                return context;
            }

            @Override
            public MediaContext mediaContext() {
                return media;
            }

            @Override
            public ContentEncodingContext contentEncodingContext() {
                return encoding;
            }

            @Override
            public DirectHandlers directHandlers() {
                return direct;
            }

            @Override
            public ListenerConfig config() {
                return listenerConfig;
            }

            @Override
            public ExecutorService executor() {
                return executor;
            }
        };
        this.timers = Executors.newSingleThreadScheduledExecutor(Thread.ofPlatform().daemon().name(name + "-timer").factory());
    }

    /**
     * A builder.
     *
     * @return a builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Starts listening or dialing.
     *
     * @return this endpoint
     */
    public RuntimeEndpoint start() {
        timers.scheduleAtFixedRate(this::watchdog, WATCHDOG_PERIOD.toMillis(), WATCHDOG_PERIOD.toMillis(),
                TimeUnit.MILLISECONDS);
        if (initiator == Initiator.SUPERVISOR) {
            try {
                server = transport.listen();
            } catch (IOException e) {
                throw new ProtocolException(Refusal.TRANSPORT_FAILED, "cannot listen on " + transport + ": " + e.getMessage(), e);
            }
            Thread.ofVirtual().name(name + "-accept").start(this::acceptLoop);
        } else {
            dialer = Thread.ofVirtual().name(name + "-dial").start(this::dialLoop);
        }
        return this;
    }

    /**
     * Where this endpoint listens (with the real port when TCP port 0 was asked), for
     * supervisor-initiated links.
     *
     * @return the listening transport, empty when this endpoint dials
     */
    public Optional<Transport> listening() {
        ServerSocketChannel listening = server;
        if (listening == null) {
            return Optional.empty();
        }
        if (transport instanceof Transport.Tcp) {
            try {
                SocketAddress local = listening.getLocalAddress();
                return Optional.of(Transport.tcp((InetSocketAddress) local));
            } catch (IOException e) {
                return Optional.empty();
            }
        }
        return Optional.of(transport);
    }

    /**
     * Open links right now (pre-auth and authenticated).
     *
     * @return count
     */
    public int linkCount() {
        return links.size();
    }

    @Override
    public void close() {
        open = false;
        ServerSocketChannel listening = server;
        if (listening != null) {
            try {
                listening.close();
            } catch (IOException ignored) {
                // closing
            }
        }
        List.copyOf(links).forEach(link -> link.close(Refusal.TRANSPORT_FAILED));
        Thread dialing = dialer;
        if (dialing != null) {
            dialing.interrupt();
        }
        timers.shutdownNow();
        executor.shutdownNow();
    }

    private void acceptLoop() {
        while (open) {
            SocketChannel channel;
            try {
                channel = server.accept();
            } catch (IOException e) {
                if (open) {
                    LOGGER.log(System.Logger.Level.WARNING, "accept failed on " + transport + ": " + e);
                }
                return;
            }
            launch(channel);
        }
    }

    private void dialLoop() {
        Duration backoff = REDIAL_MIN;
        while (open) {
            try {
                SocketChannel channel = transport.dial();
                backoff = REDIAL_MIN;
                ServedLink link = launch(channel);
                if (!open) {
                    // close() ran meanwhile; its copy of the links may have missed this one.
                    link.close(Refusal.TRANSPORT_FAILED);
                    return;
                }
                // Wait for this link to end before dialing the next one (close() interrupts).
                link.awaitClosed();
            } catch (IOException e) {
                LOGGER.log(System.Logger.Level.DEBUG, "dial " + transport + " failed: " + e);
            } catch (InterruptedException e) {
                return;
            }
            try {
                Thread.sleep(backoff);
            } catch (InterruptedException e) {
                return;
            }
            backoff = backoff.multipliedBy(2).compareTo(REDIAL_MAX) > 0 ? REDIAL_MAX : backoff.multipliedBy(2);
        }
    }

    private ServedLink launch(SocketChannel channel) {
        if (transport instanceof Transport.Tcp) {
            try {
                // Both ends need it: without it every small response waits ~40 ms on delayed ACKs.
                channel.setOption(java.net.StandardSocketOptions.TCP_NODELAY, true);
            } catch (IOException e) {
                LOGGER.log(System.Logger.Level.DEBUG, "TCP_NODELAY not set: " + e);
            }
        }
        ServedLink link = new ServedLink(this, new ChannelSocket(channel));
        links.add(link);
        Thread.ofVirtual().name(link.toString()).start(link::serve);
        return link;
    }

    private void watchdog() {
        long now = System.nanoTime();
        for (ServedLink link : links) {
            long quietNanos = now - link.lastHeardNanos();
            if (quietNanos > ProtocolLimits.KEEPALIVE_TIMEOUT.toNanos()) {
                if (link.isOpen()) {
                    // Said once per link: on an overloaded host a starved supervisor looks like this.
                    LOGGER.log(System.Logger.Level.WARNING, link + ": nothing read for " + quietNanos / 1_000_000
                            + " ms (keepalive timeout " + ProtocolLimits.KEEPALIVE_TIMEOUT.toMillis() + " ms); closing it");
                }
                link.close(Refusal.PEER_SILENT);
            }
        }
    }

    /**
     * For a service, on the thread of one of its calls: marks that the supervisor of the link the
     * call arrived on was heard outside the link. The runtime's keepalive watchdog judges the
     * supervisor by the link alone otherwise, and a supervisor busy deciding a flood of connects on
     * the descriptor lane answers pings late: the lane's decisions show it is there. Capture it
     * during the call (the stream that keyed the lane) and run it on each decision.
     *
     * @return the link's mark, or one that does nothing outside a call
     */
    public static Runnable linkHeard() {
        Runnable heard = LINK_HEARD.get();
        return heard != null ? heard : () -> { };
    }

    void schedule(Duration delay, Runnable task) {
        try {
            timers.schedule(task, delay.toMillis(), TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // endpoint closing: the link is closed with it
        }
    }

    /** Stream tasks running on all links right now. */
    int streamTasks() {
        return links.stream().mapToInt(ServedLink::streamTasks).sum();
    }

    void forget(ServedLink link) {
        links.remove(link);
    }

    TokenVerifier verifier() {
        return verifier;
    }

    UnixPeerPolicy peerPolicy() {
        return peerPolicy;
    }

    SSLContext sslContext() {
        return sslContext;
    }

    String serverName() {
        return identity.serverName();
    }

    String name() {
        return name;
    }

    Router router() {
        return router;
    }

    Http2ConnectionSelector http2() {
        return http2;
    }

    ListenerContext listenerContext() {
        return listenerContext;
    }

    ExecutorService executor() {
        return executor;
    }

    LinkCensus census() {
        return census;
    }

    SessionGate gate() {
        return gate;
    }

    /** Builder of {@link RuntimeEndpoint}. */
    public static final class Builder {
        private final List<BindableService> services = new java.util.ArrayList<>();
        private Transport transport;
        private Initiator initiator;
        private RuntimeTlsIdentity identity;
        private TokenVerifier verifier;
        private UnixPeerPolicy peerPolicy = UnixPeerPolicy.sameUser();
        private int maxPreAuth = ProtocolLimits.MAX_PRE_AUTH_CONNECTIONS;
        private int maxControl = ProtocolLimits.MAX_CONTROL_CONNECTIONS;

        private Builder() {
        }

        /**
         * Where to listen or dial.
         *
         * @param transport transport
         * @return this
         */
        public Builder transport(Transport transport) {
            this.transport = transport;
            return this;
        }

        /**
         * Who opens the socket.
         *
         * @param initiator initiator
         * @return this
         */
        public Builder initiator(Initiator initiator) {
            this.initiator = initiator;
            return this;
        }

        /**
         * The TLS server identity of this launch.
         *
         * @param identity identity
         * @return this
         */
        public Builder identity(RuntimeTlsIdentity identity) {
            this.identity = identity;
            return this;
        }

        /**
         * The sandbox-audience token verifier of this generation.
         *
         * @param verifier verifier
         * @return this
         */
        public Builder verifier(TokenVerifier verifier) {
            this.verifier = verifier;
            return this;
        }

        /**
         * Who may connect over a Unix socket (default: the same user).
         *
         * @param peerPolicy policy
         * @return this
         */
        public Builder peerPolicy(UnixPeerPolicy peerPolicy) {
            this.peerPolicy = Objects.requireNonNull(peerPolicy);
            return this;
        }

        /**
         * Adds the runtime's service implementation.
         *
         * @param service a grpc-java service (normally the SandboxRuntime implementation)
         * @return this
         */
        public Builder addService(BindableService service) {
            services.add(Objects.requireNonNull(service));
            return this;
        }

        /**
         * Builds the endpoint (not yet started).
         *
         * @return the endpoint
         */
        public RuntimeEndpoint build() {
            return new RuntimeEndpoint(this);
        }
    }
}
