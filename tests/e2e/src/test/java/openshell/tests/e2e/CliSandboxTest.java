package openshell.tests.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

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

    /** The process driver's launchers, from this test's environment (the operator's way to give them). */
    private static Map<String, String> launchers() {
        Map<String, String> env = new LinkedHashMap<>();
        for (String name : new String[] {"OPENSHELL_SUPERVISOR_LAUNCHER", "OPENSHELL_RUNTIME_LAUNCHER"}) {
            String value = System.getenv(name);
            if (value != null) {
                env.put(name, value);
            }
        }
        return env;
    }

    @AfterEach
    void stopGateway() throws Exception {
        if (state != null && Files.exists(state.resolve("gateway.json"))) {
            cli("gateway", "stop");
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
        for (String[] args : new String[][] {
                {"sandbox", "exec", "nope", "--", "/bin/true"},
                {"sandbox", "stop", "nope"},
                {"sandbox", "start", "nope"},
                {"sandbox", "logs", "nope"},
                {"policy", "set", "nope", good.toString()}}) {
            Cli.Result r = cli(args);
            assertEquals(4, r.exit(), String.join(" ", args) + ": " + r.err());
            assertTrue(r.err().contains("no sandbox named 'nope'"), r.err());
        }
        Cli.Result usage = cli("sandbox", "create", "--policy", good.toString());
        assertEquals(2, usage.exit());
        assertTrue(usage.err().contains("give the AGENT after --"), usage.err());
    }

    /**
     * The README's main job with the real process driver. Needs the supervisor and sandbox
     * runtime mains (branch feat/mains) and their launchers in OPENSHELL_SUPERVISOR_LAUNCHER and
     * OPENSHELL_RUNTIME_LAUNCHER; without them admission fails and so does this test, saying so.
     */
    @Test
    void createExecPolicySetStopStartDeleteUnderTheProcessDriver() throws Exception {
        state = tmp.resolve("home");
        assertEquals(0, cli("gateway", "start", "--background", "--port", "0").exit());
        Path policy = Files.writeString(tmp.resolve("policy.yaml"), POLICY);
        Path workspace = Files.createDirectories(tmp.resolve("workspace"));
        Cli.Result created = cli("--output", "json", "sandbox", "create", "--policy", policy.toString(),
                "--name", "job", "--workspace", workspace.toString(), "--", "/bin/sleep", "600");
        assertEquals(0, created.exit(), "sandbox create failed (the process driver needs the supervisor and runtime "
                + "mains of feat/mains and their launchers in OPENSHELL_SUPERVISOR_LAUNCHER/OPENSHELL_RUNTIME_LAUNCHER): "
                + created.out() + created.err());
        assertTrue(created.out().contains("\"state\":\"RUNNING\""), created.out());

        Cli.Result exec = cli("sandbox", "exec", "job", "--", "/bin/sh", "-c", "echo out; echo err >&2; exit 3");
        assertEquals(3, exec.exit(), exec.err());
        assertEquals("out\n", exec.out());
        assertEquals("err\n", exec.err());

        Cli.Result set = cli("policy", "set", "job", policy.toString());
        assertEquals(0, set.exit(), set.err());
        assertTrue(set.out().contains("LOADED"), set.out());

        assertEquals(0, cli("sandbox", "stop", "job").exit());
        Cli.Result stopped = cli("--output", "json", "sandbox", "get", "job");
        assertTrue(stopped.out().contains("\"state\":\"STOPPED\""), stopped.out());
        Cli.Result started = cli("sandbox", "start", "job");
        assertEquals(0, started.exit(), started.err());
        assertTrue(started.out().contains("RUNNING (generation 2)"), started.out());
        assertEquals(0, cli("sandbox", "exec", "job", "--", "/bin/true").exit());

        assertEquals(0, cli("sandbox", "delete", "job").exit());
        assertEquals("{\"sandboxes\":[]}", cli("--output", "json", "sandbox", "list").out().strip());
        assertFalse(Files.list(state.resolve("drivers").resolve("process").resolve("sandboxes")).findAny().isPresent(),
                "the driver's state of the sandbox is gone");
    }
}
