package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import openshell.isolation.DenyReason;
import openshell.isolation.IdentityResolution;
import openshell.isolation.PendingTcpOpen;
import org.junit.jupiter.api.Test;

/**
 * Bypass attempts by a real workload process (a C program compiled here with gcc) in a sandbox
 * whose supervisor denies everything: each attempt must fail, and the test asserts how.
 */
class EscapeTest {

    static Path compile(String name) throws Exception {
        Path dir = Files.createTempDirectory("openshell-escape");
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path source = dir.resolve(name + ".c");
        try (InputStream in = EscapeTest.class.getResourceAsStream("/escape/" + name + ".c")) {
            Files.write(source, in.readAllBytes());
        }
        Path binary = dir.resolve(name);
        Process gcc = new ProcessBuilder("gcc", "-O1", "-Wall", "-o", binary.toString(), source.toString())
                .redirectErrorStream(true).start();
        String output = new String(gcc.getInputStream().readAllBytes());
        assertTrue(gcc.waitFor(TestSandbox.WAIT.toSeconds(), TimeUnit.SECONDS), "gcc did not finish");
        assertEquals(0, gcc.exitValue(), "gcc (install it with apt-get install gcc): " + output);
        return binary;
    }

    @Test
    void everyBypassAttemptFailsWithTheExpectedErrno() throws Exception {
        Path binary = compile("escape");
        try {
            everyBypassAttemptFails(binary);
        } finally {
            TestSandbox.deleteTree(binary.getParent());
        }
    }

    private static void everyBypassAttemptFails(Path binary) throws Exception {
        Map<String, String> expected = new LinkedHashMap<>();
        expected.put("raw-socket", "EPERM");
        expected.put("packet-socket", "EAFNOSUPPORT");
        expected.put("vsock-socket", "EAFNOSUPPORT");
        expected.put("sctp-socket", "EPERM");
        expected.put("udp-sendto-outside", "EACCES");
        expected.put("udp-connect-outside", "EACCES");
        expected.put("udp-sendmsg-outside", "EACCES");
        expected.put("udp-sendmmsg-second-outside", "EACCES");
        expected.put("ipv6-connect-denied", "EACCES");
        expected.put("tcp-sendto-with-address", "EACCES");
        expected.put("tcp-msg-fastopen", "EOPNOTSUPP");
        expected.put("bind-wildcard", "EACCES");
        expected.put("io-uring-setup", "EPERM");
        expected.put("unshare-user-namespace", "EPERM");
        expected.put("clone3", "ENOSYS");
        expected.put("netlink-add-address", "EPERM");
        expected.put("ptrace-runtime", "EPERM");
        expected.put("open-runtime-memory", "EACCES");
        expected.put("process-vm-readv-runtime", "EPERM");
        expected.put("runtime-root", "EACCES");
        expected.put("runtime-environ", "EACCES");
        expected.put("vfork-child-connect", "EACCES");
        try (TestSandbox sandbox = new TestSandbox()) {
            ConcurrentLinkedQueue<PendingTcpOpen> seen = new ConcurrentLinkedQueue<>();
            sandbox.supervise(open -> Optional.of(DenyReason.POLICY), 1, seen);
            TestSandbox.Outcome outcome = sandbox.run(sandbox.plan(binary.toString(),
                    List.of("escape", Long.toString(ProcessHandle.current().pid())), binary.getParent().toString()).build());
            Map<String, String> actual = new LinkedHashMap<>();
            for (String line : outcome.output().lines().toList()) {
                String[] parts = line.split(" ", 2);
                actual.put(parts[0], parts.length > 1 ? parts[1] : "");
            }
            // int 0x80 never runs: the filter kills it (SIGSYS) where the kernel has i386 emulation,
            // and the CPU faults (SIGSEGV) where it has none, as on this machine's kernel.
            String i386 = actual.remove("i386-syscall");
            assertTrue("SYS".equals(i386) || "SEGV".equals(i386), "i386 syscall: " + i386);
            assertEquals(expected, actual, outcome.toString());
            // The mediated attempts reached the supervisor with the real binary's identity.
            List<PendingTcpOpen> opens = List.copyOf(seen);
            assertEquals(2, opens.size(), opens.toString());
            assertEquals(InetAddress.getByName("2001:db8::1"), opens.get(0).destination().address());
            assertEquals(InetAddress.getByName("10.20.30.41"), opens.get(1).destination().address());
            var vforkChild = assertInstanceOf(IdentityResolution.Resolved.class, opens.get(1).identity()).identity();
            assertEquals(binary.toString(), vforkChild.path());
            assertEquals(Optional.of(TestSandbox.sha256(binary.toString())), vforkChild.executable().sha256());
            assertEquals(binary.toString(), vforkChild.ancestors().get(0).path(), "the vfork parent is its nearest ancestor");
        }
    }

