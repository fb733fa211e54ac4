package openshell.tests.support;

import java.io.IOException;
import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;

import openshell.isolation.dns.DnsMessage;

/**
 * A UDP DNS server on 127.0.0.1 with a fixed table: the upstream resolver a test or benchmark
 * points its supervisors at ({@code --upstream-resolver}), so no query ever goes to the resolver
 * the host is configured with. A name in the table gets its address (as an A or AAAA record, for
 * a question of that type; an empty answer for other types), every other name NXDOMAIN; a message
 * that is not a well-formed query is dropped. Each question is recorded.
 */
public final class LoopbackResolver implements AutoCloseable {
    /** The time to live of every answer. */
    public static final int ANSWER_TTL_SECONDS = 30;

    private final DatagramSocket socket;
    private final Map<String, InetAddress> table;
    private final List<String> asked = new CopyOnWriteArrayList<>();
    private final AtomicLong answered = new AtomicLong();

    private LoopbackResolver(DatagramSocket socket, Map<String, InetAddress> table) {
        this.socket = socket;
        this.table = table;
        Thread.ofPlatform().daemon().name("loopback-resolver").start(this::serve);
    }

    /**
     * @param table names (any case) and their addresses
     * @param port  the UDP port on 127.0.0.1, or 0 for any free one
     * @return the running server
     * @throws IOException if the port cannot be bound (port 53 needs root), with the address in the message
     */
    public static LoopbackResolver start(Map<String, InetAddress> table, int port) throws IOException {
        Map<String, InetAddress> lower = new java.util.HashMap<>();
        table.forEach((name, address) -> lower.put(name.toLowerCase(Locale.ROOT), address));
        InetSocketAddress at = new InetSocketAddress(InetAddress.getLoopbackAddress(), port);
        try {
            return new LoopbackResolver(new DatagramSocket(at), Map.copyOf(lower));
        } catch (IOException e) {
            throw new IOException("cannot serve DNS on " + at + ": " + e.getMessage(), e);
        }
    }

    /** @return where it listens */
    public InetSocketAddress address() {
        return new InetSocketAddress(InetAddress.getLoopbackAddress(), socket.getLocalPort());
    }

    /** @return {@code ADDRESS:PORT}, as the gateway's {@code --upstream-resolver} takes it */
    public String endpoint() {
        return InetAddress.getLoopbackAddress().getHostAddress() + ":" + socket.getLocalPort();
    }

    /** @return each question as {@code name/type}, in arrival order */
    public List<String> asked() {
        return List.copyOf(asked);
    }

    /** @return how many responses were sent */
    public long answered() {
        return answered.get();
    }

    private void serve() {
        byte[] buffer = new byte[DnsMessage.MAX_QUERY_BYTES + 1];
        while (!socket.isClosed()) {
            try {
                DatagramPacket p = new DatagramPacket(buffer, buffer.length);
                socket.receive(p);
                byte[] reply = answer(Arrays.copyOf(p.getData(), p.getLength()));
                if (reply.length > 0) {
                    socket.send(new DatagramPacket(reply, reply.length, p.getSocketAddress()));
                    answered.incrementAndGet();
                }
            } catch (IOException e) {
                // closed at the end of the test
            }
        }
    }

    /** @return the response, or nothing for a message that is not a well-formed query */
    byte[] answer(byte[] message) {
        DnsMessage.Question q;
        try {
            q = DnsMessage.parse(message);
        } catch (DnsMessage.Malformed e) {
            return new byte[0];
        }
        asked.add(q.name() + "/" + q.type());
        InetAddress address = table.get(q.name());
        if (address == null) {
            return DnsMessage.response(q, DnsMessage.RCODE_NXDOMAIN);
        }
        List<InetAddress> answers = DnsMessage.family(address, q.type()) ? List.of(address) : List.of();
        return DnsMessage.response(q, DnsMessage.RCODE_NOERROR, answers, ANSWER_TTL_SECONDS);
    }

    @Override
    public void close() {
        socket.close();
    }
}
