package openshell.tests.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

import jakarta.json.JsonObject;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A sandbox whose walls are gone says so: after {@code kill -9} of its supervisor, of its
 * runtime, of its namespace holder, and after its agent exits on its own, {@code sandbox list}
 * and {@code sandbox get} show FAILED with the cause and the time within a stated bound of the
 * workload's end, and the sandbox's log says what happened. One gateway, one sandbox per case.
 */
class ObservedFailureTest {
    /** The runtime's bound for terminating a workload whose supervisor is gone. */
    static final Duration SUPERVISOR_LOSS_BOUND = Duration.ofSeconds(30);
    /**
     * The observer's delay after the workload ended: a poll of 1 s, its confirming poll, a
     * driver status, and the CLI round trips of this test's waits, with room for a loaded machine.
     */
    static final Duration OBSERVER_BOUND = Duration.ofSeconds(10);
    /**
     * The gateway's own cleanup when nothing would end the workload (a killed runtime leaves its
     * agent running): the driver's stop, which waits for the namespace to empty (10 s at most).
     */
    static final Duration CLEANUP_BOUND = Duration.ofSeconds(10);
    /** How long a killed supervisor's session may still be reported connected. */
    static final Duration SESSION_END_BOUND = Duration.ofSeconds(5);
    /** How long the agent of the self-exiting case runs before it exits 7. */
    static final int AGENT_SECONDS = 20;
    /** How long a sandbox may take to be created and connected on this machine. */
    static final Duration RUNNING_TIMEOUT = Duration.ofSeconds(120);

    @TempDir
    static Path tmp;

    private static GatewayUnderTest gateway;
    private static Path policy;

    @BeforeAll
    static void startGateway() throws Exception {
        // The workload (a mapped uid) must reach its workspace: JUnit's temp dir is 0700.
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        gateway = new GatewayUnderTest(tmp.resolve("home"), Launchers.environment());
        gateway.start(0);
        policy = Files.writeString(tmp.resolve("policy.yaml"), CliSandboxTest.POLICY);
    }

    @AfterAll
    static void stopGateway() {
        if (gateway != null) {
            for (String name : List.of("supervisor", "runtime", "holder", "agent", "restart")) {
                try {
                    gateway.cli("sandbox", "delete", name);
                } catch (Exception ignored) {
                    // Best effort after a failure; the failure itself is what the report shows.
                }
            }
            gateway.stopQuietly();
        }
    }

    /** Creates a sandbox and waits until it runs with its session connected. */
    private static String create(String name, String... agent) throws Exception {
        Path workspace = Files.createDirectories(tmp.resolve("workspace-" + name));
        Files.setPosixFilePermissions(workspace, PosixFilePermissions.fromString("rwxrwxrwx"));
        List<String> args = new java.util.ArrayList<>(List.of("sandbox", "create", "--policy", policy.toString(),
                "--name", name, "--workspace", workspace.toString(), "--"));
        args.addAll(List.of(agent));
        String id = gateway.json(args.toArray(String[]::new)).getString("id");
        gateway.await(name, "running and connected", s -> s.getString("state").equals("RUNNING")
                && s.getBoolean("sessionConnected"), RUNNING_TIMEOUT);
        return id;
    }

    /** The one process of the sandbox whose command line matches. */
    private static long process(String id, Predicate<String> cmdline) {
        Map<Long, String> all = Leftovers.of(id, gateway.state).processes();
        List<Long> found = all.entrySet().stream().filter(e -> cmdline.test(e.getValue())).map(Map.Entry::getKey).toList();
        assertEquals(1, found.size(), "one matching process of " + id + " in " + all);
        return found.getFirst();
    }

    private static void kill9(long pid) {
        assertTrue(ProcessHandle.of(pid).map(ProcessHandle::destroyForcibly).orElse(false), "SIGKILL to " + pid);
    }

    /**
     * Waits for FAILED and checks that get, list (JSON and table) and logs all say it with the cause.
     *
     * @return the recorded cause
     */
    private static String awaitFailed(String name, Instant from, Duration bound, String... causeWords) throws Exception {
        JsonObject got = gateway.await(name, "FAILED", s -> s.getString("state").equals("FAILED"), bound);
        Duration took = Duration.between(from, Instant.now());
        String cause = got.getString("failureCause", "");
        for (String word : causeWords) {
            assertTrue(cause.contains(word), "the cause names '" + word + "': " + got);
        }
        Instant failedAt = Instant.parse(got.getString("failedAt"));
        assertTrue(!failedAt.isBefore(from.minusSeconds(1)) && !failedAt.isAfter(Instant.now()), "failedAt " + got);
        assertEquals(false, got.getBoolean("sessionConnected"), got.toString());

        JsonObject listed = gateway.json("sandbox", "list").getJsonArray("sandboxes").getValuesAs(JsonObject.class)
                .stream().filter(s -> s.getString("name").equals(name)).findFirst().orElseThrow();
        assertEquals("FAILED", listed.getString("state"), listed.toString());
        assertEquals(cause, listed.getString("failureCause"), listed.toString());
        assertTrue(!listed.getString("observed").equals("RUNNING"), "list shows what is observed: " + listed);
        String table = gateway.cli("sandbox", "list").out();
        assertTrue(table.lines().anyMatch(l -> l.startsWith(name + " ") && l.contains(" FAILED ")), table);
        assertTrue(table.contains("  failed at " + got.getString("failedAt") + ": " + cause), table);

        String logs = gateway.cli("sandbox", "logs", name).out();
        assertTrue(logs.contains("FAILED at " + got.getString("failedAt") + ": " + cause), logs);
        assertTrue(Files.readString(gateway.state.resolve("gateway.log")).contains("sandbox " + name + " ("),
                "the gateway's log names the failure" + gateway.diagnostics());
        System.out.println("ObservedFailureTest: sandbox " + name + " recorded FAILED " + Duration.between(from, failedAt).toMillis()
                + " ms after the kill/exit (the CLI saw it after " + took.toMillis() + " ms): " + cause);
        return cause;
    }

