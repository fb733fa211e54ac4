package openshell.tests.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The CLI's sandbox commands against a real gateway process with the real process driver:
 * admission errors, exit codes, and the whole lifecycle create → RUNNING → exec → policy set →
 * stop → start → delete, leaving nothing behind.
 */
class CliSandboxTest {
    static final String POLICY = """
            version: 1
            network_policies:
              api:
                endpoints:
                  - host: api.example.test
                    port: 443
                    protocol: tcp
                binaries:
                  - path: /usr/bin/curl
            """;

    @TempDir
    Path tmp;

    private Path state;

    private Cli.Result cli(String... args) throws Exception {
        return Cli.run(state, launchers(), args);
    }

    private static Map<String, String> launchers() throws Exception {
        return Launchers.environment();
    }

    @AfterEach
    void stopGateway() throws Exception {
        if (state != null && Files.exists(state.resolve("gateway.json"))) {
            // The trusted cleanup path, also when the test failed half way: nothing may be left behind.
            cli("sandbox", "delete", "job");
            cli("gateway", "stop");
        }
    }

    private String gatewayLog() throws Exception {
        Path log = state.resolve("gateway.log");
        StringBuilder b = new StringBuilder("\n--- gateway.log ---\n").append(Files.exists(log) ? Files.readString(log) : "none");
        Path sandboxes = state.resolve("drivers/process/sandboxes");
        if (Files.isDirectory(sandboxes)) {
            try (var dirs = Files.list(sandboxes)) {
                for (Path d : dirs.toList()) {
                    for (String f : new String[] {"supervisor.log", "runtime.log"}) {
                        if (Files.exists(d.resolve(f))) {
                            b.append("\n--- ").append(f).append(" ---\n").append(Files.readString(d.resolve(f)));
                        }
                    }
                }
            }
        }
        return b.toString();
    }

    /**
     * {@code SessionHub.MAX_EXECS_PER_SESSION} (64) execs in flight at once through the API, then
     * one more through the CLI: refused with a clear error while the 64 still run. Each of the 64
     * leaves a marker in the workspace once it really runs in the sandbox, and none of their
     * streams may have ended when the 65th is tried.
     */
    private void execsBeyondTheGatewaysBoundAreRefused(Path workspace) throws Exception {
        int bound = 64;
        String url = GatewayUnderTest.parse(Files.readString(state.resolve("gateway.json"))).getString("url");
        String token = Files.readString(state.resolve("api-token")).strip();
        HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(30)).build();
        List<List<String>> said = new ArrayList<>();
        List<CompletableFuture<Void>> running = new ArrayList<>();
        try {
            for (int i = 0; i < bound; i++) {
                List<String> lines = new CopyOnWriteArrayList<>();
                said.add(lines);
                String argv = "[\"/bin/sh\",\"-c\",\"touch " + workspace + "/running." + i + " && exec /bin/sleep 300\"]";
                running.add(http.sendAsync(HttpRequest.newBuilder(URI.create(url + "/v1/sandboxes/job/exec"))
                        .header("Authorization", "Bearer " + token).timeout(Duration.ofSeconds(300))
                        .POST(HttpRequest.BodyPublishers.ofString("{\"argv\":" + argv + "}")).build(),
                        HttpResponse.BodyHandlers.ofLines())
                        .thenAccept(r -> {
                            lines.add("status " + r.statusCode());
                            r.body().filter(l -> !l.equals("{}")).forEach(lines::add);
                        }));
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(240);
            // A stream's headers come with its first line: output or the heartbeat (SandboxApi.EXEC_HEARTBEAT).
            while ((markers(workspace) < bound || said.stream().anyMatch(List::isEmpty)) && System.nanoTime() < deadline) {
                Thread.sleep(200);
            }
            assertEquals(bound, markers(workspace), "execs running in the sandbox; their streams said " + said
                    + gatewayLog());
            for (List<String> lines : said) {
                assertEquals(List.of("status 200"), lines, "every one of the " + bound + " still runs: " + said);
            }
            Cli.Result refused = cli("sandbox", "exec", "job", "--", "/bin/true");
            assertEquals(1, refused.exit(), refused.out() + refused.err() + "\nthe " + bound + " said " + said
                    + gatewayLog());
            assertTrue(refused.err().contains("already runs " + bound + " execs; wait for one to end"), refused.err());
            for (List<String> lines : said) {
                assertEquals(List.of("status 200"), lines, "the refusal ended none of the " + bound + ": " + said);
            }
            // The one session still serves the rest while the 64 run: a policy revision is answered.
            Path policy = Files.writeString(tmp.resolve("burst-policy.yaml"), POLICY);
            Cli.Result set = cli("policy", "set", "job", "--policy", policy.toString(), "--wait");
            assertEquals(0, set.exit(), set.err() + gatewayLog());
            assertEquals("policy LOADED in sandbox job (generation 2)\n", set.out());
        } finally {
            running.forEach(r -> r.cancel(true));
            http.shutdownNow();
        }
    }

