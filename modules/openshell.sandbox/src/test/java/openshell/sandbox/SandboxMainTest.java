package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import openshell.isolation.AgentSpec;
import openshell.isolation.BoundBoundary;
import openshell.isolation.ExecSession;
import openshell.isolation.ExecSpec;
import openshell.isolation.ExitStatus;
import openshell.isolation.NetworkMediationSource;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.ReadyBoundary;
import openshell.isolation.RunningBoundary;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.WorkloadIdentity;
import org.junit.jupiter.api.Test;

/** The runtime's main serving the Sandbox Protocol as a real process, and its exit rules. */
class SandboxMainTest {
    private static final Duration WAIT = TestSandbox.WAIT;

    private static RunningBoundary startAgent(MainHarness main, List<String> agent, NetworkMediationSource[] mediation) {
        SandboxContext context = new SandboxContext(new SandboxId(main.bundle.sandboxId()),
                new SandboxSessionId(main.bundle.sessionId()), PolicySnapshot.of(1, main.bundle.policyYaml()),
                new AgentSpec(agent, Map.of("PATH", "/usr/bin:/bin"), "/"),
                new WorkloadIdentity(TestSandbox.NOBODY, TestSandbox.NOBODY, List.of()));
        BoundBoundary bound = null;
        // As SupervisorMain does: a link the runtime dropped before it was authenticated is retried on its next dial.
        for (int attempt = 1; bound == null; attempt++) {
            try {
                bound = main.backend().attach(MainHarness.descriptor(), context);
            } catch (openshell.isolation.BackendException e) {
                if (attempt >= 5 || e.kind() != openshell.isolation.BackendException.Kind.UNAVAILABLE) {
                    throw e;
                }
                System.err.println("attach attempt " + attempt + " failed: " + e.getMessage());
            }
        }
        mediation[0] = bound.mediation();
        ReadyBoundary ready = bound.confirm();
        assertTrue(ready.evidence().directEgressFailed());
        // The runtime holds no policy: it confirms under the digest of the one its supervisor decides with.
        assertEquals(context.policy().sha256(), ready.evidence().policySha256());
        return ready.startAgent();
    }

    @Test
    void mainServesTheProtocolFromItsBundleAndExitsZeroAfterTheBoundaryEnds() throws Exception {
        List<String> agent = List.of("/usr/bin/sleep", "600");
        try (MainHarness main = new MainHarness("sb-serve", 3, agent)) {
            CompletableFuture<String> err = main.stderr;
            NetworkMediationSource[] mediation = new NetworkMediationSource[1];
            RunningBoundary running = startAgent(main, agent, mediation);
            try (ExecSession id = running.exec().exec(ExecSpec.builder(List.of("/usr/bin/id", "-u"))
                    .environment(Map.of("PATH", "/usr/bin:/bin")).build())) {
                assertEquals(TestSandbox.NOBODY + "\n", new String(id.stdout().readAllBytes(), StandardCharsets.UTF_8));
                assertEquals(Optional.of(new ExitStatus.Exited(0)), id.process().awaitExit(WAIT));
            }
            running.terminate();
            mediation[0].close();
            main.loseSupervisor();
            assertTrue(main.process.waitFor(WAIT.toSeconds(), TimeUnit.SECONDS), () -> err.getNow(""));
            assertEquals(0, main.process.exitValue(), () -> err.getNow(""));
            String line = main.servingLine;
            assertTrue(line.contains("\"sandbox\":\"sb-serve\",\"generation\":3,\"serving\":true"), line);
            assertTrue(line.contains("\"directEgressFailed\":true"), line);
            assertTrue(line.contains("\"dumpable\":false"), line);
        }
    }

    @Test
    void losingTheSupervisorTerminatesTheWorkloadAfterTheGrace() throws Exception {
        // A distinctive argv so the agent can be looked for in /proc afterwards.
        List<String> agent = List.of("/usr/bin/sleep", "613.25");
        try (MainHarness main = new MainHarness("sb-loss", 4, agent)) {
            CompletableFuture<String> err = main.stderr;
            NetworkMediationSource[] mediation = new NetworkMediationSource[1];
            startAgent(main, agent, mediation);
            assertTrue(agentAlive("613.25"), "the agent runs");
            // The runtime's watch samples the link every WATCH_INTERVAL: lose the supervisor only after
            // it could have seen it (on a loaded machine it once had not, and reported "no supervisor
            // within" the first-contact wait instead of a lost one).
            Thread.sleep(SandboxMain.WATCH_INTERVAL.multipliedBy(5).toMillis());
            long lost = System.nanoTime();
            // The supervisor goes away: its listener and its link close.
            mediation[0].close();
            main.loseSupervisor();
            assertTrue(main.process.waitFor(SandboxMain.SUPERVISOR_LOSS_GRACE.plus(WAIT).toSeconds(), TimeUnit.SECONDS));
            Duration took = Duration.ofNanos(System.nanoTime() - lost);
            assertEquals(SandboxMain.EXIT_SUPERVISOR_LOST, main.process.exitValue(), () -> err.getNow(""));
            assertTrue(took.compareTo(SandboxMain.SUPERVISOR_LOSS_GRACE) >= 0, "waited the grace: " + took);
            String stderr = err.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertTrue(stderr.contains("supervisor lost"), stderr);
            assertFalse(agentAlive("613.25"), "the agent is gone");
        }
    }

