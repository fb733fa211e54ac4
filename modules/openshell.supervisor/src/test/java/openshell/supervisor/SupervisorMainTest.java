package openshell.supervisor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import openshell.isolation.BackendException;
import openshell.isolation.SandboxSessionId;
import openshell.protocol.LaunchBundles;
import openshell.protocol.TokenIssuer;
import org.junit.jupiter.api.Test;

/**
 * What the supervisor's main refuses before it starts anything: bad arguments, a bundle that is
 * corrupt, oversized or for another sandbox, an invalid policy; none of its messages holds a secret.
 * (It running a whole sandbox is the end-to-end test in {@code tests/sandbox}.)
 */
class SupervisorMainTest {
    private static final TokenIssuer ISSUER = TokenIssuer.generate("openshell-gateway", "k1", Clock.systemUTC());
    private static final String SECRET = "sk-test-never-printed-42";

    /** A kernel string (or any value) with quotes and newlines stays one value of one ready line. */
    @Test
    void theReadyLineEscapesWhatItCarries() {
        String forged = "6.1\",\"controls\":99}\n{\"ready\":true,\"admin\":\"http://198.51.100.7:1\"}\r\u0000";
        String line = SupervisorMain.readyLine(4242, "sbx-1", 2, forged, 7, 3);
        assertEquals(1, line.lines().count(), line);
        assertTrue(line.startsWith("{\"ready\":true,\"admin\":\"http://127.0.0.1:4242\",\"sandbox\":\"sbx-1\""), line);
        assertTrue(line.chars().noneMatch(c -> c < 0x20), line);
        jakarta.json.JsonObject read = jakarta.json.Json.createReader(new java.io.StringReader(line)).readObject();
        assertEquals(forged, read.getString("kernel"));
        assertEquals(7, read.getInt("controls"));
        assertEquals(3, read.getJsonNumber("policyGeneration").longValue());
    }

    private static byte[] bundle(String sandbox, String policy) {
        return LaunchBundles.mint(LaunchBundles.Request.builder().sandboxId(sandbox)
                .sessionId(SandboxSessionId.fresh().value()).generation(2).policyYaml(policy)
                .agent(new LaunchBundles.Agent(List.of("/usr/bin/true"), Map.of(), "/"))
                .workload(1000, 1000)
                .addCredential(new LaunchBundles.Credential("api", SECRET.getBytes(StandardCharsets.US_ASCII),
                        List.of("api.test")))
                .build(), ISSUER, 1).supervisorBundle();
    }

    private record Outcome(int status, String out, String err) {
    }