    private static long markers(Path workspace) throws java.io.IOException {
        try (var files = Files.list(workspace)) {
            return files.filter(f -> f.getFileName().toString().startsWith("running.")).count();
        }
    }

    @Test
    void invalidPolicyIsRefusedWithLineNumbersAndUnknownSandboxesExitFour() throws Exception {
        state = tmp.resolve("home");
        assertEquals(0, cli("gateway", "start", "--background", "--port", "0").exit());
        Path bad = Files.writeString(tmp.resolve("bad.yaml"), """
                version: 1
                network_policies:
                  a:
                    endpoints:
                      - host: ""
                        port: 70000
                """);
        Cli.Result refused = cli("sandbox", "create", "--policy", bad.toString(), "--", "/bin/true");
        assertEquals(1, refused.exit(), refused.err());
        assertTrue(refused.err().contains(bad + ":6:15: network_policies.a.endpoints[0].port"), refused.err());
        assertTrue(refused.err().contains(bad + ":5:15: network_policies.a.endpoints[0].host"), refused.err());
        assertTrue(refused.err().contains("nothing was created"), refused.err());
        assertEquals("{\"sandboxes\":[]}", cli("--output", "json", "sandbox", "list").out().strip());

        Path good = Files.writeString(tmp.resolve("good.yaml"), POLICY);
        Cli.Result otherDriver = cli("sandbox", "create", "--policy", good.toString(), "--driver", "docker", "--", "/bin/true");
        assertEquals(1, otherDriver.exit(), otherDriver.err());
        assertTrue(otherDriver.err().contains("runs sandboxes on the 'process' driver, not 'docker'"), otherDriver.err());
        assertEquals("{\"sandboxes\":[]}", cli("--output", "json", "sandbox", "list").out().strip(), "nothing was created");
        for (String[] args : new String[][] {
                {"sandbox", "exec", "nope", "--", "/bin/true"},
                {"sandbox", "stop", "nope"},
                {"sandbox", "start", "nope"},
                {"sandbox", "logs", "nope"},
                {"policy", "set", "nope", "--policy", good.toString()}}) {
            Cli.Result r = cli(args);
            assertEquals(4, r.exit(), String.join(" ", args) + ": " + r.err());
            assertTrue(r.err().contains("no sandbox named 'nope'"), r.err());
        }
        Cli.Result usage = cli("sandbox", "create", "--policy", good.toString());
        assertEquals(2, usage.exit());
        assertTrue(usage.err().contains("give the AGENT after --"), usage.err());
    }

    /** The gateway's exec bound on its own sandbox, with the 64 shown to run in it. */
    @Test
    void execsBeyondTheBoundAreRefusedWhileTheBoundRuns() throws Exception {
        state = tmp.resolve("home");
        assertEquals(0, cli("gateway", "start", "--background", "--port", "0").exit());
        Path policy = Files.writeString(tmp.resolve("policy.yaml"), POLICY);
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        Path workspace = Files.createDirectories(tmp.resolve("workspace"));
        Files.setPosixFilePermissions(workspace, PosixFilePermissions.fromString("rwxrwxrwx"));
        Cli.Result created = cli("--output", "json", "sandbox", "create", "--policy", policy.toString(),
                "--name", "job", "--workspace", workspace.toString(), "--", "/bin/sleep", "600");
        assertEquals(0, created.exit(), created.out() + created.err() + gatewayLog());
        execsBeyondTheGatewaysBoundAreRefused(workspace);
        assertEquals(0, cli("sandbox", "delete", "job").exit());
    }

