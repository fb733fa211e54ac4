package openshell.tests.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
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

    /**
     * The process driver's launchers, given the operator's way (environment variables): two scripts
     * running the supervisor and sandbox runtime mains from this test's own module path, in a
     * directory every sandbox uid can read.
     */
    private static Map<String, String> launchers() throws Exception {
        Path dir = Path.of(System.getProperty("openshell.e2e.launchers"));
        Files.createDirectories(dir);
        Map<String, String> env = new LinkedHashMap<>();
        env.put("OPENSHELL_SUPERVISOR_LAUNCHER", launcher(dir, "supervisor", "openshell.supervisor/openshell.supervisor.SupervisorMain").toString());
        env.put("OPENSHELL_RUNTIME_LAUNCHER", launcher(dir, "runtime", "openshell.sandbox/openshell.sandbox.SandboxMain").toString());
        return env;
    }

    /**
     * This test's module path, copied where the sandbox's mapped uid can read it (the local Maven
     * repository under /root is private): the runtime starts inside the sandbox's user namespace.
     */
    private static String readableModulePath(Path dir) throws Exception {
        Path lib = dir.resolve("lib");
        Files.createDirectories(lib);
        Files.setPosixFilePermissions(lib, PosixFilePermissions.fromString("rwxr-xr-x"));
        java.util.List<String> entries = new java.util.ArrayList<>();
        for (String entry : System.getProperty("jdk.module.path").split(java.io.File.pathSeparator)) {
            Path source = Path.of(entry);
            if (!Files.isRegularFile(source)) {
                continue;
            }
            Path copy = lib.resolve(source.getFileName());
            Files.copy(source, copy, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            Files.setPosixFilePermissions(copy, PosixFilePermissions.fromString("rw-r--r--"));
            entries.add(copy.toString());
        }
        return String.join(java.io.File.pathSeparator, entries);
    }

    private static Path launcher(Path dir, String name, String main) throws Exception {
        String java = ProcessHandle.current().info().command().orElseThrow();
        Path script = dir.resolve(name);
        Files.writeString(script, "#!/bin/sh\nexec " + java + " --enable-native-access=com.sun.jna"
                + " -Djna.boot.library.path=" + System.getProperty("openshell.e2e.jna")
                + " -Djna.nounpack=true -Djna.noclasspath=true --add-modules ALL-MODULE-PATH"
                + " -p " + readableModulePath(dir) + " -m " + main + " \"$@\"\n");
        Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("rwxr-xr-x"));
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        return script;
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
                "--name", "job", "--workspace", workspace.toString(), "--", "/bin/sleep", "600");
        assertEquals(0, created.exit(), "sandbox create failed: " + created.out() + created.err()
                + gatewayLog());
        assertTrue(created.out().contains("\"state\":\"RUNNING\""), created.out());

        Cli.Result exec = cli("sandbox", "exec", "job", "--", "/bin/sh", "-c", "echo out; echo err >&2; exit 3");
        assertEquals(3, exec.exit(), exec.err() + gatewayLog());
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
