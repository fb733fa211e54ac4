package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import openshell.isolation.BackendException;
import openshell.linux.BpfProgram;
import openshell.linux.ProcessControl;
import openshell.linux.Seccomp;
import openshell.linux.SeccompListener;
import openshell.protocol.LaunchBundles;
import org.junit.jupiter.api.Test;

/** The startup probes on the real kernel, and the runtime's main as the process driver starts it. */
class StartupTest {

    @Test
    void probesPassInAFencedNamespaceAndRecordHowDirectEgressFailed() {
        try (TestSandbox sandbox = new TestSandbox()) {
            StartupProbes.Report report = StartupProbes.run(sandbox.network);
            assertEquals(List.of("lo"), report.interfaces());
            assertEquals(StartupProbes.EGRESS_TARGETS.size(), report.egressErrors().size());
            assertTrue(report.egressErrors().stream().allMatch(e -> e.contains("unreachable")), report.toString());
            assertTrue(report.landlockAbi() >= StartupProbes.MIN_LANDLOCK_ABI, report.toString());
            assertTrue(report.kernel().matches("\\d+\\.\\d+.*"), report.kernel());
        }
    }

    @Test
    void probesRefuseANamespaceWithAWayOut() {
        BackendException e = assertThrows(BackendException.class, () -> StartupProbes.run(WorkloadNetwork.current()));
        assertEquals(BackendException.Kind.UNAVAILABLE, e.kind());
        assertTrue(e.getMessage().contains("must hold only lo"), e.getMessage());
    }

    @Test
    void aNestedSandboxFailsWithEbusyAndSaysSo() throws Exception {
        CompletableFuture<String> message = new CompletableFuture<>();
        Thread.ofPlatform().daemon(true).name("already-filtered").start(() -> {
            try {
                ProcessControl.setNoNewPrivileges();
                try (SeccompListener outer = Seccomp.installWithListener(BpfProgram.builder().ret(Seccomp.RET_ALLOW).build())) {
                    // Threads created from here inherit the outer filter, as a nested runtime would.
                    StartupProbes.seccomp();
                    message.complete("probe passed under an existing listener " + outer.fd());
                }
            } catch (BackendException e) {
                message.complete(e.getMessage());
            } catch (RuntimeException e) {
                message.completeExceptionally(e);
            }
        });
        String text = message.get(TestSandbox.WAIT.toSeconds(), TimeUnit.SECONDS);
        assertTrue(text.contains("EBUSY") && text.contains("nested"), text);
    }

    @Test
    void theSeccompProbeReallyInjectsADescriptor() {
        StartupProbes.SeccompProbe probe = StartupProbes.seccomp();
        assertTrue(probe.waitKillable(), "kernel 6.18 has WAIT_KILLABLE_RECV");
    }

    @Test
    void mainRefusesBadArgumentsAndBadBundles() throws Exception {
        Process missing = MainHarness.start(List.of("--sandbox", "sb-1", "--generation", "3", "--channel", "/tmp/x"), new byte[] {1});
        assertTrue(missing.waitFor(TestSandbox.WAIT.toSeconds(), TimeUnit.SECONDS));
        assertEquals(SandboxMain.EXIT_USAGE, missing.exitValue());

        Process big = MainHarness.start(List.of("--sandbox", "sb-1", "--generation", "3", "--channel", "/tmp/x", "--bundle-stdin"),
                new byte[LaunchBundles.MAX_BUNDLE_BYTES + 1]);
        assertTrue(big.waitFor(TestSandbox.WAIT.toSeconds(), TimeUnit.SECONDS));
        assertEquals(SandboxMain.EXIT_USAGE, big.exitValue());
        assertTrue(new String(big.getErrorStream().readAllBytes(), StandardCharsets.UTF_8).contains("larger than"));

        Process corrupt = MainHarness.start(List.of("--sandbox", "sb-1", "--generation", "3", "--channel", "/tmp/x", "--bundle-stdin"),
                "opaque-bundle".getBytes(StandardCharsets.UTF_8));
        assertTrue(corrupt.waitFor(TestSandbox.WAIT.toSeconds(), TimeUnit.SECONDS));
        assertEquals(SandboxMain.EXIT_USAGE, corrupt.exitValue());
        assertTrue(new String(corrupt.getErrorStream().readAllBytes(), StandardCharsets.UTF_8).contains("BUNDLE_INVALID"));

        // A real bundle for another sandbox is refused before anything runs.
        LaunchBundles.Minted minted = MainHarness.mint("sb-other", 3, List.of("/usr/bin/true"));
        Process other = MainHarness.start(List.of("--sandbox", "sb-1", "--generation", "3", "--channel", "/tmp/x", "--bundle-stdin"),
                minted.runtimeBundle());
        assertTrue(other.waitFor(TestSandbox.WAIT.toSeconds(), TimeUnit.SECONDS));
        assertEquals(SandboxMain.EXIT_USAGE, other.exitValue());
        assertTrue(new String(other.getErrorStream().readAllBytes(), StandardCharsets.UTF_8).contains("sb-other@3"));
    }
}
