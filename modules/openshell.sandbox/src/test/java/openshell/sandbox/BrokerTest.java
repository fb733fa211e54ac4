package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ConcurrentLinkedQueue;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.DenyReason;
import openshell.isolation.Executable;
import openshell.isolation.IdentityResolution;
import openshell.isolation.PendingTcpOpen;
import openshell.linux.ChildExit;
import openshell.linux.LaunchResult;
import org.junit.jupiter.api.Test;

/**
 * Real clients inside a sandbox (a fresh network namespace with only lo, launched through the
 * real launcher as nobody under Landlock and the workload filter) reach an allowed upstream only
 * through the broker, are refused for a denied one, and the identity the broker captured is the
 * real executable with its digest and ancestors.
 */
class BrokerTest {
    private static final String ALLOWED = "10.20.30.40";
    private static final String DENIED = "10.20.30.41";

    private static Optional<DenyReason> allowOnly(PendingTcpOpen open) {
        return open.destination().address().getHostAddress().equals(ALLOWED) ? Optional.empty() : Optional.of(DenyReason.POLICY);
    }

    private static BinaryIdentity resolved(PendingTcpOpen open) {
        return assertInstanceOf(IdentityResolution.Resolved.class, open.identity()).identity();
    }

    private static void assertExecutable(String path, Executable executable) throws Exception {
        String real = TestSandbox.realPath(path);
        assertEquals(real, executable.path());
        assertEquals(Optional.of(TestSandbox.sha256(real)), executable.sha256());
    }

    @Test
    void bashReachesAnAllowedUpstreamThroughTheBrokerAndIsRefusedForADeniedOne() throws Exception {
        try (TestSandbox sandbox = new TestSandbox(); TestSandbox.Upstream upstream = new TestSandbox.Upstream()) {
            ConcurrentLinkedQueue<PendingTcpOpen> seen = new ConcurrentLinkedQueue<>();
            sandbox.supervise(BrokerTest::allowOnly, upstream.port(), seen);
            TestSandbox.Outcome outcome = sandbox.run(sandbox.bash(
                    "exec 3<>/dev/tcp/" + ALLOWED + "/80 && echo hello >&3 && read -r line <&3 && echo \"got:$line\";"
                    + " exec 4<>/dev/tcp/" + DENIED + "/443 || echo denied-as-expected").build());
            assertInstanceOf(LaunchResult.Started.class, outcome.started(), outcome.toString());
            assertTrue(outcome.output().contains("got:echo:hello"), outcome.toString());
            assertTrue(outcome.output().contains("/dev/tcp/" + DENIED + "/443: Permission denied"), outcome.toString());
            assertTrue(outcome.output().contains("denied-as-expected"), outcome.toString());
            assertEquals(List.of("hello"), List.copyOf(upstream.received));
            List<PendingTcpOpen> opens = List.copyOf(seen);
            assertEquals(2, opens.size(), opens.toString());
            assertEquals(InetAddress.getByName(ALLOWED), opens.get(0).destination().address());
            assertEquals(80, opens.get(0).destination().port());
            assertEquals(443, opens.get(1).destination().port());
            BinaryIdentity identity = resolved(opens.get(0));
            assertExecutable("/usr/bin/bash", identity.executable());
            assertEquals(List.of(), identity.ancestors(), "bash is the workload's root");
            assertEquals("bash", identity.diagnosticCmdline().get(0));
            assertTrue(opens.get(0).socket().inode() > 0);
            // Each decided connect's 30 s bound left the timer when it was decided (not 30 s later).
            assertEquals(0, sandbox.broker.scheduledExpiries(), "decided connects leave no expiry queued");
        }
    }

