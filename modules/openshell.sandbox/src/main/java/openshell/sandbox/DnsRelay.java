package openshell.sandbox;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.DatagramChannel;
import java.nio.channels.ServerSocketChannel;
import java.util.concurrent.Semaphore;
import openshell.isolation.IdentityResolution;
import openshell.isolation.PendingDnsQuery;
import openshell.isolation.dns.DnsMessage;

/**
 * The workload's resolver: {@code 127.0.0.53:53}, UDP and TCP, inside the workload's network
 * namespace. Each query becomes a {@link PendingDnsQuery} of the broker; the answer goes back to
 * the asker. Nothing is resolved here: the decision side answers only what policy allows.
 */
final class DnsRelay implements AutoCloseable {
    /** Most TCP resolver connections served at once; more are closed at accept. */
    static final int MAX_TCP_CLIENTS = 64;
    /** Longest a TCP resolver connection may stay idle. */
    static final int TCP_IDLE_MILLIS = 10_000;

    private final NetworkBroker broker;
    private final DatagramChannel udp;
    private final ServerSocketChannel tcp;
    private final Semaphore tcpClients = new Semaphore(MAX_TCP_CLIENTS);

    private DnsRelay(NetworkBroker broker, DatagramChannel udp, ServerSocketChannel tcp) {
        this.broker = broker;
        this.udp = udp;
        this.tcp = tcp;
    }

    /**
     * Binds the relay in the broker's workload network and starts serving.
     *
     * @param broker where queries go
     * @param at     the address (normally {@link NetworkBroker#DNS_RELAY})
     * @return the relay
     */
    static DnsRelay start(NetworkBroker broker, InetSocketAddress at) {
        DatagramChannel udp = broker.network().run(() -> DatagramChannel.open().bind(at));
        ServerSocketChannel tcp;
        try {
            tcp = broker.network().run(() -> ServerSocketChannel.open().bind(at, MAX_TCP_CLIENTS));
        } catch (RuntimeException e) {
            try {
                udp.close();
            } catch (IOException ignored) {
                // Already failing; the bind error is what matters.
            }
            throw e;
        }
        DnsRelay relay = new DnsRelay(broker, udp, tcp);
        Thread.ofPlatform().daemon(true).name("dns-relay-udp").start(relay::serveUdp);
        Thread.ofPlatform().daemon(true).name("dns-relay-tcp").start(relay::serveTcp);
        return relay;
    }

    private IdentityResolution asker(SocketAddress from) {
        return from instanceof InetSocketAddress inet ? broker.dnsAsker(inet.getPort())
                : new IdentityResolution.Unresolved("query from " + from);
    }

    private void serveUdp() {
        ByteBuffer buffer = ByteBuffer.allocate(PendingDnsQuery.MAX_MESSAGE_BYTES);
        while (udp.isOpen()) {
            try {
                buffer.clear();
                SocketAddress from = udp.receive(buffer);
                buffer.flip();
                byte[] query = new byte[buffer.remaining()];
                buffer.get(query);
                if (!DnsMessage.isQuery(query)) {
                    continue;
                }
                DnsQuery pending = new DnsQuery(query, asker(from), response -> {
                    try {
                        udp.send(ByteBuffer.wrap(response), from);
                    } catch (IOException e) {
                        NetworkBroker.audit("dns", "reply-failed", e.toString());
                    }
                });
                if (!broker.offerDns(pending)) {
                    NetworkBroker.audit("dns", "dropped", "mediation closed or " + NetworkBroker.MAX_PENDING_DNS + " queries pending");
                }
            } catch (ClosedChannelException e) {
                return;
            } catch (IOException e) {
                NetworkBroker.audit("dns", "receive-failed", e.toString());
            }
        }
    }

    private void serveTcp() {
        while (tcp.isOpen()) {
            Socket client;
            try {
                client = tcp.socket().accept();
            } catch (IOException e) {
                return;
            }
            if (!tcpClients.tryAcquire()) {
                close(client);
                continue;
            }
            Thread.ofVirtual().name("dns-relay-tcp-client").start(() -> {
                try {
                    serveTcpClient(client);
                } finally {
                    tcpClients.release();
                    close(client);
                }
            });
        }
    }

    private void serveTcpClient(Socket client) {
        try {
            client.setSoTimeout(TCP_IDLE_MILLIS);
            DataInputStream in = new DataInputStream(client.getInputStream());
            DataOutputStream out = new DataOutputStream(client.getOutputStream());
            while (true) {
                int length = in.readUnsignedShort();
                byte[] query = in.readNBytes(length);
                if (query.length != length || !DnsMessage.isQuery(query)) {
                    return;
                }
                java.util.concurrent.CompletableFuture<byte[]> answer = new java.util.concurrent.CompletableFuture<>();
                if (!broker.offerDns(new DnsQuery(query, asker(client.getRemoteSocketAddress()), answer::complete))) {
                    return;
                }
                byte[] response = answer.get(NetworkBroker.DECISION_WAIT.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
                synchronized (out) {
                    out.writeShort(response.length);
                    out.write(response);
                    out.flush();
                }
            }
        } catch (IOException | java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
            // EOF, idle timeout or no answer in time: the connection ends, the resolver retries or fails.
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void close(Socket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // Nothing more to release.
        }
    }

    /** @return the UDP address (for tests that bind elsewhere) */
    InetSocketAddress address() {
        try {
            return (InetSocketAddress) udp.getLocalAddress();
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Override
    public void close() {
        try {
            udp.close();
        } catch (IOException ignored) {
            // Closing twice or a broken channel: nothing left to release.
        }
        try {
            tcp.close();
        } catch (IOException ignored) {
            // As above.
        }
    }
}
