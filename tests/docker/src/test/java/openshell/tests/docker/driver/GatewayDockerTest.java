package openshell.tests.docker.driver;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.sun.net.httpserver.HttpServer;

/**
 * The Docker driver behind the gateway, driven by the {@code openshell} CLI as a user drives it:
 * {@code gateway start --driver docker}, {@code sandbox create --image}, exec, an allowed and a
 * denied request to an upstream on the host's loopback (reached by the supervisor container, the
 * only one with a network, through an operator host alias), {@code run --driver docker --image},
 * and delete leaving nothing.
 */
class GatewayDockerTest {
    static final int UID = 10001;
    static final long COMMAND_SECONDS = 180;
    private static final String NAMESPACE = "gw-" + ProcessHandle.current().pid();
    private static final String HOST = "api.docker.test";
    private static DriverImages images;
    private static HttpServer upstream;
    private static Path state;
    private static Path policy;

    record Result(int exit, String out, String err) {
    }

    @BeforeAll
    static void gateway() throws IOException, InterruptedException {
        images = DriverImages.build("gw");
        upstream = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 16);
        upstream.createContext("/allowed", exchange -> {
            byte[] body = "upstream-says-hi\n".getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(200, body.length);
            exchange.getResponseBody().write(body);
            exchange.close();
        });
        upstream.start();
        state = Files.createDirectory(images.work.resolve("state"), PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwx------")));
        policy = images.work.resolve("policy.yaml");
        Files.writeString(policy, """
                version: 1
                process:
                  run_as_user: "%d"
                  run_as_group: "%d"
                network_policies:
                  demo:
                    endpoints:
                      - host: %s
                        ports: [%d]
                    binaries:
                      - path: /bin/busybox
                """.formatted(UID, UID, HOST, upstream.getAddress().getPort()));
        startGateway();
    }

    static void startGateway() throws IOException, InterruptedException {
        Result started = cli("gateway", "start", "--background", "--driver", "docker",
                "--driver-setting", "namespace=" + NAMESPACE, "--driver-setting", "docker.host=" + DriverImages.dockerHost(), "--driver-setting", "supervisor.image=" + images.supervisorBase,
                "--host-alias", HOST + "=127.0.0.1");
        assertEquals(0, started.exit(), started.err() + started.out());
    }

    @AfterAll
    static void stop() throws IOException, InterruptedException {
        try {
            if (state != null) {
                cli("gateway", "stop");
            }
        } finally {
            for (String c : DockerCommand.containersLabelled("openshell.ai/sandbox-namespace=" + NAMESPACE)) {
                DockerCommand.run("rm", "-f", c);
            }
            for (String v : DockerCommand.volumesLabelled("openshell.ai/sandbox-namespace=" + NAMESPACE)) {
                DockerCommand.run("volume", "rm", "-f", v);
            }
            if (upstream != null) {
                upstream.stop(0);
            }
            if (images != null) {
                images.close();
            }
        }
    }