    private static Outcome run(List<String> args, byte[] stdin) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int status = SupervisorMain.run(args, new ByteArrayInputStream(stdin), new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8));
        return new Outcome(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    private static final List<String> ARGS = List.of("--sandbox", "sb-1", "--generation", "2", "--channel", "/tmp/none.sock",
            "--bundle-stdin");

    @Test
    void argumentsAreParsedAndBadOnesRefused() {
        SupervisorMain.Arguments a = SupervisorMain.Arguments.parse(List.of("--sandbox", "s", "--generation", "3", "--channel",
                "/run/x.sock", "--bundle-stdin", "--runtime-uid", "1000000000", "--admin-port", "0", "--audit-file", "/tmp/a"));
        assertEquals(new SupervisorMain.Arguments("s", 3, Path.of("/run/x.sock"), Optional.of(1_000_000_000L),
                Optional.empty(), 0, Optional.of(Path.of("/tmp/a"))), a);
        assertEquals(Optional.of(4242L), SupervisorMain.Arguments.parse(List.of("--sandbox", "s", "--generation", "3",
                "--channel", "/run/x.sock", "--bundle-stdin", "--runtime-pid", "4242")).runtimePid());
        for (List<String> bad : List.of(List.of("--sandbox", "s"), List.of("--sandbox", "s", "--generation", "x", "--channel", "/c",
                "--bundle-stdin"), List.of("--sandbox", "s", "--generation", "1", "--channel", "/c"), List.of("--what", "1"),
                List.of("--sandbox", "s", "--generation", "1", "--channel", "/c", "--bundle-stdin", "--admin-port", "70000"))) {
            assertThrows(IllegalArgumentException.class, () -> SupervisorMain.Arguments.parse(bad), bad.toString());
        }
        assertEquals(SupervisorMain.EXIT_USAGE, run(List.of("--sandbox"), new byte[] {1}).status());
    }

    @Test
    void aWarmSparesLateArgumentsAreCheckedAgainstItsBundleLikeACommandLine() {
        List<String> spare = List.of("--channel", "/tmp/none.sock", "--bundle-stdin", "--late-arguments");
        java.io.ByteArrayOutputStream stdin = new java.io.ByteArrayOutputStream();
        stdin.writeBytes("--sandbox\0sb-other\0--generation\0002\0\0".getBytes(StandardCharsets.UTF_8));
        stdin.writeBytes(bundle("sb-1", "version: 1\n"));
        Outcome other = run(spare, stdin.toByteArray());
        assertEquals(SupervisorMain.EXIT_USAGE, other.status());
        assertTrue(other.err().contains("the launch bundle is for sb-1@2, not sb-other@2"), other.err());
        assertFalse(other.err().contains(SECRET), other.err());
        // Only the sandbox and the generation may come late; nothing may come twice.
        for (String bad : List.of("--runtime-pid\0001\0\0", "--channel\0/elsewhere\0\0", "--sandbox\0sb-1\0")) {
            Outcome refused = run(spare, bad.getBytes(StandardCharsets.UTF_8));
            assertEquals(SupervisorMain.EXIT_USAGE, refused.status(), bad);
        }
        assertTrue(run(List.of("--sandbox", "sb-1", "--channel", "/c", "--bundle-stdin", "--late-arguments"),
                "--sandbox\0sb-1\0--generation\0002\0\0".getBytes(StandardCharsets.UTF_8)).err().contains("--sandbox given twice"));
    }

    @Test
    void aSparesRehearsalRunsCleanly() {
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        SupervisorMain.rehearse(new PrintStream(err, true, StandardCharsets.UTF_8));
        assertEquals("", err.toString(StandardCharsets.UTF_8), "the rehearsal policy parses and every step ran");
    }

    @Test
    void aRuntimePidThatIsNoRunningProcessFailsTheLaunchBeforeTheBundleIsRead() throws Exception {
        Process gone = new ProcessBuilder("/bin/true").start();
        gone.waitFor();
        List<String> args = new java.util.ArrayList<>(ARGS);
        args.addAll(List.of("--runtime-pid", Long.toString(gone.pid())));
        Outcome outcome = run(args, "not a bundle".getBytes(StandardCharsets.UTF_8));
        assertEquals(SupervisorMain.EXIT_USAGE, outcome.status());
        assertTrue(outcome.err().contains("process tree root " + gone.pid() + " is not a running process"), outcome.err());
        // A live root: the policy is made (the check itself runs per connection, UnixPeerProcessTreeTest).
        SupervisorMain.runtimePeer(SupervisorMain.Arguments.parse(List.of("--sandbox", "s", "--generation", "3",
                "--channel", "/run/x.sock", "--bundle-stdin", "--runtime-pid", Long.toString(ProcessHandle.current().pid()))));
    }

    @Test
    void badBundlesAreRefusedBeforeAnythingStarts() {
        Outcome corrupt = run(ARGS, "not a bundle".getBytes(StandardCharsets.UTF_8));
        assertEquals(SupervisorMain.EXIT_USAGE, corrupt.status());
        assertTrue(corrupt.err().contains("BUNDLE_INVALID"), corrupt.err());

        Outcome oversized = run(ARGS, new byte[LaunchBundles.MAX_BUNDLE_BYTES + 1]);
        assertEquals(SupervisorMain.EXIT_USAGE, oversized.status());
        assertTrue(oversized.err().contains("larger than"), oversized.err());

        Outcome other = run(ARGS, bundle("sb-other", "version: 1\n"));
        assertEquals(SupervisorMain.EXIT_USAGE, other.status());
        assertTrue(other.err().contains("sb-other@2"), other.err());
        assertFalse(other.err().contains(SECRET));

        Outcome policy = run(ARGS, bundle("sb-1", "version: 1\nnetwork_policies: [oops\n"));
        assertEquals(SupervisorMain.EXIT_USAGE, policy.status());
        assertTrue(policy.err().contains("the policy is invalid"), policy.err());
        assertFalse(policy.err().contains(SECRET));
        assertEquals("", policy.out());
    }

    @Test
    void theProviderOpensLinksOnlyWithInstalledLaunchMaterial() {
        openshell.isolation.SandboxContext context = new openshell.isolation.SandboxContext(new openshell.isolation.SandboxId("sb-1"),
                SandboxSessionId.fresh(), openshell.isolation.PolicySnapshot.of(1, new byte[] {1}),
                openshell.isolation.AgentSpec.of(List.of("/usr/bin/true")), openshell.isolation.WorkloadIdentity.of(1000, 1000));
        openshell.isolation.BackendRegistry registry = openshell.isolation.BackendRegistry.load();
        openshell.isolation.VerifiedTopologyDescriptor descriptor = registry.verify(openshell.isolation.TopologyDescriptor.of(
                SupervisorMain.BACKEND, new byte[0]), SupervisorMain.BACKEND);
        assertEquals(BackendException.Kind.UNAVAILABLE, assertThrows(BackendException.class,
                () -> registry.backend(descriptor).attach(descriptor, context)).kind());
        Runnable uninstall = OpenShellRuntimeBackend.installLaunchMaterial(d -> {
            throw new BackendException(BackendException.Kind.FAILED, "material used for " + d.backend());
        });
        try {
            BackendException used = assertThrows(BackendException.class, () -> registry.backend(descriptor).attach(descriptor, context));
            assertEquals(BackendException.Kind.FAILED, used.kind(), "the installed material was used");
            assertThrows(SupervisorException.class, () -> OpenShellRuntimeBackend.installLaunchMaterial(d -> null),
                    "one supervisor process, one launch");
        } finally {
            uninstall.run();
        }
    }
}
