package openshell.supervisor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;

import openshell.isolation.dns.DnsMessage;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The operator's resolver, against a DNS server of the test's own on loopback: the supervisor's
 * lookups go there and nowhere else once the bundle names it.
 */
@Timeout(60)
class UpstreamResolverTest {
    /** A UDP DNS server on 127.0.0.1: A and AAAA for one name, SERVFAIL for another, silence for a third, NXDOMAIN else. */
    private static final class LoopbackDns implements AutoCloseable {
        final DatagramSocket socket;
        final List<String> asked = new CopyOnWriteArrayList<>();

        LoopbackDns() throws IOException {
            socket = new DatagramSocket(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            Thread.ofVirtual().start(this::serve);
        }

        InetSocketAddress address() {
            return new InetSocketAddress(InetAddress.getLoopbackAddress(), socket.getLocalPort());
        }

        private void serve() {
            byte[] buffer = new byte[512];
            while (!socket.isClosed()) {
                try {
                    DatagramPacket p = new DatagramPacket(buffer, buffer.length);
                    socket.receive(p);
                    DnsMessage.Question q = DnsMessage.parse(java.util.Arrays.copyOf(p.getData(), p.getLength()));
                    asked.add(q.name() + "/" + q.type());
                    byte[] r = switch (q.name()) {
                        case "api.loop.test" -> DnsMessage.response(q, DnsMessage.RCODE_NOERROR, q.type() == DnsMessage.TYPE_A
                                ? List.of(InetAddress.ofLiteral("198.51.100.7"), InetAddress.ofLiteral("198.51.100.8"))
                                : List.of(InetAddress.ofLiteral("2001:db8::7")), 30);
                        case "v4only.loop.test" -> DnsMessage.response(q, DnsMessage.RCODE_NOERROR, q.type() == DnsMessage.TYPE_A
                                ? List.of(InetAddress.ofLiteral("198.51.100.9")) : List.of(), 30);
                        case "broken.loop.test" -> DnsMessage.response(q, DnsMessage.RCODE_SERVFAIL);
                        case "silent.loop.test" -> null;
                        default -> DnsMessage.response(q, DnsMessage.RCODE_NXDOMAIN);
                    };
                    if (r != null) {
                        socket.send(new DatagramPacket(r, r.length, p.getSocketAddress()));
                    }
                } catch (IOException | DnsMessage.Malformed e) {
                    // closed, or a datagram that is not a query
                }
            }
        }

        @Override
        public void close() {
            socket.close();
        }
    }

    @Test
    void namesAreResolvedByTheOperatorsServerBothFamiliesAtOnce() throws Exception {
        try (LoopbackDns dns = new LoopbackDns()) {
            UpstreamResolver resolver = new UpstreamResolver(dns.address());
            assertEquals(Set.of(InetAddress.ofLiteral("198.51.100.7"), InetAddress.ofLiteral("198.51.100.8"),
                    InetAddress.ofLiteral("2001:db8::7")), Set.copyOf(resolver.resolve("api.loop.test")));
            assertEquals(List.of(InetAddress.ofLiteral("198.51.100.9")), resolver.resolve("v4only.loop.test"));
            assertEquals(List.of("api.loop.test/1", "api.loop.test/28", "v4only.loop.test/1", "v4only.loop.test/28"),
                    dns.asked.stream().sorted().toList());
        }
    }

    @Test
    void aMissingNameIsFinalAndAFailureOrSilenceIsTransient() throws Exception {
        try (LoopbackDns dns = new LoopbackDns()) {
            UpstreamResolver resolver = new UpstreamResolver(dns.address());
            UnknownHostException missing = assertThrows(UnknownHostException.class, () -> resolver.resolve("gone.loop.test"));
            assertTrue(missing.getMessage().contains("NXDOMAIN"), missing.getMessage());
            IOException broken = assertThrows(IOException.class, () -> resolver.resolve("broken.loop.test"));
            assertTrue(!(broken instanceof UnknownHostException) && broken.getMessage().contains("rcode 2"), broken.toString());
            long started = System.nanoTime();
            IOException silent = assertThrows(IOException.class, () -> resolver.resolve("silent.loop.test"));
            assertTrue(!(silent instanceof UnknownHostException) && silent.getMessage().contains("no answer"), silent.toString());
            assertTrue(System.nanoTime() - started < UpstreamResolver.ANSWER_WAIT.toNanos() * 3, "bounded by ANSWER_WAIT");
        }
    }

    @Test
    void theDnsPlaneAsksTheOperatorsServerForAnAllowedNameAndNeverForAnAlias() throws Exception {
        try (LoopbackDns dns = new LoopbackDns()) {
            HostResolver resolver = new UpstreamResolver(dns.address());
            assertThrows(SupervisorException.class, () -> new UpstreamResolver(InetSocketAddress.createUnresolved("dns.test", 53)));
            // Through the plane: an allowed name is asked of the operator's server, an aliased one of nobody.
            HostAliases aliases = HostAliases.of(java.util.Map.of("alias.loop.test", InetAddress.getLoopbackAddress()));
            try (Fixture f = Fixture.start(POLICY, b -> b.resolver(resolver).aliases(aliases))) {
                Object[] answered = DnsPlaneTest.decode(f.resolve(Fixture.who("/usr/bin/curl"), "api.loop.test"));
                assertEquals(DnsMessage.RCODE_NOERROR, answered[0]);
                assertEquals(List.of(InetAddress.ofLiteral("198.51.100.7"), InetAddress.ofLiteral("198.51.100.8")), answered[1]);
                Object[] aliased = DnsPlaneTest.decode(f.resolve(Fixture.who("/usr/bin/curl"), "alias.loop.test"));
                assertEquals(DnsMessage.RCODE_NOERROR, aliased[0]);
                assertTrue(dns.asked.stream().noneMatch(q -> q.startsWith("alias.")), dns.asked.toString());
                assertTrue(dns.asked.contains("api.loop.test/1"), dns.asked.toString());
            }
        }
    }

    private static final String POLICY = """
            version: 1
            network_policies:
              loop:
                endpoints:
                  - host: api.loop.test
                    port: 443
                    protocol: tcp
                  - host: alias.loop.test
                    port: 443
                    protocol: tcp
                binaries:
                  - path: /usr/bin/curl
            """;
}
