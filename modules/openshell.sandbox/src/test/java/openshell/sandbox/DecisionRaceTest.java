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
 * White-box races at the broker: a workload that changes what is behind a pending decision (an
 * exec, a dup2 over the blocked socket) against the real kernel, with the broker itself as the
 * mediation source. The black-box escape suite, in a real sandbox with the real supervisor, is
 * {@code tests/escape}.
 */
class DecisionRaceTest {

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
