package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import openshell.isolation.AgentSpec;
import openshell.isolation.BackendException;
import openshell.isolation.ConfirmationEvidence;
import openshell.isolation.ExecSpec;
import openshell.isolation.ExitStatus;
import org.junit.jupiter.api.Test;

/** The runtime's lifecycle over RuntimeControl: order is enforced, and the agent's exit ends Running. */
class LifecycleTest {
    /** Not the common pool: on two cores it has one thread, which the held launch occupies. */
    private static final java.util.concurrent.Executor THREADS = command -> Thread.ofVirtual().start(command);

    @Test
    void outOfOrderCallsAreRefusedAndTheAgentsExitEndsEverything() throws Exception {
        try (TestSandbox sandbox = new TestSandbox()) {
            StartupProbes.Report report = StartupProbes.run(sandbox.network);
            try (SandboxRuntime runtime = new SandboxRuntime(report, sandbox.broker, ProcessTreeTest.tree(sandbox), "0".repeat(64))) {
                AgentSpec agentSpec = new AgentSpec(List.of("/usr/bin/bash", "-c", "read -r line; exit 3"), Map.of("PATH", "/usr/bin"), "/");
                assertEquals(BackendException.Kind.INVALID, assertThrows(BackendException.class, () -> runtime.startAgent(agentSpec)).kind());
                assertEquals(BackendException.Kind.INVALID, assertThrows(BackendException.class, () -> runtime.confirm("")).kind());
                assertEquals(List.of(), runtime.attach("supervisor-a", 1));
                assertEquals(BackendException.Kind.DENIED, assertThrows(BackendException.class, () -> runtime.attach("supervisor-b", 2)).kind(),
                        "a second supervisor is refused: the boundary is bound");
                assertTrue(runtime.lastSupervised().isEmpty(), "never supervised yet");
                runtime.supervision(true);
                long during = runtime.lastSupervised().orElseThrow();
                runtime.supervision(false);
                long end = runtime.lastSupervised().orElseThrow();
                assertTrue(end >= during, "supervision ended after it was seen");
                Thread.sleep(20);
                assertEquals(end, runtime.lastSupervised().orElseThrow(), "the end stays where it was");
                ConfirmationEvidence evidence = runtime.confirm("");
                assertTrue(evidence.directEgressFailed());
                assertEquals(report.kernel(), evidence.kernel());
                assertTrue(evidence.controls().stream().anyMatch(c -> c.mechanism().contains("Landlock ABI " + report.landlockAbi())));
                long agent = runtime.startAgent(agentSpec);
                // A sleep no other process has: once it shows in /proc the shell has printed (echo is a
                // builtin, written before the exec), so the agent's end cannot kill it before it did.
                String marker = "600." + (1 + System.nanoTime() % 999_999);
                long sleeper = runtime.exec(ExecSpec.of("/bin/sh", "-c", "echo kept; exec /usr/bin/sleep " + marker));
                awaitCommandLine("/usr/bin/sleep\0" + marker + "\0");
                openshell.isolation.ExecSession session = runtime.session(agent);
                session.stdin().write("bye\n".getBytes(java.nio.charset.StandardCharsets.UTF_8));
                session.stdout().readAllBytes();
                session.stderr().readAllBytes();
                assertEquals(Optional.of(new ExitStatus.Exited(3)), runtime.await(agent, TestSandbox.WAIT));
                // The exec'd process does not outlive the agent.
                assertEquals(Optional.of(new ExitStatus.Signaled(9)), runtime.await(sleeper, TestSandbox.WAIT));
                assertEquals(SandboxRuntime.State.ENDED, runtime.state());
                assertEquals(BackendException.Kind.TERMINATED,
                        assertThrows(BackendException.class, () -> runtime.exec(ExecSpec.of("/usr/bin/true"))).kind());
                assertEquals(Optional.of(new ExitStatus.Exited(3)), runtime.await(agent, Duration.ZERO), "wait keeps the recorded status");
                // What a process printed stays readable once the agent ended (its caller may ask only now);
                // nothing new may be done to it.
                assertEquals("kept\n", new String(runtime.session(sleeper).stdout().readAllBytes(),
                        java.nio.charset.StandardCharsets.UTF_8), "the killed exec's output, read once the agent ended");
                assertEquals(BackendException.Kind.TERMINATED, assertThrows(BackendException.class,
                        () -> runtime.signal(sleeper, openshell.isolation.ProcessSignal.CONT)).kind());
            }
        }
    }

    /** Waits until some process runs exactly this command line (arguments each ended by NUL). */
    private static void awaitCommandLine(String commandLine) throws Exception {
        long deadline = System.nanoTime() + TestSandbox.WAIT.toNanos();
        while (!TestSandbox.anyCommandLine(commandLine::equals)) {
            assertTrue(System.nanoTime() < deadline, "no process ran " + commandLine.replace('\0', ' ') + " within " + TestSandbox.WAIT);
            Thread.sleep(5);
        }
    }