    /**
     * The digest-cache attack of issue 33 through the real broker: the workload copies bash into a
     * directory it owns, connects with it (allowed: the supervisor pins that copy's digest), rewrites
     * it in place at the same size, sets its mtime back with {@code touch -d}, waits until the
     * runtime would cache again, and connects once more: the runtime must report the new digest,
     * and the pin must deny it.
     */
    @Test
    void aBinaryRewrittenInPlaceWithItsMtimeSetBackIsIdentifiedByItsNewDigest(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
            throws Exception {
        java.nio.file.Files.setPosixFilePermissions(dir, java.nio.file.attribute.PosixFilePermissions.fromString("rwxrwxrwx"));
        java.nio.file.Path own = dir.resolve("own-bash");
        String pinned = TestSandbox.sha256("/usr/bin/bash");
        String settle = Double.toString(IdentityCapture.CTIME_SETTLE.toMillis() / 1000.0 + 0.5);
        try (TestSandbox sandbox = new TestSandbox(); TestSandbox.Upstream upstream = new TestSandbox.Upstream()) {
            ConcurrentLinkedQueue<PendingTcpOpen> seen = new ConcurrentLinkedQueue<>();
            sandbox.supervise(open -> open.identity() instanceof IdentityResolution.Resolved r
                    && r.identity().executable().sha256().equals(Optional.of(pinned)) ? Optional.empty()
                    : Optional.of(DenyReason.POLICY), upstream.port(), seen);
            String connect = own + " -c 'exec 3<>/dev/tcp/" + ALLOWED + "/80 && echo hi >&3 && read -r l <&3 && echo \"$l\"'";
            String rewrite = "d = open('" + own + "', 'r+b').read(); i = d.index(b'GNU bash, version');"
                    + " f = open('" + own + "', 'r+b'); f.seek(i); f.write(b'g'); f.close()";
            TestSandbox.Outcome outcome = sandbox.run(sandbox.plan("/usr/bin/bash", List.of("bash", "-c", String.join("; ",
                    "cp /usr/bin/bash " + own, "chmod 755 " + own, "sleep " + settle,
                    connect + " || echo first-denied",
                    "m=$(stat -c %y " + own + "); i=$(stat -c %i " + own + "); s=$(stat -c %s " + own + ")",
                    "/usr/bin/python3 -c \"" + rewrite + "\"",
                    "touch -d \"$m\" " + own,
                    "[ \"$m|$i|$s\" = \"$(stat -c '%y|%i|%s' " + own + ")\" ] && echo same-mtime-inode-size",
                    "sleep " + settle,
                    connect + " || echo second-denied")))
                    .landlock(openshell.linux.LaunchPlan.Mode.REQUIRED, List.of("/usr", "/lib", "/lib64", "/bin", "/etc", "/proc"),
                            List.of("/dev/null", dir.toString()))
                    .build());
            assertEquals(List.of("echo:hi", "same-mtime-inode-size", "second-denied"),
                    outcome.output().lines().filter(l -> !l.contains("Permission denied")).toList(), outcome.toString());
            List<PendingTcpOpen> opens = List.copyOf(seen);
            assertEquals(2, opens.size(), opens.toString());
            assertEquals(Optional.of(pinned), resolved(opens.get(0)).executable().sha256());
            assertEquals(own.toString(), resolved(opens.get(1)).path());
            assertEquals(Optional.of(TestSandbox.sha256(own.toString())), resolved(opens.get(1)).executable().sha256(),
                    "the rewritten binary's own digest, not the cached one");
        }
    }

    /**
     * getpeername on a mediated socket shows the destination the workload connected to, not its
     * loopback relay: on IPv4, on a dual-stack IPv6 socket (the mapped address), and into a buffer
     * too short for it (truncated, the full length reported, as the kernel does). Sockets that are
     * not mediated get the kernel's own answers.
     */
    @Test
    void getpeernameOnAMediatedSocketShowsTheDestinationNotTheRelay() throws Exception {
        try (TestSandbox sandbox = new TestSandbox(); TestSandbox.Upstream upstream = new TestSandbox.Upstream()) {
            ConcurrentLinkedQueue<PendingTcpOpen> seen = new ConcurrentLinkedQueue<>();
            sandbox.supervise(BrokerTest::allowOnly, upstream.port(), seen);
            TestSandbox.Outcome outcome = sandbox.run(sandbox.python(String.join("\n",
                    "import socket, ctypes, errno",
                    "s = socket.create_connection(('" + ALLOWED + "', 80), timeout=30)",
                    "print('v4', s.getpeername())",
                    "s.sendall(b'peer\\n'); print(s.makefile().readline().strip())",
                    "s6 = socket.socket(socket.AF_INET6); s6.settimeout(30); s6.connect(('::ffff:" + ALLOWED + "', 8080))",
                    "print('mapped', s6.getpeername()[:2])",
                    "libc = ctypes.CDLL(None, use_errno=True)",
                    "buf = ctypes.create_string_buffer(b'\\xee' * 16); n = ctypes.c_uint32(4)",
                    "rc = libc.getpeername(s.fileno(), buf, ctypes.byref(n))",
                    "print('short', rc, n.value, buf.raw[:4].hex(), buf.raw[4:8].hex())",
                    "srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1)",
                    "c = socket.create_connection(srv.getsockname(), timeout=30)",
                    "print('local', c.getpeername() == srv.getsockname())",
                    "for what, sock in [('unconnected', socket.socket()), ('file', open('/dev/null'))]:",
                    "    r = libc.getpeername(sock.fileno(), buf, ctypes.byref(ctypes.c_uint32(16)))",
                    "    print(what, r, errno.errorcode[ctypes.get_errno()])")).build());
            assertEquals(new ChildExit(0, 0), outcome.exit(), outcome.toString());
            // sockaddr_in: family 2 (little-endian), port 80 (big-endian); then the address bytes, left untouched.
            assertEquals(List.of("v4 ('" + ALLOWED + "', 80)", "echo:peer", "mapped ('::ffff:" + ALLOWED + "', 8080)",
                    "short 0 16 02000050 eeeeeeee", "local True", "unconnected -1 ENOTCONN", "file -1 ENOTSOCK"),
                    outcome.output().lines().toList(), outcome.toString());
            assertEquals(2, seen.size(), "two mediated connects: " + seen);
        }
    }

    @Test
    void aNonBlockingConnectGetsEinprogressThenWritableAndCarriesBytes() throws Exception {
        try (TestSandbox sandbox = new TestSandbox(); TestSandbox.Upstream upstream = new TestSandbox.Upstream()) {
            ConcurrentLinkedQueue<PendingTcpOpen> seen = new ConcurrentLinkedQueue<>();
            sandbox.supervise(BrokerTest::allowOnly, upstream.port(), seen);
            TestSandbox.Outcome outcome = sandbox.run(sandbox.python(String.join("\n",
                    "import socket, select, errno",
                    "s = socket.socket()",
                    "s.setblocking(False)",
                    "rc = s.connect_ex(('" + ALLOWED + "', 8080))",
                    "print('rc', errno.errorcode.get(rc, rc))",
                    "_, w, _ = select.select([], [s], [], 30)",
                    "print('writable', bool(w), 'soerr', s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))",
                    "s.setblocking(True)",
                    "s.sendall(b'nb\\n')",
                    "print(s.makefile().readline().strip())")).build());
            assertEquals(new ChildExit(0, 0), outcome.exit(), outcome.toString());
            assertEquals(List.of("rc EINPROGRESS", "writable True soerr 0", "echo:nb"), outcome.output().lines().toList());
            assertExecutable("/usr/bin/python3", resolved(seen.peek()).executable());
        }
    }

    @Test
    void aClientThatForksBeforeConnectingIsIdentifiedWithItsAncestors() throws Exception {
        try (TestSandbox sandbox = new TestSandbox(); TestSandbox.Upstream upstream = new TestSandbox.Upstream()) {
            ConcurrentLinkedQueue<PendingTcpOpen> seen = new ConcurrentLinkedQueue<>();
            sandbox.supervise(BrokerTest::allowOnly, upstream.port(), seen);
            String python = String.join("\n",
                    "import os, socket",
                    "pid = os.fork()",
                    "if pid == 0:",
                    "    s = socket.create_connection(('" + ALLOWED + "', 80), timeout=30)",
                    "    s.sendall(b'forked\\n')",
                    "    print(s.makefile().readline().strip(), flush=True)",
                    "    os._exit(0)",
                    "os.waitpid(pid, 0)");
            TestSandbox.Outcome outcome = sandbox.run(sandbox.bash("unused")
                    .argv(List.of("bash", "-c", "/usr/bin/python3 -c \"$0\"; echo done", python)).build());
            assertEquals(new ChildExit(0, 0), outcome.exit(), outcome.toString());
            assertEquals(List.of("echo:forked", "done"), outcome.output().lines().toList());
            BinaryIdentity identity = resolved(seen.peek());
            assertExecutable("/usr/bin/python3", identity.executable());
            assertEquals(2, identity.ancestors().size(), identity.toString());
            assertExecutable("/usr/bin/python3", identity.ancestors().get(0));
            assertExecutable("/usr/bin/bash", identity.ancestors().get(1));
        }
    }

    @Test
    void loopbackInsideTheWorkloadStaysLocalWithoutADecision() throws Exception {
        try (TestSandbox sandbox = new TestSandbox()) {
            ConcurrentLinkedQueue<PendingTcpOpen> seen = new ConcurrentLinkedQueue<>();
            sandbox.supervise(open -> Optional.of(DenyReason.POLICY), 1, seen);
            TestSandbox.Outcome outcome = sandbox.run(sandbox.python(String.join("\n",
                    "import socket",
                    "srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1)",
                    "c = socket.create_connection(srv.getsockname(), timeout=30)",
                    "a, _ = srv.accept(); c.sendall(b'local'); print(a.recv(5).decode())")).build());
            assertEquals(new ChildExit(0, 0), outcome.exit(), outcome.toString());
            assertEquals("local", outcome.output().trim());
            assertTrue(seen.isEmpty(), "no decision for loopback: " + seen);
        }
    }

    @Test
    void noDecisionWithinTheBoundIsEtimedout() throws Exception {
        assertEquals(Duration.ofSeconds(30), NetworkBroker.DECISION_WAIT);
        // The bound is a constructor argument so the test need not wait 30 s; the path is the same.
        try (TestSandbox sandbox = new TestSandbox(Duration.ofSeconds(2))) {
            TestSandbox.Outcome outcome = sandbox.run(sandbox.bash(
                    "exec 3<>/dev/tcp/" + ALLOWED + "/80 || echo timed-out").build());
            assertTrue(outcome.output().contains("Connection timed out"), outcome.toString());
            assertTrue(outcome.output().contains("timed-out"), outcome.toString());
            assertEquals(0, sandbox.broker.pendingDecisionCount());
        }
    }

    @Test
    void pendingDecisionsAreBoundedAndTheNextConnectIsEagainThenCloseCancelsTheRest() throws Exception {
        int total = NetworkBroker.MAX_PENDING_DECISIONS + 1;
        try (TestSandbox sandbox = new TestSandbox()) {
            Thread closer = Thread.ofPlatform().daemon(true).start(() -> {
                long deadline = System.nanoTime() + TestSandbox.WAIT.toNanos();
                while ((sandbox.broker.pendingDecisionCount() < NetworkBroker.MAX_PENDING_DECISIONS
                        || sandbox.broker.exhaustedCount() < 1) && System.nanoTime() < deadline) {
                    Thread.onSpinWait();
                }
                sandbox.broker.close();
            });
            TestSandbox.Outcome outcome = sandbox.run(sandbox.python(String.join("\n",
                    "import socket, threading, errno, collections",
                    "results = collections.Counter(); lock = threading.Lock()",
                    "def go(i):",
                    "    s = socket.socket()",
                    "    e = s.connect_ex(('" + ALLOWED + "', 1 + i))",
                    "    with lock: results[errno.errorcode.get(e, e)] += 1",
                    "ts = [threading.Thread(target=go, args=(i,)) for i in range(" + total + ")]",
                    "[t.start() for t in ts]; [t.join() for t in ts]",
                    "print(sorted(results.items()))")).build());
            closer.join(TestSandbox.WAIT.toMillis());
            assertEquals(new ChildExit(0, 0), outcome.exit(), outcome.toString());
            assertEquals("[('EAGAIN', 1), ('ECANCELED', " + NetworkBroker.MAX_PENDING_DECISIONS + ")]", outcome.output().trim());
        }
    }

    /**
     * What every JVM does: a dual-stack IPv6 socket connecting to an IPv4 address in its mapped form
     * (::ffff:a.b.c.d). It is mediated as the IPv4 destination and relayed; it used to hang in its
     * connect forever when the runtime's JVM had no IPv6 (it tried a ::1 relay and never answered).
     */
    @Test
    void aDualStackSocketToAMappedIpv4AddressIsMediatedAsIpv4() throws Exception {
        try (TestSandbox sandbox = new TestSandbox(); TestSandbox.Upstream upstream = new TestSandbox.Upstream()) {
            ConcurrentLinkedQueue<PendingTcpOpen> seen = new ConcurrentLinkedQueue<>();
            sandbox.supervise(open -> Optional.empty(), upstream.port(), seen);
            TestSandbox.Outcome outcome = sandbox.run(sandbox.python(String.join("\n",
                    "import socket",
                    "s = socket.socket(socket.AF_INET6)",
                    "s.settimeout(30)",
                    "s.connect(('::ffff:" + ALLOWED + "', 80))",
                    "s.sendall(b'mapped\\n')",
                    "print(s.makefile().readline().strip())")).build());
            assertEquals(new ChildExit(0, 0), outcome.exit(), outcome.toString());
            assertEquals("echo:mapped", outcome.output().trim());
            assertEquals(InetAddress.getByName(ALLOWED), seen.peek().destination().address());
            assertTrue(seen.peek().destination().address() instanceof java.net.Inet4Address);
        }
    }

    /**
     * An IPv6-only socket cannot take a mapped relay: it gets one on ::1 (seen in the netns's
     * /proc/net/tcp6), while its getpeername shows the destination it connected to.
     */
    @Test
    void anIpv6OnlySocketIsRelayedOverTheV6Loopback() throws Exception {
        try (TestSandbox sandbox = new TestSandbox(); TestSandbox.Upstream upstream = new TestSandbox.Upstream()) {
            ConcurrentLinkedQueue<PendingTcpOpen> seen = new ConcurrentLinkedQueue<>();
            sandbox.supervise(open -> Optional.empty(), upstream.port(), seen);
            TestSandbox.Outcome outcome = sandbox.run(sandbox.python(String.join("\n",
                    "import socket",
                    "s = socket.socket(socket.AF_INET6)",
                    "s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)",
                    "s.settimeout(30)",
                    "s.connect(('2001:db8::7', 443))",
                    "print(s.getpeername()[:2])",
                    "rows = [l.split() for l in open('/proc/net/tcp6').read().splitlines()[1:]]",
                    "print('relay on ::1', any(r[2].startswith('00000000000000000000000001000000:') and r[3] == '01' for r in rows))",
                    "s.sendall(b'six\\n')",
                    "print(s.makefile().readline().strip())")).build());
            assertEquals(new ChildExit(0, 0), outcome.exit(), outcome.toString());
            assertEquals(List.of("('2001:db8::7', 443)", "relay on ::1 True", "echo:six"), outcome.output().lines().toList());
        }
    }

    @Test
    void anIpv6ConnectIsMediatedAndRelayed() throws Exception {
        try (TestSandbox sandbox = new TestSandbox(); TestSandbox.Upstream upstream = new TestSandbox.Upstream()) {
            ConcurrentLinkedQueue<PendingTcpOpen> seen = new ConcurrentLinkedQueue<>();
            sandbox.supervise(open -> Optional.empty(), upstream.port(), seen);
            TestSandbox.Outcome outcome = sandbox.run(sandbox.python(String.join("\n",
                    "import socket",
                    "s = socket.socket(socket.AF_INET6)",
                    "s.settimeout(30)",
                    "s.connect(('2001:db8::7', 443))",
                    "s.sendall(b'six\\n')",
                    "print(s.makefile().readline().strip())")).build());
            assertEquals(new ChildExit(0, 0), outcome.exit(), outcome.toString());
            assertEquals("echo:six", outcome.output().trim());
            assertEquals(InetAddress.getByName("2001:db8::7"), seen.peek().destination().address());
            assertEquals(443, seen.peek().destination().port());
        }
    }

    @Test
    void closingMediationClosesOpenRelaysAndLaterConnectsAreEcanceled() throws Exception {
        try (TestSandbox sandbox = new TestSandbox()) {
            Thread supervisor = Thread.ofPlatform().daemon(true).start(() -> {
                PendingTcpOpen open = sandbox.broker.acceptTcp(TestSandbox.WAIT).orElseThrow();
                openshell.isolation.ByteChannel channel = open.allow();
                try {
                    channel.input().read();
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
                // The supervisor is lost mid-transfer: egress stops at once.
                sandbox.broker.close();
            });
            TestSandbox.Outcome outcome = sandbox.run(sandbox.python(String.join("\n",
                    "import socket, errno",
                    "s = socket.create_connection(('" + ALLOWED + "', 80), timeout=30)",
                    "s.sendall(b'x')",
                    "try: print('read', len(s.recv(10)))",
                    "except OSError as e: print('read', errno.errorcode[e.errno])",
                    "t = socket.socket()",
                    "print('later', errno.errorcode[t.connect_ex(('" + ALLOWED + "', 80))])")).build());
            supervisor.join(TestSandbox.WAIT.toMillis());
            List<String> lines = outcome.output().lines().toList();
            assertTrue(lines.get(0).equals("read 0") || lines.get(0).equals("read ECONNRESET"), outcome.toString());
            assertEquals("later ECANCELED", lines.get(1), outcome.toString());
            assertEquals(0, sandbox.broker.openRelayCount());
        }
    }
}
