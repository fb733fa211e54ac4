package openshell.tests.support;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;

import openshell.isolation.dns.DnsMessage;
import org.junit.jupiter.api.Test;

/** The loopback resolver over a real UDP socket on 127.0.0.1, and the dial check on audit lines. */
class LoopbackResolverTest {
    private static byte[] ask(LoopbackResolver dns, String name, int type) throws Exception {
        try (DatagramSocket client = new DatagramSocket(0, InetAddress.getLoopbackAddress())) {
            client.setSoTimeout(5_000);
            byte[] q = DnsMessage.query(42, name, type);
            client.send(new DatagramPacket(q, q.length, dns.address()));
            DatagramPacket p = new DatagramPacket(new byte[512], 512);
            client.receive(p);
            return Arrays.copyOf(p.getData(), p.getLength());
        }
    }

    @Test
    void aNameInTheTableIsAnsweredForItsFamilyAndEveryOtherNameIsNxdomain() throws Exception {
        try (LoopbackResolver dns = LoopbackResolver.start(Map.of("Up.Test", InetAddress.ofLiteral("127.0.0.9")), 0)) {
            byte[] a = ask(dns, "up.test", DnsMessage.TYPE_A);
            assertEquals(DnsMessage.RCODE_NOERROR, a[3] & 0x0f);
            assertEquals(1, DnsMessage.u16(a, 6));
            assertArrayEquals(new byte[] {127, 0, 0, 9}, Arrays.copyOfRange(a, a.length - 4, a.length));
            byte[] aaaa = ask(dns, "UP.test", DnsMessage.TYPE_AAAA);
            assertEquals(DnsMessage.RCODE_NOERROR, aaaa[3] & 0x0f);
            assertEquals(0, DnsMessage.u16(aaaa, 6), "no address of that family: an empty answer");
            assertEquals(DnsMessage.RCODE_NXDOMAIN, ask(dns, "other.test", DnsMessage.TYPE_A)[3] & 0x0f);
            assertEquals(java.util.List.of("up.test/1", "up.test/28", "other.test/1"), dns.asked());
            assertEquals(3, dns.answered());
            assertEquals("127.0.0.1:" + dns.address().getPort(), dns.endpoint());
            assertEquals(0, dns.answer(new byte[5]).length, "what is not a query is dropped");
        }
    }

    @Test
    void aDialAnywhereButLoopbackOrTheNamedAddressesFails() {
        String loopback = "{\"time\":\"t\",\"destination\":{\"host\":\"up.test\",\"address\":\"127.0.0.1\",\"port\":80},\"upstream\":\"connected\"}";
        String namespace = loopback.replace("127.0.0.1", "198.51.100.1");
        LoopbackRule.assertDialledOnlyLoopback(loopback + "\n", Set.of());
        LoopbackRule.assertDialledOnlyLoopback(namespace, Set.of(InetAddress.ofLiteral("198.51.100.1")));
        AssertionError e = assertThrows(AssertionError.class, () -> LoopbackRule.assertDialledOnlyLoopback(namespace, Set.of()));
        assertTrue(e.getMessage().contains("198.51.100.1"), e.getMessage());
        assertThrows(AssertionError.class, () -> LoopbackRule.assertDialledOnlyLoopback(
                "{\"time\":\"t\",\"upstream\":\"connected\"}", Set.of()), "a dial without a destination");
    }
}