    /** Waits (in the workload) until thread {@code tid} is blocked in connect(2), without sleeping as synchronization. */
    private static final String AWAIT_CONNECT = String.join("\n",
            "def blocked_in_connect(tid):",
            "    while True:",
            "        try:",
            "            if open('/proc/self/task/%d/syscall' % tid).read().split()[0] == '42': return",
            "        except (OSError, IndexError): pass",
            "        os.sched_yield()");

    @Test
    void execWhileADecisionIsPendingVoidsItAndNothingIsRelayed() throws Exception {
        Path flags = Files.createTempDirectory("openshell-escape-flag");
        try (TestSandbox sandbox = new TestSandbox(); TestSandbox.Upstream upstream = new TestSandbox.Upstream()) {
            // The workload execs only once the supervisor holds the pending decision (a flag file tells it).
            Files.setPosixFilePermissions(flags, PosixFilePermissions.fromString("rwxr-xr-x"));
            Path flag = flags.resolve("decision-pending");
            java.util.concurrent.CompletableFuture<PendingTcpOpen> pending = new java.util.concurrent.CompletableFuture<>();
            Thread.ofPlatform().daemon(true).start(() -> {
                PendingTcpOpen open = sandbox.broker.acceptTcp(TestSandbox.WAIT).orElseThrow();
                pending.complete(open);
                try {
                    Files.createFile(flag);
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            TestSandbox.Outcome outcome = sandbox.run(sandbox.plan("/usr/bin/python3", List.of("python3", "-c", String.join("\n",
                    "import os, socket, threading",
                    "def go():",
                    "    socket.socket().connect(('10.20.30.40', 80))",
                    "t = threading.Thread(target=go); t.start()",
                    "while not os.path.exists('" + flag + "'): os.sched_yield()",
                    "os.execv('/usr/bin/echo', ['echo', 'replaced'])")), flags.toString()).build());
            assertEquals("replaced", outcome.output().trim(), outcome.toString());
            PendingTcpOpen open = pending.get(TestSandbox.WAIT.toSeconds(), TimeUnit.SECONDS);
            assertEquals(TestSandbox.realPath("/usr/bin/python3"),
                    assertInstanceOf(IdentityResolution.Resolved.class, open.identity()).identity().path(),
                    "the identity is the program that asked, captured while it was blocked");
            openshell.isolation.BackendException e = org.junit.jupiter.api.Assertions.assertThrows(
                    openshell.isolation.BackendException.class, open::allow);
            assertEquals(openshell.isolation.BackendException.Kind.TERMINATED, e.kind(), e.getMessage());
            assertEquals(0, sandbox.broker.openRelayCount());
            assertTrue(upstream.received.isEmpty());
        } finally {
            TestSandbox.deleteTree(flags);
        }
    }

    @Test
    void dup2OverABlockedSocketConnectsOnlyTheSocketTheSupervisorWasShown() throws Exception {
        try (TestSandbox sandbox = new TestSandbox(); TestSandbox.Upstream upstream = new TestSandbox.Upstream()) {
            ConcurrentLinkedQueue<PendingTcpOpen> seen = new ConcurrentLinkedQueue<>();
            sandbox.supervise(open -> Optional.empty(), upstream.port(), seen);
            TestSandbox.Outcome outcome = sandbox.run(sandbox.python(String.join("\n",
                    "import os, socket, threading, errno",
                    AWAIT_CONNECT,
                    "s = socket.socket(); other = socket.socket()",
                    "original_inode = os.fstat(s.fileno()).st_ino",
                    "result = {}",
                    "def go():",
                    "    try: s.connect(('10.20.30.40', 80)); result['connect'] = 'ok'",
                    "    except OSError as e: result['connect'] = errno.errorcode[e.errno]",
                    "t = threading.Thread(target=go); t.start()",
                    "blocked_in_connect(t.native_id)",
                    "os.dup2(other.fileno(), s.fileno())",
                    "t.join()",
                    "try: s.send(b'through-the-swap\\n'); print('send ok')",
                    "except OSError as e: print('send', errno.errorcode[e.errno])",
                    "print('connect', result['connect'], 'original', original_inode, 'swapped', os.fstat(other.fileno()).st_ino)")).build());
            List<String> lines = outcome.output().lines().toList();
            assertEquals(2, lines.size(), outcome.toString());
            String[] inodes = lines.get(1).split(" ");
            long original = Long.parseLong(inodes[3]);
            long swapped = Long.parseLong(inodes[5]);
            long decided = seen.peek().socket().inode();
            // Whichever socket the runtime took while the caller was blocked is the one the supervisor
            // was shown and the only one connected: the swap can race the take, never the decision.
            if (lines.get(0).equals("send ok")) {
                assertEquals(swapped, decided, outcome.toString());
            } else {
                assertTrue(lines.get(0).equals("send EPIPE") || lines.get(0).equals("send ENOTCONN"), outcome.toString());
                assertEquals(original, decided, outcome.toString());
                assertTrue(upstream.received.stream().noneMatch(l -> l.contains("through-the-swap")), upstream.received.toString());
            }
            assertEquals("connect", inodes[0]);
            assertEquals("ok", inodes[1], outcome.toString());
        }
    }
}