    static Result cli(String... args) throws IOException, InterruptedException {
        Path dir = Path.of(System.getProperty("openshell.cli.dir", "../../modules/openshell.cli/target")).toAbsolutePath().normalize();
        String jar;
        try (var files = Files.list(dir)) {
            jar = files.map(Path::toString).filter(f -> f.matches(".*/openshell-cli-[^/]*\\.jar") && !f.endsWith("-tests.jar"))
                    .findFirst().orElseThrow(() -> new AssertionError("no CLI jar in " + dir + " (build modules/openshell.cli)"));
        }
        List<String> command = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElseThrow(),
                "-p", dir.resolve("lib") + ":" + jar, "-m", "openshell.cli/openshell.cli.Main", "--state", state.toString()));
        command.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(command).redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile()));
        pb.environment().putAll(Map.of(
                "OPENSHELL_SUPERVISOR_LAUNCHER", DriverImages.jlink("supervisor").resolve("bin/openshell-supervisor").toString(),
                "OPENSHELL_RUNTIME_LAUNCHER", DriverImages.jlink("sandbox").resolve("bin/openshell-sandbox").toString()));
        Path out = Files.createTempFile(images.work, "cli", ".out");
        Path err = Files.createTempFile(images.work, "cli", ".err");
        Process p = pb.redirectOutput(out.toFile()).redirectError(err.toFile()).start();
        if (!p.waitFor(COMMAND_SECONDS, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            fail("openshell " + String.join(" ", args) + " did not finish within " + COMMAND_SECONDS + " s: "
                    + Files.readString(err) + "\ngateway log:\n" + Files.readString(state.resolve("gateway.log")));
        }
        return new Result(p.exitValue(), Files.readString(out).strip(), Files.readString(err).strip());
    }

    @Test
    void aDockerSandboxRunsExecsAndHasItsRequestsDecidedThenDeleteLeavesNothing() throws IOException, InterruptedException {
        long t0 = System.nanoTime();
        Result created = cli("sandbox", "create", "--name", "gw", "--image", images.workload, "--policy", policy.toString(),
                "--", "/bin/busybox", "sleep", "600");
        long createMillis = (System.nanoTime() - t0) / 1_000_000;
        assertEquals(0, created.exit(), created.err() + created.out());
        assertTrue(created.out().contains("RUNNING"), created.out());
        System.out.println("openshell sandbox create --image (docker) -> RUNNING with its session: " + createMillis
                + " ms (CLI wall time, its JVM start included)");
        Result get = cli("sandbox", "get", "gw");
        assertTrue(get.out().contains("driver:            docker"), get.out());
        assertTrue(get.out().contains("fence holds"), get.out());

        Result hello = cli("sandbox", "exec", "gw", "--", "/bin/busybox", "echo", "hello from a docker sandbox");
        assertEquals(0, hello.exit(), hello.err());
        assertEquals("hello from a docker sandbox", hello.out());

        int port = upstream.getAddress().getPort();
        Result allowed = cli("sandbox", "exec", "gw", "--", "/bin/busybox", "wget", "-q", "-O", "-",
                "http://" + HOST + ":" + port + "/allowed");
        assertEquals(0, allowed.exit(), allowed.err());
        assertEquals("upstream-says-hi", allowed.out());
        Result denied = cli("sandbox", "exec", "gw", "--", "/bin/busybox", "wget", "-q", "-O", "-",
                "http://" + HOST + ":" + (port + 1) + "/allowed");
        assertNotEquals(0, denied.exit(), denied.out());
        assertTrue(denied.err().contains("Permission denied"), denied.err());
        Result logs = cli("sandbox", "logs", "gw", "--denied");
        assertTrue(logs.out().contains("DENY connect /bin/busybox -> " + HOST + ":" + (port + 1)), logs.out());

        // Stop keeps the sandbox; start launches the next generation on the same channel volume.
        assertEquals(0, cli("sandbox", "stop", "gw").exit());
        Result restarted = cli("sandbox", "start", "gw");
        assertEquals(0, restarted.exit(), restarted.err() + restarted.out());
        assertTrue(restarted.out().contains("RUNNING") && restarted.out().contains("generation 2"), restarted.out());
        Result again = cli("sandbox", "exec", "gw", "--", "/bin/busybox", "echo", "second generation");
        assertEquals("second generation", again.out(), again.err());

        Result deleted = cli("sandbox", "delete", "gw");
        assertEquals(0, deleted.exit(), deleted.err());
        assertEquals(List.of(), DockerCommand.containersLabelled("openshell.ai/sandbox-namespace=" + NAMESPACE));
        assertEquals(List.of(), DockerCommand.volumesLabelled("openshell.ai/sandbox-namespace=" + NAMESPACE));
    }

    @Test
    void aFromScratchImageWithOneStaticBinaryRunsTheSameWay() throws IOException, InterruptedException {
        // No /etc, no /tmp, no libc, no /bin/sleep: the runtime brings its own, and the driver gives it a /tmp the image lacks.
        Result created = cli("sandbox", "create", "--name", "scratch", "--image", images.scratch, "--policy", policy.toString(),
                "--", "/bin/busybox", "sleep", "600");
        assertEquals(0, created.exit(), created.err() + created.out());
        Result hello = cli("sandbox", "exec", "scratch", "--", "/bin/busybox", "echo", "from scratch");
        assertEquals(0, hello.exit(), hello.err());
        assertEquals("from scratch", hello.out());
        assertEquals(0, cli("sandbox", "delete", "scratch").exit());
        assertEquals(List.of(), DockerCommand.containersLabelled("openshell.ai/sandbox-namespace=" + NAMESPACE));
    }

    @Test
    void theWorkloadReachesNeitherTheDockerSocketNorTheSupervisorsFilesNorAnySecret() throws IOException, InterruptedException {
        assertEquals(0, cli("sandbox", "create", "--name", "probe", "--image", images.workload, "--policy", policy.toString(),
                "--", "/bin/busybox", "sleep", "600").exit());
        try {
            for (String path : List.of("/var/run/docker.sock", "/run/docker.sock", "/.openshell/supervisor",
                    "/.openshell/channel/supervisor")) {
                Result r = cli("sandbox", "exec", "probe", "--", "/bin/busybox", "ls", "-d", path);
                assertNotEquals(0, r.exit(), path + " is visible to the workload: " + r.out());
            }
            // The runtime (PID 1) is not dumpable: its environment and memory are not the agent's to read.
            Result environ = cli("sandbox", "exec", "probe", "--", "/bin/busybox", "cat", "/proc/1/environ");
            assertNotEquals(0, environ.exit(), environ.out());
            Result env = cli("sandbox", "exec", "probe", "--", "/bin/busybox", "env");
            assertEquals(0, env.exit(), env.err());
            assertTrue(!env.out().contains("eyJ") && !env.out().contains("BEGIN"), "a secret in the agent's environment: " + env.out());
            // The channel directory holds sockets only: no bundle, key or token on the shared volume.
            Result files = cli("sandbox", "exec", "probe", "--", "/bin/busybox", "find", "/.openshell/channel", "-type", "f");
            assertEquals("", files.out(), "files on the channel volume: " + files.out());
        } finally {
            assertEquals(0, cli("sandbox", "delete", "probe").exit());
        }
    }

    @Test
    void aSandboxOutlivesItsGatewayAndTheNextGatewayAdoptsIt() throws IOException, InterruptedException {
        assertEquals(0, cli("sandbox", "create", "--name", "survivor", "--image", images.workload, "--policy", policy.toString(),
                "--", "/bin/busybox", "sleep", "600").exit());
        String workload = DockerCommand.containersLabelled("openshell.ai/sandbox-namespace=" + NAMESPACE).stream()
                .filter(c -> DockerCommand.inspect(c, "{{index .Config.Labels \"openshell.ai/isolation-role\"}}").equals("sandbox"))
                .findFirst().orElseThrow();
        assertEquals(0, cli("gateway", "stop").exit());
        assertTrue(DockerCommand.running(workload), "the workload ended with its gateway");
        // A replica's lease outlives its process by at most this long (the gateway says so when started sooner).
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        Result started;
        do {
            Thread.sleep(2000);
            started = cli("gateway", "start", "--background", "--driver", "docker",
                    "--driver-setting", "namespace=" + NAMESPACE, "--driver-setting", "docker.host=" + DriverImages.dockerHost(), "--driver-setting", "supervisor.image=" + images.supervisorBase,
                    "--host-alias", HOST + "=127.0.0.1");
        } while (started.exit() != 0 && started.err().contains("already running") && System.nanoTime() < deadline);
        assertEquals(0, started.exit(), started.err());
        Result hello = null;
        for (int i = 0; i < 30; i++) {
            hello = cli("sandbox", "exec", "survivor", "--", "/bin/busybox", "echo", "adopted");
            if (hello.exit() == 0) {
                break;
            }
            Thread.sleep(1000);
        }
        assertEquals("adopted", hello.out(), hello.err());
        assertTrue(DockerCommand.inspect(workload, "{{.Id}}").equals(workload), "the same container, not a new one");
        assertEquals(0, cli("sandbox", "delete", "survivor").exit());
        assertFalse(DockerCommand.exists(workload));
    }

    @Test
    void runWithTheDockerDriverPrintsAndLeavesNothing() throws IOException, InterruptedException {
        Result run = cli("run", "--driver", "docker", "--image", images.workload, "--policy", policy.toString(), "--",
                "/bin/busybox", "echo", "one shot in docker");
        assertEquals(0, run.exit(), run.err() + run.out());
        assertEquals("one shot in docker", run.out());
        assertEquals(List.of(), DockerCommand.containersLabelled("openshell.ai/sandbox-namespace=" + NAMESPACE));
        assertEquals(List.of(), DockerCommand.volumesLabelled("openshell.ai/sandbox-namespace=" + NAMESPACE));
    }
}
