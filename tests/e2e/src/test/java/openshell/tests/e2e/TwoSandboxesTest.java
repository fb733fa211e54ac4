package openshell.tests.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import jakarta.json.Json;
import jakarta.json.JsonObject;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two sandboxes at once cannot see each other's processes, files or traffic: from inside A, a
 * probe (probe.py, run with {@code sandbox exec}) tries every way to reach B, and each attempt
 * must fail the way the walls make it fail; the same probe inside B reaching its own things proves
 * they are there to reach. Then B's supervisor is killed with SIGKILL: A carries on, and the
 * trusted cleanup path ({@code sandbox delete}) removes all of B without its supervisor, and all
 * of A after it.
 */
class TwoSandboxesTest {
    /** Where B's agent listens, on B's own loopback. */
    static final int LISTENER_PORT = 8080;
    /** A name B's policy allows and A's does not, for the DNS relays. */
    static final String B_ONLY_HOST = "b-only.example.test";
    static final String POLICY_B = """
            version: 1
            network_policies:
              b:
                endpoints:
                  - host: b-only.example.test
                    port: 443
                    protocol: tcp
                binaries:
                  - path: /usr/bin/python3.11
            """;
    static final String LISTENER = "import socket\n"
            + "s = socket.socket()\n"
            + "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            + "s.bind(('127.0.0.1', " + LISTENER_PORT + "))\n"
            + "s.listen()\n"
            + "while True:\n"
            + "    c, _ = s.accept()\n"
            + "    c.sendall(b'listener-of-b')\n"
            + "    c.close()\n";
    /** How long a killed supervisor may take to be gone. */
    static final Duration KILL_TIMEOUT = Duration.ofSeconds(30);

    @TempDir
    Path tmp;

    private GatewayUnderTest gateway;

    @AfterEach
    void cleanUp() throws Exception {
        if (gateway != null && Files.exists(gateway.state.resolve("gateway.json"))) {
            gateway.cli("sandbox", "delete", "a");
            gateway.cli("sandbox", "delete", "b");
            gateway.stopQuietly();
        }
    }