    @Test
    void aKilledSupervisorEndsItsSessionAtOnceAndTheSandboxFailsOnceTheRuntimeTerminatedTheWorkload() throws Exception {
        String id = create("supervisor", "/bin/sleep", "601");
        long supervisor = process(id, c -> c.contains("openshell.supervisor.SupervisorMain"));
        Instant killed = Instant.now();
        kill9(supervisor);

        JsonObject seen = gateway.await("supervisor", "disconnected", s -> !s.getBoolean("sessionConnected")
                && !s.getString("observed").equals("RUNNING"), SESSION_END_BOUND);
        // The workload still runs under its last confirmed enforcement: recorded RUNNING, observed as it is.
        assertEquals("RUNNING", seen.getString("state"), seen.toString());
        assertTrue(seen.getString("observedDetail").contains("supervisor (pid " + supervisor + ") ended"), seen.toString());

        awaitFailed("supervisor", killed, SUPERVISOR_LOSS_BOUND.plus(OBSERVER_BOUND),
                "the workload was terminated", "supervisor (pid " + supervisor + ") ended");
        Duration took = Duration.between(killed, Instant.parse(gateway.json("sandbox", "get", "supervisor")
                .getString("failedAt")));
        assertTrue(took.compareTo(SUPERVISOR_LOSS_BOUND.minusSeconds(5)) >= 0,
                "recorded FAILED only once the runtime ended the workload, not at the kill: " + took);
        assertTrue(gateway.cli("sandbox", "logs", "supervisor").out().contains("observed DEGRADED while recorded RUNNING"));
        assertEquals(0, gateway.cli("sandbox", "delete", "supervisor").exit());
    }

    @Test
    void aKilledRuntimeFailsTheSandboxPromptly() throws Exception {
        String id = create("runtime", "/bin/sleep", "602");
        long runtime = process(id, c -> c.contains("openshell.sandbox.SandboxMain"));
        Instant killed = Instant.now();
        kill9(runtime);
        // Today its agent outlives it (nothing in the namespaces ends it) and the gateway stops what
        // is left; a runtime that took its agent with it would be "the workload was terminated".
        String cause = awaitFailed("runtime", killed, OBSERVER_BOUND.plus(CLEANUP_BOUND), "runtime ended");
        assertTrue(cause.contains("the gateway stopped what was left") || cause.contains("the workload was terminated"), cause);
        assertEquals(0, gateway.cli("sandbox", "delete", "runtime").exit());
    }

    @Test
    void aKilledNamespaceHolderFailsTheSandboxPromptly() throws Exception {
        String id = create("holder", "/bin/sleep", "603");
        long holder = process(id, c -> c.equals("/bin/sleep infinity"));
        Instant killed = Instant.now();
        kill9(holder);
        awaitFailed("holder", killed, OBSERVER_BOUND, "holder (pid " + holder + ") ended");
        assertEquals(0, gateway.cli("sandbox", "delete", "holder").exit());
    }

    @Test
    void aRestartedGatewayRecordsWhatDiedWhileItWasDown() throws Exception {
        String id = create("restart", "/bin/sleep", "604");
        int port = gateway.port();
        long holder = process(id, c -> c.equals("/bin/sleep infinity"));
        gateway.kill("KILL");
        Instant killed = Instant.now();
        kill9(holder);
        // The same port: it is the address the sandboxes' launches name.
        gateway.start(port);
        Duration down = Duration.between(killed, Instant.now());
        awaitFailed("restart", killed, down.plus(OBSERVER_BOUND), "holder (pid " + holder + ") ended");
        assertEquals(0, gateway.cli("sandbox", "delete", "restart").exit());
    }

    @Test
    void anAgentThatExitsOnItsOwnFailsTheSandboxWithItsExitStatus() throws Exception {
        String id = create("agent", "/bin/sh", "-c", "sleep " + AGENT_SECONDS + "; exit 7");
        long agent = process(id, c -> c.startsWith("/bin/sh -c sleep " + AGENT_SECONDS));
        ProcessHandle handle = ProcessHandle.of(agent).orElseThrow(() -> new AssertionError("the agent already ended"));
        handle.onExit().get(AGENT_SECONDS * 2L, java.util.concurrent.TimeUnit.SECONDS);
        Instant exited = Instant.now();
        awaitFailed("agent", exited, OBSERVER_BOUND, "the agent ended: Exited[code=7]");
        // What was left is stopped, so a FAILED sandbox starts again; its new launch carries no old cause.
        Cli.Result started = gateway.cli("sandbox", "start", "agent");
        assertEquals(0, started.exit(), started.out() + started.err() + gateway.diagnostics());
        JsonObject again = gateway.await("agent", "running again", s -> s.getString("state").equals("RUNNING")
                && s.getJsonNumber("runtimeGeneration").longValue() == 2, RUNNING_TIMEOUT);
        assertTrue(!again.containsKey("failureCause"), again.toString());
        assertEquals(0, gateway.cli("sandbox", "delete", "agent").exit());
    }
}
