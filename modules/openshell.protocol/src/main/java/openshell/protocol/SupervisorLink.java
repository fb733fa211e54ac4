package openshell.protocol;

import java.io.IOException;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;

import javax.net.ssl.SSLSocket;

import io.grpc.Channel;
import io.helidon.common.buffers.BufferData;
import io.helidon.common.socket.TlsSocket;
import io.helidon.http.http2.Http2FrameData;
import io.helidon.http.http2.Http2Ping;

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
    private final String id = "supervisor-link-" + IDS.incrementAndGet();
    private final CallConnection calls;
    private volatile long lastPingNanos = System.nanoTime();
    private volatile long heardNanos = System.nanoTime();

    private SupervisorLink(ChannelSocket socket, SSLSocket tls, TokenSlot tokens, String serverName) {
        this.socket = socket;
        this.calls = new CallConnection(id, TlsSocket.client(tls, id), ProtocolLimits.MAX_CONCURRENT_STREAMS,
                () -> Optional.of(tokens.current().sandboxToken()), serverName, "https", reason -> {
                    LOGGER.log(System.Logger.Level.INFO, id + " closed: " + reason);
                    closeQuietly(socket);
                });
        Thread.ofVirtual().name(id + "-keepalive").start(this::keepalive);
    }

    static SupervisorLink open(ChannelSocket socket, TlsPin pin, TokenSlot tokens, UnixPeerPolicy peerPolicy) {
        try {
            LinkSecurity.checkPeer(peerPolicy, socket);
            SSLSocket tls = LinkSecurity.call(pin.sslContext(), pin.serverName(), socket);
            SupervisorLink link = new SupervisorLink(socket, tls, tokens, pin.serverName());
            if (!link.calls.awaitPeerSettings(ProtocolLimits.HANDSHAKE_TIMEOUT)) {
                link.close();
                throw new ProtocolException(Refusal.TRANSPORT_FAILED, "the runtime at " + pin.serverName()
                        + " finished TLS but did not start HTTP/2 within " + ProtocolLimits.HANDSHAKE_TIMEOUT.toMillis()
                        + " ms (it closed the link or went quiet)");
            }
            return link;
        } catch (IOException e) {
            closeQuietly(socket);
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "TLS to " + pin.serverName() + " failed", e);
        } catch (ProtocolException e) {
            closeQuietly(socket);
            throw e;
        } catch (RuntimeException e) {
            // Helidon's connection set-up (the HTTP/2 preface and settings) fails with its own unchecked
            // exceptions when the runtime has already given the link up (its handshake timeout, a cold
            // JVM on a loaded machine): a transport failure, which callers answer by taking the next link.
            closeQuietly(socket);
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "the link to " + pin.serverName()
                    + " failed while it was set up: " + e.getMessage(), e);
        }
    }

    /**
     * The gRPC channel for generated stubs; every call carries the slot's current sandbox
     * token.
     *
     * @return the channel
     */
    public Channel channel() {
        return calls.channel();
    }

    /**
     * Whether the link is still up.
     *
     * @return true while open
     */
    public boolean isOpen() {
        return calls.isOpen();
    }

    /**
     * Completes with the reason once the link is closed (including a keepalive timeout).
     *
     * @return the future reason
     */
    public CompletableFuture<Refusal> closed() {
        return calls.closed();
    }

    /**
     * Why the link closed, if it has.
     *
     * @return the reason
     */
    public Optional<Refusal> closedFor() {
        return calls.closedFor();
    }

    @Override
    public void close() {
        close(Refusal.TRANSPORT_FAILED);
    }

    void close(Refusal reason) {
        calls.close(reason);
    }

    /**
     * Calls and streams open on this link right now.
     *
     * @return count, at most {@link ProtocolLimits#MAX_CONCURRENT_STREAMS}
     */
    public int openStreams() {
        return calls.openStreams();
    }

    /**
     * The runtime was heard on another channel of this sandbox (the descriptor lane): that proves it
     * alive as well as a read on the link. Under a flood of connects a ping's answer can wait behind
     * the load in either JVM, and a busy runtime was taken for a silent one (PEER_SILENT ended the
     * sandbox in the middle of a soak); the timeout still ends a link once the runtime is heard
     * nowhere.
     */
    public void heard() {
        heardNanos = System.nanoTime();
    }

    private void keepalive() {
        while (calls.isOpen()) {
            try {
                Thread.sleep(WATCHDOG_PERIOD);
            } catch (InterruptedException e) {
                return;
            }
            long now = System.nanoTime();
            // Silent only if heard nowhere; but ping whenever the link itself is quiet, or the
            // runtime, which reads only the link, would take us for silent in turn.
            if (now - socket.lastHeardNanos(heardNanos) > ProtocolLimits.KEEPALIVE_TIMEOUT.toNanos()) {
                close(Refusal.PEER_SILENT);
                return;
            }
            long quiet = now - socket.lastReadNanos();
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
        calls.frames().writeNow(BufferData.create(frame.header().write(), frame.data()));
    }

    private static void closeQuietly(ChannelSocket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // already failing
        }
    }
}