    /**
     * When the agent ends, an exec reports to its caller how it ended, never "session ended" or
     * without its output. One exec ends first and the agent right after it (it waits for the
     * exec's pid to go): its own exit and output. One still runs when the agent ends (the agent
     * ends as soon as the exec made its marker): ended with the sandbox (SIGKILL, 137), after
     * what it printed. The runtime serves a process's recorded output also once the agent ended,
     * and the supervisor waits (bounded, 2 s) for the gateway's execs before closing the session.
     */
    @Test
    void anExecReportsHowItEndedWhenTheAgentEnds() throws Exception {
        state = tmp.resolve("home");
        assertEquals(0, cli("gateway", "start", "--background", "--port", "0").exit());
        Path policy = Files.writeString(tmp.resolve("policy.yaml"), POLICY);
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        Path workspace = Files.createDirectories(tmp.resolve("workspace"));
        Files.setPosixFilePermissions(workspace, PosixFilePermissions.fromString("rwxrwxrwx"));
        Path marker = workspace.resolve("exec-pid");
        String awaitMarker = "while [ ! -s " + marker + " ]; do sleep 0.01; done";
        String awaitExecEnd = awaitMarker + "; p=$(cat " + marker + "); while kill -0 $p 2>/dev/null; do sleep 0.01; done";
        for (boolean execEndsFirst : new boolean[] {true, false}) {
            Files.deleteIfExists(marker);
            Cli.Result created = cli("--output", "json", "sandbox", "create", "--policy", policy.toString(),
                    "--name", "job", "--workspace", workspace.toString(), "--", "/bin/sh", "-c",
                    execEndsFirst ? awaitExecEnd : awaitMarker);
            assertEquals(0, created.exit(), created.out() + created.err() + gatewayLog());
            Cli.Result exec = cli("sandbox", "exec", "job", "--", "/bin/sh", "-c",
                    "echo before; echo $$ > " + marker + "; " + (execEndsFirst ? "exit 5" : "sleep 30"));
            String what = execEndsFirst ? "the exec ended first: " : "the exec still ran: ";
            assertEquals(execEndsFirst ? 5 : 137, exec.exit(), what + exec.out() + exec.err() + gatewayLog());
            assertEquals("before\n", exec.out(), what + exec.err());
            assertEquals(0, cli("sandbox", "delete", "job").exit());
        }
    }

