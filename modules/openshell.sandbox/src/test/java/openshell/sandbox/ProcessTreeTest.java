package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import openshell.isolation.BackendException;
import openshell.isolation.ExitStatus;
import openshell.isolation.ProcessSignal;
import openshell.isolation.TerminalSize;
import openshell.linux.Cgroup;
import openshell.linux.LaunchPlan;
import org.junit.jupiter.api.Test;

/**
 * Process ownership on the real kernel: execs through the native launcher into a cgroup v2
 * leaf, pipes and a terminal, stdin half-close, signals, exit after drained output, and
 * terminate killing a double-forked, setsid'd descendant.
 */
class ProcessTreeTest {
    private static final Duration WAIT = TestSandbox.WAIT;

    static ProcessTree tree(TestSandbox sandbox) {
        Cgroup leaf = ProcessTree.leaf("openshell-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        return new ProcessTree(TestSandbox.command(), request -> {
            LaunchPlan.Builder plan = sandbox.plan(request.argv().get(0), request.argv())
                    .envp(request.environment()).workingDirectory(request.directory());
            return plan.controllingTerminal(request.terminal().isPresent()).build();
        }, sandbox.broker, leaf);
    }

    static ProcessTree.LaunchRequest pipes(String... argv) {
        return new ProcessTree.LaunchRequest(List.of(argv), List.of("PATH=/usr/bin:/bin", "GREETING=hi"), "/usr", Optional.empty());
    }

    static CompletableFuture<String> readAll(InputStream in) {
        return CompletableFuture.supplyAsync(() -> {
            try {
                return new String(in.readAllBytes(), StandardCharsets.UTF_8);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
    }

    @Test
    void pipesKeepStdoutAndStderrApartAndStdinHalfCloseEndsInput() throws Exception {
        try (TestSandbox sandbox = new TestSandbox(); ProcessTree tree = tree(sandbox)) {
            WorkloadProcess p = tree.start(pipes("/usr/bin/bash", "-c", "pwd; echo $GREETING; cat; echo to-err >&2; exit 7"));
            CompletableFuture<String> out = readAll(p.stdout());
            CompletableFuture<String> err = readAll(p.stderr());
            p.stdin().write("from-stdin\n".getBytes(StandardCharsets.UTF_8));
            p.stdin().close();
            assertEquals(Optional.of(new ExitStatus.Exited(7)), p.awaitExit(WAIT));
            assertTrue(out.isDone(), "the exit status comes only after stdout was drained");
            assertEquals("/usr\nhi\nfrom-stdin\n", out.get(WAIT.toSeconds(), TimeUnit.SECONDS));
            assertEquals("to-err\n", err.get(WAIT.toSeconds(), TimeUnit.SECONDS));
        }
    }

    /** No launcher is started ahead of a launch, and none is left waiting after one. */
    @Test
    void noLauncherWaitsBeforeOrBetweenLaunches() throws Exception {
        try (TestSandbox sandbox = new TestSandbox(); ProcessTree tree = tree(sandbox)) {
            assertEquals(List.of(), idleLaunchers(), "a launcher waits before any launch");
            run(tree, "agent");
            run(tree, "exec");
            assertEquals(List.of(), idleLaunchers(), "a launcher waits after the launches");
        }
    }

    /** Our children still running the launcher program (a target has exec'd away from it). */
    private static List<Long> idleLaunchers() {
        String launcher = TestSandbox.command().executable();
        return ProcessHandle.current().children()
                .filter(p -> p.info().command().filter(launcher::equals).isPresent())
                .map(ProcessHandle::pid).toList();
    }

    private static void run(ProcessTree tree, String word) throws Exception {
        WorkloadProcess p = tree.start(pipes("/usr/bin/bash", "-c", "echo " + word));
        CompletableFuture<String> out = readAll(p.stdout());
        readAll(p.stderr());
        assertEquals(word + "\n", out.get(WAIT.toSeconds(), TimeUnit.SECONDS));
        assertEquals(Optional.of(new ExitStatus.Exited(0)), p.awaitExit(WAIT));
    }

    @Test
    void aTerminalMergesOutputAndResizes() throws Exception {
        try (TestSandbox sandbox = new TestSandbox(); ProcessTree tree = tree(sandbox)) {
            WorkloadProcess p = tree.start(new ProcessTree.LaunchRequest(
                    List.of("/usr/bin/bash", "-c", "tty -s && echo is-tty; stty size; read -r line; stty size; echo err >&2"),
                    List.of("PATH=/usr/bin:/bin"), "/", Optional.of(new TerminalSize(100, 30))));
            StringBuffer seen = new StringBuffer();
            InputStream in = p.stdout();
            CompletableFuture<Void> pump = CompletableFuture.runAsync(() -> {
                byte[] b = new byte[256];
                try {
                    for (int n; (n = in.read(b, 0, b.length)) > 0; ) {
                        seen.append(new String(b, 0, n, StandardCharsets.UTF_8));
                    }
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (!seen.toString().contains("30 100") && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            p.terminal().orElseThrow().resize(new TerminalSize(120, 40));
            p.stdin().write("go\n".getBytes(StandardCharsets.UTF_8));
            assertEquals(Optional.of(new ExitStatus.Exited(0)), p.awaitExit(WAIT));
            pump.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            String text = seen.toString().replace("\r", "");
            assertTrue(text.contains("is-tty\n30 100\n"), text);
            assertTrue(text.contains("40 120\n"), text);
            assertTrue(text.contains("err\n"), "stderr is merged into the terminal: " + text);
        }
    }

    @Test
    void signalsReachTheProcessAndItsStatusSaysSo() throws Exception {
        try (TestSandbox sandbox = new TestSandbox(); ProcessTree tree = tree(sandbox)) {
            WorkloadProcess p = tree.start(pipes("/usr/bin/sleep", "600"));
            CompletableFuture<String> out = readAll(p.stdout());
            readAll(p.stderr());
            p.signal(ProcessSignal.TERM);
            assertEquals(Optional.of(new ExitStatus.Signaled(15)), p.awaitExit(WAIT));
            assertEquals("", out.get(WAIT.toSeconds(), TimeUnit.SECONDS));
        }
    }

    /**
     * A tree the runtime kills reports its exit when it is gone: its output was taken but nobody
     * reads it to the end (a client that stopped granting credit), which used to hold the exit for
     * the whole OUTPUT_DRAIN_WAIT and pushed the supervisor-loss bound past 40 s.
     */
    @Test
    void aKilledTreeReportsItsExitWithoutTheDrainWait() throws Exception {
        try (TestSandbox sandbox = new TestSandbox(); ProcessTree tree = tree(sandbox)) {
            WorkloadProcess p = tree.start(pipes("/usr/bin/bash", "-c", "echo err >&2; echo started; sleep 600"));
            InputStream stdout = p.stdout();
            p.stderr();
            byte[] line = new byte[8];
            assertEquals(8, stdout.readNBytes(line, 0, 8));
            long killed = System.nanoTime();
            tree.terminateAll();
            assertEquals(Optional.of(new ExitStatus.Signaled(9)), p.awaitExit(WorkloadProcess.OUTPUT_DRAIN_WAIT));
            Duration took = Duration.ofNanos(System.nanoTime() - killed);
            assertTrue(took.compareTo(WorkloadProcess.OUTPUT_DRAIN_WAIT.dividedBy(2)) < 0,
                    "the exit came " + took + " after the kill, not after a drain wait");
            // What it wrote before (stderr first, so before the line read above) is still there for a reader.
            assertEquals("err\n", new String(p.stderr().readAllBytes(), StandardCharsets.UTF_8));
        }
    }

    @Test
    void terminateKillsTheProcesssWholeTreeIncludingADoubleForkedSessionLeader() throws Exception {
        try (TestSandbox sandbox = new TestSandbox(); ProcessTree tree = tree(sandbox)) {
            WorkloadProcess p = tree.start(pipes("/usr/bin/bash", "-c",
                    "(setsid sleep 600 >/dev/null 2>&1 < /dev/null &) ; sleep 600 & echo started; wait"));
            InputStream stdout = p.stdout();
            byte[] line = new byte[8];
            assertEquals(8, stdout.readNBytes(line, 0, 8));
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (p.members().size() < 3 && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            List<Integer> members = new ArrayList<>(p.members());
            assertTrue(tree.members().containsAll(members), "the workload's members include the process's");
            assertTrue(members.size() >= 3, "bash, its sleep and the double-forked sleep: " + members);
            p.terminate();
            assertEquals(List.of(), p.members(), "nothing of its tree survives");
            for (int pid : members) {
                assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false) && !isZombie(pid), "pid " + pid + " survived");
            }
            assertEquals(Optional.of(new ExitStatus.Signaled(9)), p.awaitExit(WAIT));
            // Only that process's tree: the workload goes on until the whole of it is terminated.
            WorkloadProcess next = tree.start(pipes("/usr/bin/true"));
            readAll(next.stdout());
            readAll(next.stderr());
            assertEquals(Optional.of(new ExitStatus.Exited(0)), next.awaitExit(WAIT));
            tree.terminateAll();
            BackendException refused = assertThrows(BackendException.class, () -> tree.start(pipes("/usr/bin/true")));
            assertEquals(BackendException.Kind.TERMINATED, refused.kind());
        }
    }

    /**
     * A workload's orphan, re-parented to the runtime (a subreaper), is reaped when it ends, with
     * no zombie left behind; the launch's own status still reaches its watcher.
     */
    @Test
    void anOrphanIsReapedWhenItEndsAndALaunchKeepsItsOwnStatus() throws Exception {
        try (TestSandbox sandbox = new TestSandbox(); ProcessTree tree = tree(sandbox)) {
            WorkloadProcess p = tree.start(pipes("/usr/bin/bash", "-c",
                    "/usr/bin/sleep 0.5 </dev/null >/dev/null 2>&1 & echo $!; exit 3"));
            CompletableFuture<String> out = readAll(p.stdout());
            readAll(p.stderr());
            assertEquals(Optional.of(new ExitStatus.Exited(3)), p.awaitExit(WAIT));
            int orphan = Integer.parseInt(out.get(WAIT.toSeconds(), TimeUnit.SECONDS).strip());
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (Files.exists(Path.of("/proc/" + orphan)) && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertFalse(Files.exists(Path.of("/proc/" + orphan)), "orphan " + orphan + " was not reaped (zombie: "
                    + isZombie(orphan) + ")");
            // The reaper is still there for the next one.
            WorkloadProcess next = tree.start(pipes("/usr/bin/bash", "-c", "/usr/bin/true </dev/null >/dev/null 2>&1 & echo $!"));
            CompletableFuture<String> second = readAll(next.stdout());
            readAll(next.stderr());
            assertEquals(Optional.of(new ExitStatus.Exited(0)), next.awaitExit(WAIT));
            int another = Integer.parseInt(second.get(WAIT.toSeconds(), TimeUnit.SECONDS).strip());
            deadline = System.nanoTime() + WAIT.toNanos();
            while (Files.exists(Path.of("/proc/" + another)) && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertFalse(Files.exists(Path.of("/proc/" + another)), "second orphan " + another + " was not reaped");
        }
    }

    private static boolean isZombie(int pid) {
        try {
            String stat = java.nio.file.Files.readString(java.nio.file.Path.of("/proc/" + pid + "/stat"));
            return stat.substring(stat.lastIndexOf(')') + 2).startsWith("Z");
        } catch (java.io.IOException e) {
            return false;
        }
    }
}
