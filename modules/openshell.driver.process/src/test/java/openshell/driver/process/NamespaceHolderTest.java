package openshell.driver.process;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import openshell.driver.DriverException;
import org.junit.jupiter.api.Test;

/**
 * On the real kernel: the holder's namespaces are fresh, mapped to the sandbox's private id range,
 * have only a loopback interface, and killing the holder leaves nothing alive — not even a
 * double-forked, setsid'd orphan.
 */
class NamespaceHolderTest {
    private static final Map<String, String> ENV = Map.of("PATH", "/usr/bin:/bin");

    private static String run(NamespaceHolder holder, String script) throws Exception {
        Process p = holder.enter(List.of("/bin/sh", "-c", script), ENV, Path.of("/"));
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "probe did not finish");
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.exitValue(), () -> out + new String(readErr(p), StandardCharsets.UTF_8));
        return out;
    }

    private static byte[] readErr(Process p) {
        try {
            return p.getErrorStream().readAllBytes();
        } catch (java.io.IOException e) {
            return new byte[0];
        }
    }

    @Test
    void aStartReadUpToTheSlackAwayIsTheSameProcess() {
        java.time.Instant recorded = java.time.Instant.parse("2026-12-01T03:39:11.940Z");
        java.time.Duration slack = NamespaceHolder.START_SLACK;
        assertTrue(NamespaceHolder.sameStart(recorded, recorded.plusSeconds(1)));
        assertTrue(NamespaceHolder.sameStart(recorded, recorded.plus(slack)));
        assertTrue(NamespaceHolder.sameStart(recorded, recorded.minus(slack)));
        assertFalse(NamespaceHolder.sameStart(recorded, recorded.plus(slack).plusMillis(1)));
        assertFalse(NamespaceHolder.sameStart(recorded, recorded.minus(slack).minusMillis(1)));
    }

    @Test
    void aLiveHolderRecordedBeforeTheBootTimeMovedIsStillAlive() {
        // This JVM stands in for a holder: recorded by another JVM whose boot time was a second off.
        ProcessHandle self = ProcessHandle.current();
        java.time.Instant started = self.info().startInstant().orElseThrow();
        assertTrue(NamespaceHolder.adopt(self.pid(), started.minusSeconds(1), IdRange.slot(0)).isPresent());
        assertTrue(NamespaceHolder.adopt(self.pid(), started.plusSeconds(1), IdRange.slot(0)).isPresent());
        assertFalse(NamespaceHolder.adopt(self.pid(), started.minus(NamespaceHolder.START_SLACK).minusSeconds(1),
                IdRange.slot(0)).isPresent());
    }

    @Test
    void aZombieHasEndedAndALiveProcessHasNot() throws Exception {
        // sh forks a child that exits at once, then becomes a sleep that never reaps it: a real zombie.
        Process parent = new ProcessBuilder("/bin/sh", "-c", "/bin/true & echo $!; exec /bin/sleep 30")
                .redirectErrorStream(true).start();
        try {
            long zombie = Long.parseLong(new java.io.BufferedReader(new java.io.InputStreamReader(
                    parent.getInputStream(), StandardCharsets.US_ASCII)).readLine().strip());
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!java.nio.file.Files.readString(Path.of("/proc", Long.toString(zombie), "stat")).contains(") Z ")) {
                assertTrue(System.nanoTime() < deadline, "the child never became a zombie");
                Thread.sleep(5);
            }
            assertTrue(ProcessHandle.of(zombie).map(ProcessHandle::isAlive).orElse(false),
                    "the JDK counts a zombie alive: the reason for ended()");
            assertTrue(NamespaceHolder.ended(zombie));
            assertFalse(NamespaceHolder.ended(parent.pid()), "a sleeping process has not ended");
            assertTrue(NamespaceHolder.awaitEnded(ProcessHandle.of(zombie).orElseThrow(), System.nanoTime()),
                    "a zombie needs no wait, whoever reaps it");
            assertFalse(NamespaceHolder.awaitEnded(parent.toHandle(), System.nanoTime()),
                    "a running process past the deadline has not ended");
        } finally {
            parent.destroyForcibly().waitFor();
        }
        assertTrue(NamespaceHolder.ended(parent.pid()), "a reaped process is gone");
    }

    @Test
    void theStateIsReadAfterTheNameWhateverTheNameSays() {
        byte[] fake = "42 (a) Z (b) S 1 42 42 0".getBytes(StandardCharsets.US_ASCII);
        assertFalse(NamespaceHolder.endedState(fake), "a name holding \") Z\" is not a zombie");
        assertTrue(NamespaceHolder.endedState("42 (x) Z 1 42".getBytes(StandardCharsets.US_ASCII)));
        assertTrue(NamespaceHolder.endedState("42 (x) X 1 42".getBytes(StandardCharsets.US_ASCII)));
        assertFalse(NamespaceHolder.endedState("42 (x)".getBytes(StandardCharsets.US_ASCII)), "malformed: still running");
        assertFalse(NamespaceHolder.endedState("42 x".getBytes(StandardCharsets.US_ASCII)), "no name: still running");
    }

    @Test
    void freshNamespacesMappedToThePrivateIdRange() throws Exception {
        IdRange ids = IdRange.slot(7);
        NamespaceHolder holder = NamespaceHolder.create(ids);
        try {
            for (String type : List.of("user", "net", "mnt", "pid", "ipc", "uts")) {
                assertNotEquals(NamespaceHolder.namespace(ProcessHandle.current().pid(), type).orElseThrow(),
                        holder.namespaces().get(type), type + " namespace must be fresh");
            }
            String out = run(holder, "id -u; id -g; cat /proc/self/uid_map; cat /proc/self/gid_map; "
                    + "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; echo pid=$$");
            List<String> lines = out.lines().toList();
            assertEquals("0", lines.get(0), "runs as the namespace's root");
            assertEquals("0", lines.get(1));
            assertEquals(List.of("0", Long.toString(ids.first()), Long.toString(IdRange.SIZE)),
                    List.of(lines.get(2).trim().split("\\s+")));
            assertEquals(List.of("0", Long.toString(ids.first()), Long.toString(IdRange.SIZE)),
                    List.of(lines.get(3).trim().split("\\s+")));
            assertEquals("lo", lines.get(4), "the only interface is loopback");
            assertTrue(lines.get(5).startsWith("pid="));
            assertNotEquals("pid=1", lines.get(5), "the holder is PID 1, not the entered process");
        } finally {
            holder.kill();
        }
        assertFalse(holder.alive());
    }

    @Test
    void killLeavesNothingAliveNotEvenSetsidOrphans() throws Exception {
        NamespaceHolder holder = NamespaceHolder.create(IdRange.slot(8));
        try {
            // A double fork with setsid: the grandchild is orphaned and in its own session.
            run(holder, "(setsid sh -c 'sleep 1000 & sleep 1000' >/dev/null 2>&1 &) ; sleep 1000 >/dev/null 2>&1 &");
            // The background shells start asynchronously: wait (bounded) until all three sleepers run.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (holder.processes().size() < 4 && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            List<Long> before = holder.processes();
            assertTrue(before.size() >= 4, "holder plus three sleepers, got " + before);
        } finally {
            holder.kill();
        }
        assertEquals(List.of(), holder.processes());
        assertFalse(holder.alive());
        assertEquals(DriverException.Kind.NOT_FOUND, assertThrows(DriverException.class,
                () -> holder.enter(List.of("/bin/true"), ENV, Path.of("/"))).kind());
    }

    @Test
    void twoSandboxesShareNoNamespaceAndNoIds() throws Exception {
        NamespaceHolder a = NamespaceHolder.create(IdRange.slot(9));
        NamespaceHolder b = NamespaceHolder.create(IdRange.slot(10));
        try {
            for (String type : List.of("user", "net", "mnt", "pid", "ipc", "uts")) {
                assertNotEquals(a.namespaces().get(type), b.namespaces().get(type), type);
            }
            String psFromA = run(a, "ls /proc | grep -E '^[0-9]+$' | wc -l");
            String psFromB = run(b, "ls /proc | grep -E '^[0-9]+$' | wc -l");
            // Each sees only its own holder, the probe shell and ls/grep/wc: never the host's hundreds.
            assertTrue(Integer.parseInt(psFromA.strip()) <= 6, psFromA);
            assertTrue(Integer.parseInt(psFromB.strip()) <= 6, psFromB);
            a.kill();
            assertTrue(b.alive(), "killing one sandbox leaves the other");
            assertEquals("ok\n", run(b, "echo ok"));
        } finally {
            a.kill();
            b.kill();
        }
    }

    @Test
    void idRangesAreBoundedAndNeverOverlap() {
        assertEquals(IdRange.BASE, IdRange.slot(0).first());
        assertEquals(IdRange.slot(0).first() + IdRange.SIZE, IdRange.slot(1).first());
        IdRange last = IdRange.slot(IdRange.MAX_SLOTS - 1);
        assertTrue(last.first() + IdRange.SIZE <= 0xFFFF_FFFEL);
        assertThrows(DriverException.class, () -> IdRange.slot(IdRange.MAX_SLOTS));
        assertThrows(DriverException.class, () -> IdRange.slot(-1));
        assertThrows(DriverException.class, () -> new IdRange(IdRange.BASE + 1));
        assertThrows(DriverException.class, () -> new IdRange(0));
    }
}
