package openshell.supervisor;

import java.io.IOException;
import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

import openshell.isolation.dns.DnsMessage;

/**
 * The operator's DNS server ({@code --upstream-resolver ADDRESS:PORT}, trusted configuration
 * carried in the supervisor bundle, never in a policy), asked over UDP instead of the host's
 * resolver. It exists so that a machine's tests and benchmarks resolve on a server they started
 * on loopback instead of the resolver the host is configured with; an operator may also use it
 * to give sandboxes another view of DNS than the host's. UDP only: a truncated response is used as
 * far as it goes (the DNS plane answers at most {@link DnsMessage#MAX_ANSWERS} addresses anyway),
 * never retried over TCP.
 */
final class UpstreamResolver implements HostResolver {
    /** Longest wait for the answers to one resolution (both questions); the DNS plane retries. */
    static final Duration ANSWER_WAIT = Duration.ofSeconds(2);
    /** Largest response read; a larger one is truncated and refused as malformed. */
    static final int MAX_RESPONSE_BYTES = 4096;

    private static final SecureRandom IDS = new SecureRandom();

    private final InetSocketAddress server;

    UpstreamResolver(InetSocketAddress server) {
        this.server = Objects.requireNonNull(server);
        if (server.isUnresolved()) {
            throw new SupervisorException("the upstream resolver must be an address, not " + server.getHostString());
        }
    }

    InetSocketAddress server() {
        return server;
    }

    /** Asks A and AAAA at once from a fresh socket (a fresh source port and random ids per lookup). */
    @Override
    public List<InetAddress> resolve(String name) throws IOException {
        int a = IDS.nextInt(0x10000);
        int aaaa = (a + 1) & 0xffff;
        try (DatagramSocket socket = new DatagramSocket()) {
            socket.connect(server);
            byte[] qa = DnsMessage.query(a, name, DnsMessage.TYPE_A);
            byte[] q6 = DnsMessage.query(aaaa, name, DnsMessage.TYPE_AAAA);
            socket.send(new DatagramPacket(qa, qa.length));
            socket.send(new DatagramPacket(q6, q6.length));
            long deadline = System.nanoTime() + ANSWER_WAIT.toNanos();
            List<InetAddress> found = new ArrayList<>();
            int nameErrors = 0;
            boolean gotA = false;
            boolean got6 = false;
            byte[] buffer = new byte[MAX_RESPONSE_BYTES];
            while (!(gotA && got6)) {
                long left = (deadline - System.nanoTime()) / 1_000_000;
                if (left <= 0) {
                    throw new IOException("no answer from the upstream resolver " + server + " within " + ANSWER_WAIT);
                }
                socket.setSoTimeout((int) left);
                DatagramPacket p = new DatagramPacket(buffer, buffer.length);
                try {
                    socket.receive(p);
                } catch (SocketTimeoutException e) {
                    continue;
                }
                byte[] m = java.util.Arrays.copyOf(p.getData(), p.getLength());
                if (m.length < 12 || (m[2] & 0x80) == 0) {
                    continue;
                }
                int id = DnsMessage.u16(m, 0);
                if ((id == a && gotA) || (id == aaaa && got6) || (id != a && id != aaaa)) {
                    continue;
                }
                int rcode = m[3] & 0x0f;
                if (rcode == DnsMessage.RCODE_NXDOMAIN) {
                    nameErrors++;
                } else if (rcode != DnsMessage.RCODE_NOERROR) {
                    throw new IOException("the upstream resolver " + server + " answered rcode " + rcode + " for " + name);
                } else {
                    found.addAll(addresses(m));
                }
                gotA |= id == a;
                got6 |= id == aaaa;
            }
            if (found.isEmpty()) {
                throw new UnknownHostException(name + (nameErrors > 0 ? ": NXDOMAIN" : ": no addresses")
                        + " from the upstream resolver " + server);
            }
            return List.copyOf(found);
        }
    }

    /** The A and AAAA records of a response's answer section, whatever their owner (a CNAME's target's too). */
    static List<InetAddress> addresses(byte[] m) throws IOException {
        int questions = DnsMessage.u16(m, 4);
        int answers = DnsMessage.u16(m, 6);
        int p = 12;
        for (int i = 0; i < questions; i++) {
            p = skipName(m, p) + 4;
        }
        List<InetAddress> out = new ArrayList<>();
        for (int i = 0; i < answers; i++) {
            p = skipName(m, p);
            need(m, p + 10);
            int type = DnsMessage.u16(m, p);
            int qclass = DnsMessage.u16(m, p + 2);
            int length = DnsMessage.u16(m, p + 8);
            p += 10;
            need(m, p + length);
            boolean a = type == DnsMessage.TYPE_A && length == 4;
            boolean aaaa = type == DnsMessage.TYPE_AAAA && length == 16;
            if (qclass == DnsMessage.CLASS_IN && (a || aaaa)) {
                out.add(InetAddress.getByAddress(java.util.Arrays.copyOfRange(m, p, p + length)));
            }
            p += length;
        }
        return out;
    }

    private static int skipName(byte[] m, int p) throws IOException {
        while (true) {
            need(m, p + 1);
            int len = m[p] & 0xff;
            if (len == 0) {
                return p + 1;
            }
            if ((len & 0xc0) == 0xc0) {
                need(m, p + 2);
                return p + 2;
            }
            if (len > 63) {
                throw new IOException("a malformed name in the upstream resolver's response");
            }
            p += 1 + len;
        }
    }

    private static void need(byte[] m, int end) throws IOException {
        if (end > m.length) {
            throw new IOException("the upstream resolver's response is truncated");
        }
    }
}