    /**
     * The README's main job with the real process driver, the real supervisor and sandbox runtime
     * mains, and the supervisor's session to the gateway.
     */
    @Test
    void createExecPolicySetStopStartDeleteUnderTheProcessDriver() throws Exception {
        state = tmp.resolve("home");
        assertEquals(0, cli("gateway", "start", "--background", "--port", "0").exit());
        Path policy = Files.writeString(tmp.resolve("policy.yaml"), POLICY);
        // The workload (a mapped uid) must reach its workspace: JUnit's temp dir is 0700.
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        Path workspace = Files.createDirectories(tmp.resolve("workspace"));
        Files.setPosixFilePermissions(workspace, PosixFilePermissions.fromString("rwxrwxrwx"));
        Cli.Result created = cli("--output", "json", "sandbox", "create", "--policy", policy.toString(),
                "--name", "job", "--workspace", workspace.toString(), "--", "/bin/sh", "-c",
                "echo hello from the agent; echo agent complaint >&2; exec /bin/sleep 600");
        assertEquals(0, created.exit(), "sandbox create failed: " + created.out() + created.err()
                + gatewayLog());
        assertTrue(created.out().contains("\"state\":\"RUNNING\""), created.out());

        Cli.Result exec = cli("sandbox", "exec", "job", "--", "/bin/sh", "-c", "echo out; echo err >&2; exit 3");
        assertEquals(3, exec.exit(), exec.err() + gatewayLog());
        assertEquals("out\n", exec.out());
        assertEquals("err\n", exec.err());

        Cli.Result set = cli("policy", "set", "job", "--policy", policy.toString(), "--wait");
        assertEquals(0, set.exit(), set.err());
        assertEquals("policy LOADED in sandbox job (generation 2)\n", set.out());
        // A policy larger than one HTTP/2 frame (and than the stream's window) reaches the supervisor whole.
        StringBuilder large = new StringBuilder("version: 1\nnetwork_policies:\n");
        for (int i = 0; i < 200; i++) {
            large.append("  block").append(i).append(":\n    endpoints:\n      - host: api").append(i)
                    .append(".example.test\n        port: 443\n        protocol: tcp\n    binaries:\n")
                    .append("      - path: /usr/bin/curl\n");
        }
        assertTrue(large.length() > 16 * 1024, "larger than a frame: " + large.length());
        Path largePolicy = Files.writeString(tmp.resolve("large.yaml"), large);
        Cli.Result setLarge = cli("policy", "set", "job", "--policy", largePolicy.toString(), "--wait");
        assertEquals(0, setLarge.exit(), setLarge.err() + gatewayLog());
        assertEquals("policy LOADED in sandbox job (generation 3)\n", setLarge.out());
        Cli.Result sent = cli("policy", "set", "job", "--policy", policy.toString());
        assertEquals(0, sent.exit(), sent.err());
        assertTrue(sent.out().startsWith("policy generation 4 sent to sandbox job"), sent.out());
        Cli.Result positional = cli("policy", "set", "job", policy.toString());
        assertEquals(2, positional.exit(), "one syntax: --policy FILE");
        assertTrue(positional.err().contains("policy set NAME --policy FILE [--wait]"), positional.err());

        Cli.Result table = cli("sandbox", "list");
        assertEquals(0, table.exit(), table.err());
        assertTrue(table.out().lines().anyMatch(l -> l.startsWith("job ") && l.contains(" RUNNING ")
                && l.contains(" process ")), table.out());
        Cli.Result human = cli("sandbox", "get", "job");
        assertTrue(human.out().lines().anyMatch(l -> l.matches("state:\\s+RUNNING")), human.out());
        assertTrue(human.out().lines().anyMatch(l -> l.matches("sessionConnected:\\s+true")), human.out());
        Cli.Result json = cli("--output", "json", "sandbox", "get", "job");
        assertTrue(json.out().contains("\"name\":\"job\"") && json.out().contains("\"observed\":\"RUNNING\""),
                json.out());
        Cli.Result logs = cli("sandbox", "logs", "job");
        assertTrue(logs.out().contains("policy generation 3 LOADED"), logs.out());
        // The agent's own output, kept by the runtime and followed by the supervisor.
        assertTrue(logs.out().lines().anyMatch(l -> l.equals("hello from the agent")), logs.out() + gatewayLog());
        assertTrue(logs.out().lines().anyMatch(l -> l.equals("[stderr] agent complaint")), logs.out());
        assertTrue(logs.out().contains("policy generation 4 LOADED") || logs.out().contains("policy generation 4 sent"),
                logs.out());

        assertEquals(0, cli("sandbox", "stop", "job").exit());
        Cli.Result stopped = cli("--output", "json", "sandbox", "get", "job");
        assertTrue(stopped.out().contains("\"state\":\"STOPPED\""), stopped.out());
        Cli.Result started = cli("sandbox", "start", "job");
        assertEquals(0, started.exit(), started.err());
        assertTrue(started.out().contains("RUNNING (generation 2)"), started.out());
        assertEquals(0, cli("sandbox", "exec", "job", "--", "/bin/true").exit());

        Leftovers leftovers = Leftovers.of(GatewayUnderTest.parse(created.out()).getString("id"), state);
        assertEquals(1, leftovers.slots().size(), "the running sandbox holds one id range in the host's slots");
        assertEquals(0, cli("sandbox", "delete", "job").exit());
        assertEquals(List.of(), leftovers.remaining(), "delete left nothing behind");
        assertEquals("{\"sandboxes\":[]}", cli("--output", "json", "sandbox", "list").out().strip());
        assertFalse(Files.list(state.resolve("drivers").resolve("process").resolve("sandboxes")).findAny().isPresent(),
                "the driver's state of the sandbox is gone");
    }
}
