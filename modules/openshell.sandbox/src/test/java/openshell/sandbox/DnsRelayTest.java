package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import openshell.isolation.DenyReason;
import openshell.isolation.PendingDnsQuery;
import openshell.isolation.dns.DnsMessage;
import openshell.linux.ChildExit;
import org.junit.jupiter.api.Test;

/**
 * The workload's resolver reaches only the relay on 127.0.0.53:53 (UDP and TCP), which turns
 * each query into a {@link PendingDnsQuery}; the test answers as the supervisor would.
 */
class DnsRelayTest {
    private static final byte[] ANSWER_ADDRESS = {10, 20, 30, 40};

    /** Answers A queries for example.test with 10.20.30.40, refuses everything named "denied". */
    private static void supervise(TestSandbox sandbox, AtomicBoolean stop, ConcurrentLinkedQueue<byte[]> seen,
                                  ConcurrentLinkedQueue<openshell.isolation.IdentityResolution> askers) {
        Thread.ofPlatform().daemon(true).name("test-dns-supervisor").start(() -> {
            while (!stop.get()) {
                Optional<PendingDnsQuery> next;
                try {
                    next = sandbox.broker.acceptDns(Duration.ofMillis(200));
                } catch (RuntimeException e) {
                    return;
                }
                if (next.isEmpty()) {
                    continue;
                }
                byte[] query = next.get().query();
                seen.add(query);
                askers.add(next.get().identity());
                if (new String(query, StandardCharsets.ISO_8859_1).contains("denied")) {
                    next.get().refuse(DenyReason.POLICY);
                } else {
                    next.get().answer(answer(query));
                }
            }
        });
    }

    static byte[] answer(byte[] query) {
        int end = DnsMessage.questionEnd(query);
        int qtype = (query[end - 4] & 0xff) << 8 | query[end - 3] & 0xff;
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(query, 0, end);
        byte[] r = out.toByteArray();
        r[2] = (byte) (0x80 | (query[2] & 0x01));
        r[3] = (byte) 0x80;
        r[6] = 0;
        r[7] = (byte) (qtype == 1 ? 1 : 0);
        r[8] = r[9] = r[10] = r[11] = 0;
        out.reset();
        out.write(r, 0, r.length);
        if (qtype == 1) {
            out.writeBytes(new byte[] {(byte) 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4});
            out.writeBytes(ANSWER_ADDRESS);
        }
        return out.toByteArray();
    }

    @Test
    void getentAndPythonResolveThroughTheRelayOverUdpAndTcp() throws Exception {
        AtomicBoolean stop = new AtomicBoolean();
        ConcurrentLinkedQueue<byte[]> seen = new ConcurrentLinkedQueue<>();
        try (TestSandbox sandbox = new TestSandbox(); DnsRelay relay = DnsRelay.start(sandbox.broker, NetworkBroker.DNS_RELAY)) {
            assertEquals(NetworkBroker.DNS_RELAY, relay.address());
            ConcurrentLinkedQueue<openshell.isolation.IdentityResolution> askers = new ConcurrentLinkedQueue<>();
            supervise(sandbox, stop, seen, askers);
            // getent hosts, not ahosts: getaddrinfo's AI_ADDRCONFIG finds no non-loopback address here and would not ask.
            TestSandbox.Outcome outcome = sandbox.run(sandbox.bash("unused").argv(List.of("bash", "-c", String.join("; ",
                    "grep nameserver /etc/resolv.conf",
                    "getent hosts example.test",
                    "getent hosts denied.test || echo refused-name",
                    "/usr/bin/python3 -c \"$0\""), String.join("\n",
                    "import socket, struct",
                    "q = b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x07example\\x04test\\x00\\x00\\x01\\x00\\x01'",
                    "t = socket.create_connection(('127.0.0.53', 53), timeout=30)",
                    "t.sendall(struct.pack('>H', len(q)) + q)",
                    "n = struct.unpack('>H', t.recv(2))[0]; r = t.recv(n)",
                    "print('tcp', r[:2].hex(), '.'.join(str(b) for b in r[-4:]))"))).build());
            assertEquals(new ChildExit(0, 0), outcome.exit(), outcome.toString());
            List<String> lines = outcome.output().lines().toList();
            assertEquals("nameserver 127.0.0.53", lines.get(0), outcome.toString());
            assertEquals(List.of("10.20.30.40", "example.test"), List.of(lines.get(1).split("\\s+")), outcome.toString());
            assertEquals("refused-name", lines.get(2), outcome.toString());
            assertEquals("tcp 1234 10.20.30.40", lines.get(3), outcome.toString());
            assertTrue(seen.size() >= 3, "queries reached the supervisor: " + seen.size());
            // Each query is attributed to the binary that sent it: getent over UDP, python3 over TCP.
            List<String> paths = askers.stream().map(a -> a instanceof openshell.isolation.IdentityResolution.Resolved r
                    ? r.identity().path() : a.toString()).distinct().toList();
            assertEquals(List.of("/usr/bin/getent", TestSandbox.realPath("/usr/bin/python3")), paths);
        } finally {
            stop.set(true);
        }
        // The host's own resolver configuration was not touched.
        assertTrue(!Files.readString(Path.of("/etc/resolv.conf")).contains("openshell-sandbox"));
    }

    /** A resolver's random source port: bind(0.0.0.0:0) and bind([::]:0), as busybox's nslookup does. */
    static final Path BUSYBOX = Path.of("/usr/bin/busybox");

