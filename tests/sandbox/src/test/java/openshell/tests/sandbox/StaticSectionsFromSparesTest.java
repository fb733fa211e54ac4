package openshell.tests.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;
import openshell.driver.ComputeDriver;
import openshell.driver.DriverEnvironment;
import openshell.driver.DriverException;
import openshell.driver.DriverRegistry;
import openshell.driver.LaunchMaterial;
import openshell.driver.LaunchPlan;
import openshell.driver.Provisioned;
import openshell.isolation.AgentSpec;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.WorkloadIdentity;
import openshell.protocol.LaunchBundles;
import openshell.protocol.TokenIssuer;
import openshell.protocol.WorkloadConfinement;
import org.junit.jupiter.api.Test;

/**
 * A warm spare's runtime starts before its sandbox exists, so it must take the policy's static
 * sections from the bundle it is given, not from anything it prepared: a sandbox made from a spare
 * runs its agent as the policy's user under the policy's Landlock lists, and a spare given a launch
 * it cannot honour fails the create with the runtime's reason (not a cold relaunch of the same
 * refusal) and leaves nothing. The test plays the gateway: it mints the bundles as it does.
 */
class StaticSectionsFromSparesTest {
    /** Longest wait for a spare to be ready, and for the agent to write its results (JVM starts, 2 cores). */
    private static final Duration WAIT = Duration.ofSeconds(180);
    private static final int RUN_AS_USER = 4321;
    private static final int RUN_AS_GROUP = 4322;

