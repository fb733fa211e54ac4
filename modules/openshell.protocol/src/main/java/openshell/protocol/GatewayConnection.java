package openshell.protocol;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.security.NoSuchAlgorithmException;
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
import java.util.concurrent.atomic.AtomicLong;

import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

import io.grpc.Channel;
import io.helidon.common.socket.HelidonSocket;
import io.helidon.common.socket.PlainSocket;
import io.helidon.common.socket.TlsSocket;
import io.helidon.webclient.http2.Http2ClientConnection;
import io.helidon.webclient.http2.Http2ClientImpl;

/**
 * The supervisor's HTTP/2 connection to its gateway, for the gateway session. Not Helidon 4.1.7's
 * gRPC client: that client takes every DATA frame for one whole message, so a message the
 * gateway had to split (a policy document over 16 KiB, or any message when the window ran
 * short under many execs) ended the session, and a policy that large could never be applied.
 * Calls here are the Sandbox Protocol's reassembling calls over one connection we dial.
 * {@code http://} is HTTP/2 with prior knowledge (a gateway on loopback); {@code https://} is
 * TLS with the JVM's trust store, the host name verified, and ALPN {@code h2}.
 */
public final class GatewayConnection implements AutoCloseable {
    /** Longest wait for TCP and TLS to the gateway. */
    public static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(10);
    /** Calls open at once on one gateway connection (the session needs one). */
    public static final int MAX_STREAMS = 8;

    private static final AtomicLong IDS = new AtomicLong();

    private final String id;
    private final Socket socket;
    private final String authority;
    private final String scheme;
    private final AtomicBoolean open = new AtomicBoolean(true);
    private final CompletableFuture<Refusal> closed = new CompletableFuture<>();
    private final ExecutorService executor = Executors.newVirtualThreadPerTaskExecutor();
    private final ScheduledExecutorService timers = Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().daemon().name("gateway-connection-timer").factory());
    private final Semaphore streams = new Semaphore(MAX_STREAMS);
    private final HelidonSocket helidonSocket;
    private final Http2ClientImpl http2Client;
    private final Http2ClientConnection connection;
    private final Channel channel;

    private GatewayConnection(String id, Socket socket, HelidonSocket helidonSocket, String authority, String scheme) {
        this.id = id;
        this.socket = socket;
        this.helidonSocket = helidonSocket;
        this.authority = authority;
        this.scheme = scheme;
        Http2Connections.Opened opened = Http2Connections.open(helidonSocket, id, executor,
                () -> close(Refusal.TRANSPORT_FAILED));
        this.http2Client = opened.client();
        this.connection = opened.connection();
        this.channel = new LinkChannel(new Host());
    }

    /**
     * Dials the gateway.
     *
     * @param endpoint {@code http://host:port} or {@code https://host:port}
     * @return the connection
     * @throws ProtocolException INVALID_ARGUMENT for another scheme or no host; TRANSPORT_FAILED
     *                           when the gateway cannot be reached or TLS fails
     */
    public static GatewayConnection open(URI endpoint) {
        String scheme = endpoint.getScheme();
        if (!("http".equals(scheme) || "https".equals(scheme)) || endpoint.getHost() == null) {
            throw new ProtocolException(Refusal.INVALID_ARGUMENT, "the gateway endpoint must be http://HOST:PORT or "
                    + "https://HOST:PORT: " + endpoint);
        }
        boolean tls = "https".equals(scheme);
        int port = endpoint.getPort() > 0 ? endpoint.getPort() : tls ? 443 : 80;
        String host = endpoint.getHost();
        Socket tcp = new Socket();
        try {
            tcp.setTcpNoDelay(true);
            tcp.connect(new InetSocketAddress(host, port), (int) CONNECT_TIMEOUT.toMillis());
            String id = "gateway-connection-" + IDS.incrementAndGet();
            if (!tls) {
                return new GatewayConnection(id, tcp, PlainSocket.client(tcp, id), host + ":" + port, scheme);
            }
            SSLSocket secure = (SSLSocket) SSLContext.getDefault().getSocketFactory().createSocket(tcp, host, port, true);
            SSLParameters parameters = secure.getSSLParameters();
            parameters.setEndpointIdentificationAlgorithm("HTTPS");
            parameters.setApplicationProtocols(new String[] {"h2"});
            secure.setSSLParameters(parameters);
            secure.setSoTimeout((int) CONNECT_TIMEOUT.toMillis());
            secure.startHandshake();
            secure.setSoTimeout(0);
            if (!"h2".equals(secure.getApplicationProtocol())) {
                secure.close();
                throw new ProtocolException(Refusal.TRANSPORT_FAILED, "the gateway at " + endpoint
                        + " did not agree on HTTP/2 (ALPN h2)");
            }
            return new GatewayConnection(id, secure, TlsSocket.client(secure, id), host + ":" + port, scheme);
        } catch (IOException | NoSuchAlgorithmException e) {
            closeQuietly(tcp);
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "cannot reach the gateway at " + endpoint + ": "
                    + e.getMessage(), e);
        } catch (RuntimeException e) {
            closeQuietly(tcp);
            throw e;
        }
    }

    /** @return the gRPC channel whose calls are streams of this connection */
    public Channel channel() {
        return channel;
    }

    /** @return whether the connection is still up */
    public boolean isOpen() {
        return open.get();
    }

    /** @return completes with the reason once the connection closed */
    public CompletableFuture<Refusal> closed() {
        return closed;
    }

    @Override
    public void close() {
        close(Refusal.TRANSPORT_FAILED);
    }

    private void close(Refusal reason) {
        if (open.compareAndSet(true, false)) {
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

    private static void closeQuietly(Socket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // already failing
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
            return Optional.ofNullable(closed.getNow(null));
        }

        @Override
        public Optional<String> bearer() {
            // The session authenticates in-band: its first message carries the gateway token.
            return Optional.empty();
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
            return helidonSocket;
        }

        @Override
        public Http2ClientImpl http2Client() {
            return http2Client;
        }
    }
}