    /**
     * {@code busybox nslookup} binds the unspecified address with port 0 before it sends: the broker
     * binds that to loopback instead of refusing it, so the query reaches the relay (and through it
     * only the test's supervisor), while the unspecified address with a fixed port stays refused.
     */
    @Test
    void busyboxNslookupBindsTheUnspecifiedAddressAndResolvesThroughTheRelay() throws Exception {
        assertTrue(Files.isExecutable(BUSYBOX), "the test needs the real busybox (apt-get install busybox-static)");
        AtomicBoolean stop = new AtomicBoolean();
        ConcurrentLinkedQueue<byte[]> seen = new ConcurrentLinkedQueue<>();
        try (TestSandbox sandbox = new TestSandbox(); DnsRelay relay = DnsRelay.start(sandbox.broker, NetworkBroker.DNS_RELAY)) {
            assertEquals(NetworkBroker.DNS_RELAY, relay.address());
            ConcurrentLinkedQueue<openshell.isolation.IdentityResolution> askers = new ConcurrentLinkedQueue<>();
            supervise(sandbox, stop, seen, askers);
            TestSandbox.Outcome outcome = sandbox.run(sandbox.bash("unused").argv(List.of("bash", "-c", String.join("; ",
                    BUSYBOX + " nslookup -type=a example.test",
                    "/usr/bin/python3 -c \"$0\""), String.join("\n",
                    "import socket, errno",
                    "for family, any in [(socket.AF_INET, '0.0.0.0'), (socket.AF_INET6, '::')]:",
                    "    s = socket.socket(family, socket.SOCK_DGRAM); s.bind((any, 0))",
                    "    print('bound', s.getsockname()[0], s.getsockname()[1] > 0)",
                    "    try:",
                    "        socket.socket(family, socket.SOCK_DGRAM).bind((any, 5353)); print('bound fixed', any)",
                    "    except OSError as e: print('fixed', any, errno.errorcode[e.errno])"))).build());
            assertEquals(new ChildExit(0, 0), outcome.exit(), outcome.toString());
            String out = outcome.output();
            assertTrue(out.contains("Address: 10.20.30.40"), outcome.toString());
            assertTrue(out.contains("Server:\t\t127.0.0.53") || out.contains("Server:    127.0.0.53")
                    || out.lines().anyMatch(l -> l.startsWith("Server:") && l.contains("127.0.0.53")), outcome.toString());
            List<String> python = out.lines().filter(l -> l.startsWith("bound") || l.startsWith("fixed")).toList();
            assertEquals(List.of("bound 127.0.0.1 True", "fixed 0.0.0.0 EACCES", "bound ::1 True", "fixed :: EACCES"),
                    python, outcome.toString());
            assertTrue(askers.stream().anyMatch(a -> a instanceof openshell.isolation.IdentityResolution.Resolved r
                    && r.identity().path().equals(BUSYBOX.toString())), "busybox's query was attributed to it: " + askers);
        } finally {
            stop.set(true);
        }
    }

    @Test
    void udpToAnythingButTheRelayIsRefused() throws Exception {
        try (TestSandbox sandbox = new TestSandbox()) {
            TestSandbox.Outcome outcome = sandbox.run(sandbox.python(String.join("\n",
                    "import socket, errno",
                    "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)",
                    "for addr in [('8.8.8.8', 53), ('127.0.0.1', 5353)]:",
                    "    try:",
                    "        u.sendto(b'x', addr); print('sent', addr)",
                    "    except OSError as e: print('sendto', addr[0], errno.errorcode[e.errno])",
                    "    try:",
                    "        u.connect(addr); print('connected', addr)",
                    "    except OSError as e: print('connect', addr[0], errno.errorcode[e.errno])")).build());
            assertEquals(List.of("sendto 8.8.8.8 EACCES", "connect 8.8.8.8 EACCES", "sendto 127.0.0.1 EACCES",
                    "connect 127.0.0.1 EACCES"), outcome.output().lines().toList(), outcome.toString());
        }
    }

    @Test
    void pendingQueriesAreBoundedAndTheNextIsDropped() throws Exception {
        try (TestSandbox sandbox = new TestSandbox(); DnsRelay relay = DnsRelay.start(sandbox.broker, NetworkBroker.DNS_RELAY)) {
            assertEquals(NetworkBroker.DNS_RELAY, relay.address());
            int total = NetworkBroker.MAX_PENDING_DNS + 1;
            TestSandbox.Outcome outcome = sandbox.run(sandbox.python(String.join("\n",
                    "import socket, struct",
                    "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)",
                    "for i in range(" + total + "):",
                    "    q = struct.pack('>HHHHHH', i, 0x100, 1, 0, 0, 0) + b'\\x01a\\x04test\\x00\\x00\\x01\\x00\\x01'",
                    "    u.sendto(q, ('127.0.0.53', 53))",
                    "print('sent')")).build());
            assertEquals("sent", outcome.output().trim(), outcome.toString());
            long deadline = System.nanoTime() + TestSandbox.WAIT.toNanos();
            while (sandbox.broker.pendingDnsCount() + sandbox.broker.droppedDnsCount() < total && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            assertEquals(NetworkBroker.MAX_PENDING_DNS, sandbox.broker.pendingDnsCount());
            assertEquals(1, sandbox.broker.droppedDnsCount());
            sandbox.broker.acceptDns(java.time.Duration.ZERO).orElseThrow().answer(answer(sandboxQuery()));
            assertEquals(NetworkBroker.MAX_PENDING_DNS - 1, sandbox.broker.pendingDnsCount(), "an answer frees its slot");
        }
    }

    private static byte[] sandboxQuery() {
        return new byte[] {0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 'a', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1};
    }
}