    /** A launch in progress (here held in its plan) does not hold signals, sessions or other execs. */
    @Test
    void aSlowLaunchHoldsNeitherOtherCallsNorOtherExecs() throws Exception {
        java.util.concurrent.CountDownLatch held = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        try (TestSandbox sandbox = new TestSandbox()) {
            StartupProbes.Report report = StartupProbes.run(sandbox.network);
            try (SandboxRuntime runtime = new SandboxRuntime(report, sandbox.broker, heldTree(sandbox, held, release), "0".repeat(64))) {
                runtime.attach("supervisor-a", 1);
                runtime.confirm("");
                long agent = runtime.startAgent(new AgentSpec(List.of("/usr/bin/sleep", "600"), Map.of("PATH", "/usr/bin"), "/"));
                java.util.concurrent.CompletableFuture<Long> slow = java.util.concurrent.CompletableFuture.supplyAsync(
                        () -> runtime.exec(ExecSpec.of("/usr/bin/true", "--hold")), THREADS);
                assertTrue(held.await(TestSandbox.WAIT.toSeconds(), java.util.concurrent.TimeUnit.SECONDS), "the launch began");
                // While it is held: another exec runs to its end, a session and a signal answer.
                long quick = java.util.concurrent.CompletableFuture.supplyAsync(() -> runtime.exec(ExecSpec.of("/usr/bin/true")), THREADS)
                        .get(TestSandbox.WAIT.toSeconds(), java.util.concurrent.TimeUnit.SECONDS);
                assertEquals(Optional.of(new ExitStatus.Exited(0)), runtime.await(quick, TestSandbox.WAIT));
                java.util.concurrent.CompletableFuture.runAsync(() -> {
                    runtime.session(agent);
                    runtime.signal(agent, openshell.isolation.ProcessSignal.CONT);
                }, THREADS).get(TestSandbox.WAIT.toSeconds(), java.util.concurrent.TimeUnit.SECONDS);
                assertTrue(!slow.isDone(), "the held launch is still in progress");
                release.countDown();
                long late = slow.get(TestSandbox.WAIT.toSeconds(), java.util.concurrent.TimeUnit.SECONDS);
                assertEquals(Optional.of(new ExitStatus.Exited(0)), runtime.await(late, TestSandbox.WAIT));
            } finally {
                release.countDown();
            }
        }
    }

    /**
     * An exec whose launch completes only after the agent ended (and its tree was terminated)
     * did start: it is reported with an id and then as killed with the sandbox, never as a
     * launch that failed (CI once saw "the agent ended during the launch" for an exec whose
     * output had already arrived).
     */
    @Test
    void anExecWhoseLaunchOutlivesTheAgentIsReportedAsStartedAndThenKilled() throws Exception {
        java.util.concurrent.CountDownLatch held = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        try (TestSandbox sandbox = new TestSandbox()) {
            StartupProbes.Report report = StartupProbes.run(sandbox.network);
            try (SandboxRuntime runtime = new SandboxRuntime(report, sandbox.broker, heldTree(sandbox, held, release), "0".repeat(64))) {
                runtime.attach("supervisor-a", 1);
                runtime.confirm("");
                long agent = runtime.startAgent(new AgentSpec(List.of("/usr/bin/bash", "-c", "read -r line; exit 3"),
                        Map.of("PATH", "/usr/bin"), "/"));
                java.util.concurrent.CompletableFuture<Long> exec = java.util.concurrent.CompletableFuture.supplyAsync(
                        () -> runtime.exec(ExecSpec.of("/bin/sh", "-c", "exec /usr/bin/sleep 600", "--hold")), THREADS);
                assertTrue(held.await(TestSandbox.WAIT.toSeconds(), java.util.concurrent.TimeUnit.SECONDS), "the launch began");
                runtime.session(agent).stdin().write("bye\n".getBytes(java.nio.charset.StandardCharsets.UTF_8));
                assertEquals(Optional.of(new ExitStatus.Exited(3)), runtime.await(agent, TestSandbox.WAIT));
                assertEquals(SandboxRuntime.State.ENDED, runtime.state());
                release.countDown();
                long late = exec.get(TestSandbox.WAIT.toSeconds(), java.util.concurrent.TimeUnit.SECONDS);
                assertEquals(Optional.of(new ExitStatus.Signaled(9)), runtime.await(late, TestSandbox.WAIT),
                        "the exec ended with the sandbox");
            } finally {
                release.countDown();
            }
        }
    }

    /** A process tree whose launches with {@code --hold} in their argv wait in their plan until released. */
    private static ProcessTree heldTree(TestSandbox sandbox, java.util.concurrent.CountDownLatch held,
                                        java.util.concurrent.CountDownLatch release) {
        openshell.linux.Cgroup leaf = ProcessTree.leaf("openshell-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        return new ProcessTree(TestSandbox.command(), request -> {
            if (request.argv().contains("--hold")) {
                held.countDown();
                try {
                    release.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            return sandbox.plan(request.argv().get(0), request.argv()).envp(request.environment())
                    .workingDirectory(request.directory()).build();
        }, sandbox.broker, leaf);
    }
}