    @Test
    void aWarmSparesLateArgumentsCompleteItsCommandLineAndNoneIsGivenTwice() throws Exception {
        byte[] late = "--sandbox\0sb-late\0--generation\0007\0--workspace\0/w s\0\0bundle".getBytes(StandardCharsets.UTF_8);
        java.io.ByteArrayInputStream stdin = new java.io.ByteArrayInputStream(late);
        assertEquals(new SandboxMain.LaunchArguments("sb-late", 7, "/run/c.sock", Optional.of("/w s")),
                SandboxMain.LaunchArguments.read(List.of("--channel", "/run/c.sock", "--bundle-stdin", "--late-arguments"), stdin));
        assertEquals("bundle", new String(stdin.readAllBytes(), StandardCharsets.UTF_8), "the bundle is left on the stream");
        // Without the flag nothing is read: the bytes are the bundle's.
        java.io.ByteArrayInputStream untouched = new java.io.ByteArrayInputStream(late);
        SandboxMain.LaunchArguments.read(List.of("--sandbox", "s", "--generation", "1", "--channel", "/c", "--bundle-stdin"), untouched);
        assertEquals(late.length, untouched.available());
        for (String bad : List.of("--channel\0/elsewhere\0\0", "--sandbox\0again\0\0", "--generation\0001\0")) {
            org.junit.jupiter.api.Assertions.assertThrows(RuntimeException.class, () -> SandboxMain.LaunchArguments.read(
                    List.of("--sandbox", "s", "--channel", "/c", "--bundle-stdin", "--late-arguments"),
                    new java.io.ByteArrayInputStream(bad.getBytes(StandardCharsets.UTF_8))), bad);
        }
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> SandboxMain.LaunchArguments.parse(
                List.of("--sandbox", "a", "--sandbox", "b", "--generation", "1", "--channel", "/c", "--bundle-stdin")));
    }

    @Test
    void theExitRulesHoldAtTheirBounds() {
        long t0 = 1_000_000_000L;
        SandboxMain.Watch first = new SandboxMain.Watch(t0);
        assertEquals(-1, first.look(t0 + SandboxMain.FIRST_CONTACT_WAIT.toNanos() - 1, SandboxRuntime.State.SERVING, 0));
        assertEquals(SandboxMain.EXIT_SUPERVISOR_LOST,
                first.look(t0 + SandboxMain.FIRST_CONTACT_WAIT.toNanos(), SandboxRuntime.State.SERVING, 0));

        SandboxMain.Watch lost = new SandboxMain.Watch(t0);
        assertEquals(-1, lost.look(t0 + 5, SandboxRuntime.State.RUNNING, 1));
        assertEquals(-1, lost.look(t0 + 5 + SandboxMain.SUPERVISOR_LOSS_GRACE.toNanos() - 1, SandboxRuntime.State.RUNNING, 0));
        assertEquals(SandboxMain.EXIT_SUPERVISOR_LOST,
                lost.look(t0 + 5 + SandboxMain.SUPERVISOR_LOSS_GRACE.toNanos(), SandboxRuntime.State.RUNNING, 0));

        SandboxMain.Watch back = new SandboxMain.Watch(t0);
        back.look(t0, SandboxRuntime.State.RUNNING, 1);
        assertEquals(-1, back.look(t0 + SandboxMain.SUPERVISOR_LOSS_GRACE.toNanos() - 1, SandboxRuntime.State.RUNNING, 0));
        assertEquals(-1, back.look(t0 + SandboxMain.SUPERVISOR_LOSS_GRACE.toNanos() - 1, SandboxRuntime.State.RUNNING, 1),
                "a reconnect inside the grace keeps it serving");
        assertEquals(-1, back.look(t0 + 2 * SandboxMain.SUPERVISOR_LOSS_GRACE.toNanos() - 2, SandboxRuntime.State.RUNNING, 0));

        // Supervised and lost between two looks: the control plane's record counts, not the samples.
        SandboxMain.Watch brief = new SandboxMain.Watch(t0);
        java.util.OptionalLong endedAt = java.util.OptionalLong.of(t0 + 7);
        assertEquals(-1, brief.look(t0 + 10, SandboxRuntime.State.RUNNING, 0, false, endedAt));
        assertEquals(-1, brief.look(t0 + 7 + SandboxMain.SUPERVISOR_LOSS_GRACE.toNanos() - 1, SandboxRuntime.State.RUNNING, 0,
                false, endedAt));
        assertEquals(SandboxMain.EXIT_SUPERVISOR_LOST, brief.look(t0 + 7 + SandboxMain.SUPERVISOR_LOSS_GRACE.toNanos(),
                SandboxRuntime.State.RUNNING, 0, false, endedAt), "the loss grace, not the first-contact wait, applies");
        assertTrue(SandboxMain.SUPERVISOR_LOSS_GRACE.compareTo(SandboxMain.FIRST_CONTACT_WAIT) < 0);

        SandboxMain.Watch ended = new SandboxMain.Watch(t0);
        assertEquals(-1, ended.look(t0, SandboxRuntime.State.ENDED, 1), "the supervisor may still read statuses");
        assertEquals(-1, ended.look(t0 + SandboxMain.ENDED_LINGER.toNanos() - 1, SandboxRuntime.State.ENDED, 1));
        assertEquals(0, ended.look(t0 + SandboxMain.ENDED_LINGER.toNanos(), SandboxRuntime.State.ENDED, 1));
        assertEquals(0, new SandboxMain.Watch(t0).look(t0, SandboxRuntime.State.ENDED, 0), "ended and left: exit now");
    }

    private static boolean agentAlive(String marker) throws IOException {
        return TestSandbox.anyCommandLine(commandLine -> commandLine.contains(marker));
    }
}