    @Test
    void neitherSeesTheOthersProcessesFilesOrTrafficAndDeleteWorksWithTheSupervisorKilled() throws Exception {
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        gateway = new GatewayUnderTest(tmp.resolve("home"), Launchers.environment());
        gateway.start(0);
        Path workspaceA = workspace("workspace-a");
        Path workspaceB = workspace("workspace-b");
        Files.writeString(workspaceB.resolve("secret-of-b"), "only b reads this\n");
        Path policyA = Files.writeString(tmp.resolve("policy-a.yaml"), CliSandboxTest.POLICY);
        Path policyB = Files.writeString(tmp.resolve("policy-b.yaml"), POLICY_B);

        String a = gateway.json("sandbox", "create", "--policy", policyA.toString(), "--name", "a",
                "--workspace", workspaceA.toString(), "--", "/bin/sleep", "600").getString("id");
        String b = gateway.json("sandbox", "create", "--policy", policyB.toString(), "--name", "b",
                "--workspace", workspaceB.toString(), "--", "/usr/bin/python3", "-c", LISTENER).getString("id");
        Leftovers leftoversA = Leftovers.of(a, gateway.state);
        Leftovers leftoversB = Leftovers.of(b, gateway.state);
        long listener = leftoversB.processes().entrySet().stream().filter(e -> e.getValue().contains("listener-of-b"))
                .map(Map.Entry::getKey).findFirst()
                .orElseThrow(() -> new AssertionError("B's listener is not running: " + leftoversB.processes()));

        JsonObject targetB = Json.createObjectBuilder()
                .add("pid", listener)
                .add("marker", "listener-of-b")
                .add("workspace", workspaceB.toString())
                .add("workspaceFile", workspaceB.resolve("secret-of-b").toString())
                .add("stateFile", gateway.state.resolve("drivers/process/sandboxes").resolve(b).resolve("supervisor.log")
                        .toString())
                .add("socket", "/run/openshell/" + b + "/supervisor.sock")
                .add("port", LISTENER_PORT)
                .add("dnsName", B_ONLY_HOST)
                .build();
        JsonObject fromA = probe("a", workspaceA, targetB);
        JsonObject fromB = probe("b", workspaceB, targetB);

        // Processes: A's /proc holds only A's pid namespace; B's processes have no name there.
        assertEquals("ok: signalled own child", fromA.getString("signalOwnChild"), "signals work at all");
        // Inside B the listener is there by name, yet even B's own exec may not signal it: each workload
        // launch is its own Landlock domain, and Landlock scopes signals to the domain.
        assertEquals("EPERM", fromB.getString("signalByName"), "B's exec finds its agent but may not signal it");
        assertEquals("ok: no such process in /proc", fromA.getString("signalByName"), "A looks for B's listener by name");
        // (The probe's own command line names B's paths and marker: it is the one process left out.)
        assertTrue(fromA.getJsonArray("cmdlines").stream().map(Object::toString).filter(c -> !c.contains("probe.py"))
                .noneMatch(c -> c.contains("listener-of-b") || c.contains(b)), "A lists none of B's processes: " + fromA);
        assertEquals("ENOENT", fromA.getString("proc"), "B's listener by its host pid " + listener + " in A's /proc");
        assertEquals("ESRCH", fromA.getString("kill"), "signalling B's listener by its host pid from A");
        // Files: Landlock lets A reach its own workspace and the read-only host tools only.
        assertEquals("ok: b'only b reads this\\n'", fromB.getString("workspaceFile"));
        assertEquals("EACCES", fromA.getString("workspaceFile"), "reading B's workspace from A");
        assertEquals("EACCES", fromA.getString("workspaceList"), "listing B's workspace from A");
        assertEquals("EACCES", fromA.getString("stateFile"), "reading B's supervisor log from A");
        assertEquals("EACCES", fromA.getString("runtimeSocket"), "B's supervisor socket from A");
        // Traffic: B's loopback is B's own network namespace; A's loopback has no such listener.
        assertEquals("ok: listener-of-b", fromB.getString("listener"), "B reaches its own listener");
        assertEquals("ECONNREFUSED", fromA.getString("listener"), "127.0.0.1:" + LISTENER_PORT + " from A is A's own loopback");
        assertNotEquals(fromA.getString("netns"), fromB.getString("netns"), "two network namespaces");
        // DNS: each 127.0.0.53 is its own sandbox's relay; the name (not resolvable anywhere here,
        // hence NXDOMAIN in both) is decided by A's supervisor under A's policy: denied; by B's: allowed.
        assertEquals("ok: rcode 3 answers 0", fromA.getString("dns"));
        assertEquals(List.of("deny"), dnsDecisions(a), "A's query reached A's supervisor only");
        assertEquals(List.of("allow"), dnsDecisions(b), "B's query reached B's supervisor only");

        // B's supervisor dies without any chance to clean up; A carries on untouched.
        long supervisorB = leftoversB.supervisorPid();
        Process kill = new ProcessBuilder("kill", "-KILL", Long.toString(supervisorB)).inheritIO().start();
        assertTrue(kill.waitFor(30, TimeUnit.SECONDS) && kill.exitValue() == 0);
        ProcessHandle.of(supervisorB).ifPresent(h -> h.onExit().orTimeout(KILL_TIMEOUT.toSeconds(), TimeUnit.SECONDS).join());
        Cli.Result stillA = gateway.cli("sandbox", "exec", "a", "--", "/bin/cat", "/proc/self/status");
        assertEquals(0, stillA.exit(), "A after B's supervisor died: " + stillA.err() + gateway.diagnostics());

        Cli.Result deletedB = gateway.cli("sandbox", "delete", "b");
        assertEquals(0, deletedB.exit(), deletedB.err() + gateway.diagnostics());
        assertEquals(List.of(), leftoversB.remaining(), "delete left nothing of B behind without its supervisor");
        Cli.Result deletedA = gateway.cli("sandbox", "delete", "a");
        assertEquals(0, deletedA.exit(), deletedA.err());
        assertEquals(List.of(), leftoversA.remaining(), "delete left nothing of A behind");
    }

    /** The DNS decisions for {@link #B_ONLY_HOST} in a sandbox's supervisor audit (its log). */
    private List<String> dnsDecisions(String id) throws Exception {
        Path log = gateway.state.resolve("drivers/process/sandboxes").resolve(id).resolve("supervisor.log");
        return Files.readAllLines(log).stream().filter(l -> l.startsWith("{") && l.contains("\"kind\":\"dns\""))
                .map(GatewayUnderTest::parse)
                .filter(j -> j.getJsonObject("destination").getString("host", "").equals(B_ONLY_HOST))
                .peek(j -> assertEquals(id, j.getString("sandbox"), "audited by the sandbox's own supervisor"))
                .map(j -> j.getString("decision")).distinct().toList();
    }

    private Path workspace(String name) throws Exception {
        Path w = Files.createDirectories(tmp.resolve(name));
        // The workload runs as a mapped uid: the workspace must be its to write.
        Files.setPosixFilePermissions(w, PosixFilePermissions.fromString("rwxrwxrwx"));
        try (InputStream probe = TwoSandboxesTest.class.getResourceAsStream("probe.py")) {
            Files.write(w.resolve("probe.py"), probe.readAllBytes());
        }
        return w;
    }

    private JsonObject probe(String sandbox, Path workspace, JsonObject target) throws Exception {
        Cli.Result r = gateway.cli("sandbox", "exec", sandbox, "--", "/usr/bin/python3", workspace.resolve("probe.py").toString(),
                target.toString());
        assertEquals(0, r.exit(), "probe in " + sandbox + ": " + r.out() + r.err() + gateway.diagnostics());
        JsonObject result = GatewayUnderTest.parse(r.out());
        System.out.println("probe in " + sandbox + ": " + result);
        return result;
    }
}
