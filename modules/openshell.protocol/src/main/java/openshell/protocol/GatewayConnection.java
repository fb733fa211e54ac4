package openshell.protocol;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;

import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

import io.grpc.Channel;
import io.helidon.common.socket.HelidonSocket;
import io.helidon.common.socket.PlainSocket;
import io.helidon.common.socket.TlsSocket;

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

    private final CallConnection calls;

    private GatewayConnection(String id, Socket socket, HelidonSocket helidonSocket, String authority, String scheme) {
        // The session authenticates in-band: its first message carries the gateway token.
        this.calls = new CallConnection(id, helidonSocket, MAX_STREAMS, Optional::empty, authority, scheme,
                reason -> closeQuietly(socket));
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
        return calls.channel();
    }

    /** @return whether the connection is still up */
    public boolean isOpen() {
        return calls.isOpen();
    }

    /** @return completes with the reason once the connection closed */
    public CompletableFuture<Refusal> closed() {
        return calls.closed();
    }

    @Override
    public void close() {
        calls.close(Refusal.TRANSPORT_FAILED);
    }

    private static void closeQuietly(Socket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // already failing
        }
    }
}
