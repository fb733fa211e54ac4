package openshell.tests.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;

import jakarta.json.JsonObject;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A gateway restart in the middle of a sandbox's life loses nothing: after SIGTERM and after
 * SIGKILL, a gateway started again on the same state directory (and port, which the supervisor's
 * launch names) still has the sandbox RUNNING in the same runtime generation, its supervisor's
 * session comes back on its own with a token pair of a higher credential epoch, exec works, the
 * policy and the logs are still there, and a stolen token of an earlier epoch cannot take the
 * session over. Delete then leaves nothing behind.
 */
class GatewayRestartTest {
    /** How long a supervisor may take to find a restarted gateway (it retries every 2 s). */
    static final Duration RECONNECT_TIMEOUT = Duration.ofSeconds(90);

    @TempDir
    Path tmp;

    private GatewayUnderTest gateway;

    @AfterEach
    void cleanUp() throws Exception {
        if (gateway != null && Files.exists(gateway.state.resolve("gateway.json"))) {
            gateway.cli("sandbox", "delete", "job");
            gateway.stopQuietly();
        }
    }

    @Test
    void aRestartedGatewayLosesNothingAndAnOldTokenCannotSeizeTheSession() throws Exception {
        // The workload (a mapped uid) must reach its workspace: JUnit's temp dir is 0700.
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        Path bundles = Files.createDirectory(tmp.resolve("stolen"));
        gateway = new GatewayUnderTest(tmp.resolve("home"), Launchers.environment(Optional.of(bundles)));
        gateway.start(0);
        int port = gateway.port();
        Path policy = Files.writeString(tmp.resolve("policy.yaml"), CliSandboxTest.POLICY);
        Path workspace = Files.createDirectories(tmp.resolve("workspace"));
        Files.setPosixFilePermissions(workspace, PosixFilePermissions.fromString("rwxrwxrwx"));

        JsonObject created = gateway.json("sandbox", "create", "--policy", policy.toString(), "--name", "job",
                "--workspace", workspace.toString(), "--", "/bin/sleep", "600");
        String id = created.getString("id");
        assertEquals("RUNNING", created.getString("state"));
        Cli.Result wrote = gateway.cli("sandbox", "exec", "job", "--", "/bin/sh", "-c",
                "echo before-restart > " + workspace + "/mark");
        assertEquals(0, wrote.exit(), wrote.err() + gateway.diagnostics());
        Cli.Result set = gateway.cli("policy", "set", "job", "--policy", policy.toString(), "--wait");
        assertEquals(0, set.exit(), set.out() + set.err());
        Path stolen = onlyBundle(bundles);
        assertEquals(1, SessionIntruder.epoch(stolen), "the launch bundle carries the pair of epoch 1");

        // The gateway supersedes the opening token right after the hello: wait for that epoch.
        JsonObject before = gateway.await("job", "past its first refresh",
                s -> s.getBoolean("sessionConnected") && s.getJsonNumber("credentialEpoch").longValue() >= 2,
                RECONNECT_TIMEOUT);
        Leftovers leftovers = Leftovers.of(id, gateway.state);
        assertTrue(leftovers.processes().size() >= 3, "supervisor, runtime and holder: " + leftovers.processes());

        long epoch = before.getJsonNumber("credentialEpoch").longValue();
        for (String signal : List.of("TERM", "KILL")) {
            gateway.kill(signal);
            long supervisor = leftovers.supervisorPid();
            assertTrue(ProcessHandle.of(supervisor).map(ProcessHandle::isAlive).orElse(false),
                    "the sandbox outlives its gateway's SIG" + signal);
            gateway.start(port);
            long previous = epoch;
            JsonObject after = gateway.await("job", "reconnected after SIG" + signal,
                    s -> s.getBoolean("sessionConnected") && s.getJsonNumber("credentialEpoch").longValue() > previous,
                    RECONNECT_TIMEOUT);
            epoch = after.getJsonNumber("credentialEpoch").longValue();
            assertEquals("RUNNING", after.getString("state"), after.toString());
            assertEquals("RUNNING", after.getString("observed"), after.toString());
            assertEquals(id, after.getString("id"));
            assertEquals(1, after.getJsonNumber("runtimeGeneration").longValue(), "the same launch, not a new one");
            assertEquals(2, after.getJsonNumber("policyGeneration").longValue(), "the policy set before the restart");

            Cli.Result exec = gateway.cli("sandbox", "exec", "job", "--", "/bin/cat", workspace + "/mark");
            assertEquals(0, exec.exit(), exec.err() + gateway.diagnostics());
            assertEquals("before-restart\n", exec.out());
            Cli.Result logs = gateway.cli("sandbox", "logs", "job");
            assertEquals(0, logs.exit(), logs.err());
            assertTrue(logs.out().contains("policy generation 2 LOADED"), "logs from before the restart: " + logs.out());
            assertTrue(logs.out().contains("session opened at credential epoch " + previous + " (runtime generation 1)")
                    && logs.out().contains("tokens refreshed to credential epoch " + epoch),
                    "the re-established session and its refresh are logged: " + logs.out());

            // An intruder with the launch's own token (epoch 1) tries to take the session over.
            SessionIntruder.Attempt attempt = SessionIntruder.hello(gateway.url(), id, 1,
                    SessionIntruder.gatewayToken(stolen));
            assertTrue(attempt.received().isEmpty(), "the gateway sent the intruder " + attempt.received());
            // Helidon's gRPC client reports the gateway's refusal as a plain end of stream, without its
            // status: the status is asserted where the gateway records it, in the sandbox's log.
            assertTrue(attempt.refusal().startsWith("UNAUTHENTICATED: token refused: credential epoch 1 was superseded")
                    || attempt.refusal().equals(SessionIntruder.Attempt.COMPLETED), attempt.refusal());
            Cli.Result refusedLogged = gateway.cli("sandbox", "logs", "job");
            assertTrue(refusedLogged.out().contains("a session hello was refused (token refused: credential epoch 1 was"
                    + " superseded); the current session is unaffected"), refusedLogged.out());
            JsonObject still = gateway.json("sandbox", "get", "job");
            assertTrue(still.getBoolean("sessionConnected"), "the real supervisor keeps its session: " + still);
            assertEquals(epoch, still.getJsonNumber("credentialEpoch").longValue(), "the intruder changed no epoch");
            assertEquals(0, gateway.cli("sandbox", "exec", "job", "--", "/bin/true").exit(),
                    "exec still reaches the real supervisor");
        }

        Cli.Result deleted = gateway.cli("sandbox", "delete", "job");
        assertEquals(0, deleted.exit(), deleted.err());
        assertEquals(List.of(), leftovers.remaining(), "delete left nothing of " + id + " behind");
        assertEquals("{\"sandboxes\":[]}", gateway.cli("--output", "json", "sandbox", "list").out().strip());
    }

    private static Path onlyBundle(Path bundles) throws Exception {
        try (Stream<Path> files = Files.list(bundles)) {
            List<Path> all = files.toList();
            assertEquals(1, all.size(), "one launch, one supervisor bundle: " + all);
            return all.getFirst();
        }
    }
}