    @Test
    void aSandboxFromAWarmSpareGetsItsPolicysUserAndListsAndARefusalFailsTheCreate() throws Exception {
        if (!"root".equals(System.getProperty("user.name"))) {
            fail("this end-to-end test needs root: the process driver maps a private uid range for each sandbox");
        }
        Path work = Path.of(System.getProperty("openshell.mains.work.dir"));
        Files.createDirectories(work);
        Path root = Files.createTempDirectory(work, "spares");
        Files.setPosixFilePermissions(root, PosixFilePermissions.fromString("rwx--x--x"));
        Path bin = Files.createDirectory(root.resolve("bin"));
        Files.setPosixFilePermissions(bin, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path runRoot = Files.createTempDirectory(Path.of("/tmp"), "osspare");
        Files.setPosixFilePermissions(runRoot, PosixFilePermissions.fromString("rwx--x--x"));
        Path stateRoot = Files.createDirectory(root.resolve("state"));
        // Mode 0777, outside every list: only Landlock can refuse a write here.
        Path workspace = Files.createDirectory(root.resolve("workspace"));
        Files.setPosixFilePermissions(workspace, PosixFilePermissions.fromString("rwxrwxrwx"));
        Path results = Files.createTempDirectory(Path.of("/tmp"), "osspare-out");
        Files.setPosixFilePermissions(results, PosixFilePermissions.fromString("rwxrwxrwx"));
        String modulePath = Mains.readableModulePath(Files.createDirectory(root.resolve("lib")));
        Path supervisorLauncher = Mains.launcher(bin.resolve("openshell-supervisor"), modulePath,
                "openshell.supervisor/openshell.supervisor.SupervisorMain");
        Path runtimeLauncher = Mains.launcher(bin.resolve("openshell-sandbox"), modulePath,
                "openshell.sandbox/openshell.sandbox.SandboxMain");

        ComputeDriver driver = DriverRegistry.load().driver("process", new DriverEnvironment(stateRoot, Map.of(
                "supervisor.launcher", supervisorLauncher.toString(), "runtime.launcher", runtimeLauncher.toString(),
                "run.root", runRoot.toString(), "spares", "1")));
        TokenIssuer issuer = TokenIssuer.generate("openshell-gateway", "gateway-key-1", java.time.Clock.systemUTC());
        SandboxId id = new SandboxId("spare-" + Long.toHexString(System.nanoTime() & 0xffffff));
        Provisioned provisioned = null;
        try {
            awaitWaitingSpare(stateRoot);
            String policy = """
                    version: 1
                    filesystem_policy:
                      read_only: [/usr, /lib, /lib64, /bin, /etc]
                      read_write: [/tmp]
                    process: {run_as_user: %d, run_as_group: %d}
                    """.formatted(RUN_AS_USER, RUN_AS_GROUP);
            WorkloadConfinement confinement = new WorkloadConfinement(true, List.of("/usr", "/lib", "/lib64", "/bin", "/etc"),
                    List.of("/tmp"), false, false, Optional.of(Integer.toString(RUN_AS_USER)),
                    Optional.of(Integer.toString(RUN_AS_GROUP)));
            String script = "id -u > " + results + "/uid; id -g > " + results + "/gid; (echo x > " + workspace
                    + "/written) 2> " + results + "/denied; echo t > " + results + "/tmp-written; touch " + results + "/done;"
                    + " exec /bin/sleep 600";
            provisioned = driver.create(plan(id, policy, confinement, script, workspace, issuer));
            Path logs = stateRoot.resolve("process/sandboxes").resolve(id.value());
            assertTrue(text(logs.resolve("runtime.log")).contains(LaunchBundles.SPARE_WAITING),
                    "the sandbox was made from the warm spare: " + text(logs.resolve("runtime.log")));
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (!Files.exists(results.resolve("done")) && System.nanoTime() < deadline) {
                Thread.sleep(200);
            }
            String diagnostics = "\n--- runtime.log\n" + text(logs.resolve("runtime.log")) + "\n--- supervisor.log\n"
                    + text(logs.resolve("supervisor.log"));
            assertTrue(Files.exists(results.resolve("done")), "the agent did not finish" + diagnostics);
            assertEquals(RUN_AS_USER + "", text(results.resolve("uid")).strip(), diagnostics);
            assertEquals(RUN_AS_GROUP + "", text(results.resolve("gid")).strip(), diagnostics);
            assertEquals("t", text(results.resolve("tmp-written")).strip(), "read_write: [/tmp]" + diagnostics);
            assertTrue(text(results.resolve("denied")).contains("Permission denied"), "the workspace is in no list: "
                    + text(results.resolve("denied")) + diagnostics);
            assertFalse(Files.exists(workspace.resolve("written")));

            // The next spare, given a user the workload's passwd does not have: the create fails with the reason.
            awaitWaitingSpare(stateRoot);
            SandboxId refused = new SandboxId("spare-refused-" + Long.toHexString(System.nanoTime() & 0xffff));
            WorkloadConfinement unknown = new WorkloadConfinement(false, List.of(), List.of(), false, false,
                    Optional.of("nosuchuser"), Optional.empty());
            DriverException e = assertThrows(DriverException.class, () -> driver.create(plan(refused,
                    "version: 1\nprocess: {run_as_user: nosuchuser}\n", unknown, "exec /bin/sleep 600", workspace, issuer)));
            assertEquals(DriverException.Kind.INVALID, e.kind());
            assertTrue(e.getMessage().contains("process.run_as_user names 'nosuchuser'"), e.getMessage());
            assertFalse(Files.exists(stateRoot.resolve("process/sandboxes").resolve(refused.value())), "nothing is left");
            assertFalse(Files.exists(runRoot.resolve(refused.value())), "nothing is left");
        } finally {
            if (provisioned != null) {
                driver.delete(id, provisioned.state());
            }
            driver.close();
            try (Stream<Path> files = Files.list(results)) {
                for (Path f : files.toList()) {
                    Files.delete(f);
                }
            }
            Files.delete(results);
        }
    }

    private static LaunchPlan plan(SandboxId id, String policy, WorkloadConfinement confinement, String script, Path workspace,
                                   TokenIssuer issuer) {
        SandboxSessionId session = SandboxSessionId.fresh();
        List<String> argv = List.of("/bin/sh", "-c", script);
        Map<String, String> env = Map.of("PATH", "/usr/bin:/bin");
        // The gateway's numeric identity: the policy's ids, or 1000 for a name the runtime resolves.
        int uid = confinement.runAsUser().filter(u -> u.chars().allMatch(Character::isDigit)).map(Integer::parseInt).orElse(1000);
        int gid = confinement.runAsGroup().filter(g -> g.chars().allMatch(Character::isDigit)).map(Integer::parseInt).orElse(1000);
        LaunchBundles.Minted minted = LaunchBundles.mint(LaunchBundles.Request.builder().sandboxId(id.value())
                .sessionId(session.value()).generation(1).policyYaml(policy)
                .agent(new LaunchBundles.Agent(argv, env, "/")).workload(uid, gid).confinement(confinement).build(), issuer, 1);
        SandboxContext context = new SandboxContext(id, session, PolicySnapshot.of(1, policy.getBytes(StandardCharsets.UTF_8)),
                new AgentSpec(argv, env, "/"), WorkloadIdentity.of(uid, gid));
        return new LaunchPlan(context, 1, LaunchMaterial.of(minted.supervisorBundle(), minted.runtimeBundle()),
                Map.of("workspace", workspace.toString()));
    }

    /** Until a spare's runtime and supervisor both say they wait for their sandbox. */
    private static void awaitWaitingSpare(Path stateRoot) throws Exception {
        Path spares = stateRoot.resolve("process/spares");
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            if (Files.isDirectory(spares)) {
                try (Stream<Path> dirs = Files.list(spares)) {
                    for (Path d : dirs.toList()) {
                        if (text(d.resolve("runtime.log")).contains(LaunchBundles.SPARE_WAITING)
                                && text(d.resolve("supervisor.log")).contains(LaunchBundles.SPARE_WAITING)) {
                            return;
                        }
                    }
                }
            }
            Thread.sleep(200);
        }
        fail("no warm spare was waiting within " + WAIT + " under " + spares);
    }

    private static String text(Path file) {
        try {
            return Files.exists(file) ? Files.readString(file) : "";
        } catch (IOException e) {
            return "(unreadable: " + e.getMessage() + ")";
        }
    }
}
