package openshell.tests.docker.driver;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import openshell.driver.ComputeDriver;
import openshell.driver.DialDirection;
import openshell.driver.DriverEnvironment;
import openshell.driver.DriverRegistry;
import openshell.driver.DriverStatus;
import openshell.driver.LaunchMaterial;
import openshell.driver.LaunchPlan;
import openshell.driver.Provisioned;
import openshell.isolation.AgentSpec;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.WorkloadIdentity;
import openshell.isolation.WorkloadTrust;
import openshell.protocol.LaunchBundles;
import openshell.protocol.TokenIssuer;

/**
 * The Docker driver as the gateway uses it (found by name through the SPI), on the real dockerd,
 * with bundles minted as the gateway mints them, the jlink-built runtime and supervisor, and the
 * workload image {@code images/rootfs/test-images.sh} makes: what a create provisions (checked
 * with {@code docker inspect}, not through the driver), that a supervisor's death stops the
 * workload, that a workload removed behind the driver's back leaves nothing running, that the
 * engine refuses to give a workload a network, start with the next generation, and delete as
 * the trusted cleanup with the supervisor dead, or with a state naming a container the driver
 * did not make.
 */
class DockerDriverTest {
    /** The workload's uid: one the supervisor's base image does not name (its peer check compares names). */
    static final int UID = 10001;
    /** Longest a supervisor's death may take to stop its workload: the driver's watch interval and stop grace, with room. */
    static final long SUPERVISOR_LOSS_BOUND_MILLIS = 10_000;
    private static final String NAMESPACE = "bb-" + ProcessHandle.current().pid();
    private static final String TAG = Long.toHexString(System.nanoTime());
    private static DriverImages images;
    private static String WORKLOAD_IMAGE;
    private static final String POLICY = """
            version: 1
            process:
              run_as_user: "%d"
              run_as_group: "%d"
            network_policies: {}
            """.formatted(UID, UID);
    private static Path work;
    private static ComputeDriver driver;
    private static final TokenIssuer ISSUER = TokenIssuer.generate("openshell-gateway", "gateway-key-1", java.time.Clock.systemUTC());

    @BeforeAll
    static void setUp() throws IOException, InterruptedException {
        images = DriverImages.build("spi");
        work = images.work;
        WORKLOAD_IMAGE = images.workload;
        driver = newDriver();
    }

    static ComputeDriver newDriver() {
        Map<String, String> settings = new HashMap<>(Map.of("namespace", NAMESPACE,
                "runtime.dir", DriverImages.jlink("sandbox").toString(),
                "supervisor.dir", DriverImages.jlink("supervisor").toString(),
                "supervisor.image", images.supervisorBase, "limits.pids", "256", "docker.host", DriverImages.dockerHost()));
        return DriverRegistry.load().driver("docker", new DriverEnvironment(work.resolve("state"), settings));
    }

    @AfterAll
    static void tearDown() {
        if (driver != null) {
            driver.close();
        }
        removeNamespace();
        if (images != null) {
            images.close();
        }
    }

    @AfterEach
    void nothingIsLeft() {
        List<String> containers = DockerCommand.containersLabelled("openshell.ai/sandbox-namespace=" + NAMESPACE);
        List<String> volumes = DockerCommand.volumesLabelled("openshell.ai/sandbox-namespace=" + NAMESPACE);
        removeNamespace();
        assertEquals(List.of(), containers, "containers left behind");
        assertEquals(List.of(), volumes, "volumes left behind");
    }

    private static void removeNamespace() {
        for (String c : DockerCommand.containersLabelled("openshell.ai/sandbox-namespace=" + NAMESPACE)) {
            DockerCommand.run("rm", "-f", c);
        }
        for (String v : DockerCommand.volumesLabelled("openshell.ai/sandbox-namespace=" + NAMESPACE)) {
            DockerCommand.run("volume", "rm", "-f", v);
        }
    }

    private static LaunchPlan plan(String id, long generation) {
        LaunchBundles.Minted minted = LaunchBundles.mint(LaunchBundles.Request.builder().sandboxId(id)
                .sessionId(SandboxSessionId.fresh().value()).generation(generation).policyYaml(POLICY)
                .agent(new LaunchBundles.Agent(List.of("/bin/busybox", "sleep", "30"), Map.of("PATH", "/bin"), "/sandbox"))
                .workload(UID, UID).build(), ISSUER, 1);
        SandboxContext context = new SandboxContext(new SandboxId(id), SandboxSessionId.fresh(),
                PolicySnapshot.of(1, POLICY.getBytes(StandardCharsets.UTF_8)),
                new AgentSpec(List.of("/bin/busybox", "sleep", "30"), Map.of(), "/sandbox"), WorkloadIdentity.of(UID, UID),
                WorkloadTrust.none());
        return new LaunchPlan(context, generation, LaunchMaterial.of(minted.supervisorBundle(), minted.runtimeBundle()),
                Map.of("image", WORKLOAD_IMAGE));
    }

    private static String workloadName(String id) {
        return "openshell-" + NAMESPACE + "--" + id;
    }

    @Test
    void aCreateProvisionsTheTwoContainersAndTheChannelVolumeAsDesignedAndDeleteRemovesThem() {
        String id = "shape";
        LaunchPlan launch = plan(id, 1);
        long t0 = System.nanoTime();
        Provisioned p = driver.create(launch);
        long createMillis = (System.nanoTime() - t0) / 1_000_000;
        // The anchor, measured in the same run: a plain container of the same image with no network.
        long a0 = System.nanoTime();
        DockerCommand.run("run", "--rm", "--network", "none", "--entrypoint", "/bin/busybox", WORKLOAD_IMAGE, "true")
                .orFail("docker run");
        System.out.println("driver create (both containers, runtime serving): " + createMillis
                + " ms; docker run --rm --network none IMAGE true: " + (System.nanoTime() - a0) / 1_000_000 + " ms");
        assertEquals(DialDirection.RUNTIME_INITIATED, p.direction());
        assertEquals("openshell-sandbox", p.descriptor().backend().name());
        String workload = workloadName(id);
        String supervisor = workload + "-supervisor";
        // The workload: no network, no capabilities, no privilege gain, default seccomp, non-root, pinned image.
        assertEquals("none", DockerCommand.inspect(workload, "{{.HostConfig.NetworkMode}}"));
        assertEquals("[none]", DockerCommand.inspect(workload, "{{range $k, $v := .NetworkSettings.Networks}}[{{$k}}]{{end}}"));
        assertEquals("[\"ALL\"]", DockerCommand.inspect(workload, "{{json .HostConfig.CapDrop}}"));
        assertEquals("null", DockerCommand.inspect(workload, "{{json .HostConfig.CapAdd}}"));
        assertEquals("false", DockerCommand.inspect(workload, "{{.HostConfig.Privileged}}"));
        assertEquals("[\"no-new-privileges\"]", DockerCommand.inspect(workload, "{{json .HostConfig.SecurityOpt}}"));
        assertEquals(UID + ":" + UID, DockerCommand.inspect(workload, "{{.Config.User}}"));
        assertEquals("[\"127.0.0.53\"]", DockerCommand.inspect(workload, "{{json .HostConfig.Dns}}"));
        assertEquals("256", DockerCommand.inspect(workload, "{{.HostConfig.PidsLimit}}"));
        String imageId = DockerCommand.run("image", "inspect", "--format", "{{.Id}}", WORKLOAD_IMAGE).orFail("image inspect").out();
        assertEquals(imageId, DockerCommand.inspect(workload, "{{.Config.Image}}"), "the image is pinned by id");
        assertEquals("[\"/.openshell/runtime/bin/openshell-sandbox-static\"]", DockerCommand.inspect(workload, "{{json .Config.Entrypoint}}"));
        String mounts = DockerCommand.inspect(workload, "{{range .Mounts}}{{.Destination}}={{.RW}};{{end}}");
        assertTrue(mounts.contains("/.openshell/runtime=false;"), "the runtime is mounted read-only: " + mounts);
        assertTrue(mounts.contains("/.openshell/channel=true;"), mounts);
        // The supervisor: nobody, read-only root file system, no capabilities, the only one with a network.
        assertEquals("host", DockerCommand.inspect(supervisor, "{{.HostConfig.NetworkMode}}"));
        assertEquals("true", DockerCommand.inspect(supervisor, "{{.HostConfig.ReadonlyRootfs}}"));
        assertEquals("65534:65534", DockerCommand.inspect(supervisor, "{{.Config.User}}"));
        assertEquals("[\"ALL\"]", DockerCommand.inspect(supervisor, "{{json .HostConfig.CapDrop}}"));
        assertEquals("[\"no-new-privileges\"]", DockerCommand.inspect(supervisor, "{{json .HostConfig.SecurityOpt}}"));
        assertTrue(DockerCommand.inspect(supervisor, "{{range .Mounts}}{{.Destination}}={{.RW}};{{end}}")
                .contains("/.openshell/supervisor=false;"));
        // Labels on both, and no secret on any command line or in any environment.
        for (String c : List.of(workload, supervisor)) {
            assertEquals("openshell", DockerCommand.inspect(c, "{{index .Config.Labels \"openshell.ai/managed-by\"}}"));
            assertEquals(id, DockerCommand.inspect(c, "{{index .Config.Labels \"openshell.ai/sandbox-id\"}}"));
            assertEquals("1", DockerCommand.inspect(c, "{{index .Config.Labels \"openshell.ai/runtime-generation\"}}"));
            String visible = DockerCommand.inspect(c, "{{json .Config.Cmd}} {{json .Config.Env}} {{json .Config.Labels}}");
            assertFalse(visible.contains("eyJ"), "a token is visible on " + c + ": " + visible);
        }
        assertEquals("sandbox", DockerCommand.inspect(workload, "{{index .Config.Labels \"openshell.ai/isolation-role\"}}"));
        assertEquals("supervisor", DockerCommand.inspect(supervisor, "{{index .Config.Labels \"openshell.ai/isolation-role\"}}"));
        // The channel volume: labelled with the sandbox and its owner, mounted by exactly these two.
        List<String> volumes = DockerCommand.volumesLabelled("openshell.ai/sandbox-id=" + id);
        assertEquals(1, volumes.size(), volumes.toString());
        String volume = volumes.getFirst();
        assertEquals(NAMESPACE, DockerCommand.run("volume", "inspect", "--format", "{{index .Labels \"openshell.ai/owner\"}}", volume)
                .orFail("volume inspect").out());
        List<String> users = DockerCommand.containersLabelled("openshell.ai/sandbox-id=" + id);
        String mounting = DockerCommand.run("ps", "-aq", "--no-trunc", "--filter", "volume=" + volume).orFail("ps").out();
        assertEquals(users.stream().sorted().toList(), List.of(mounting.split("\\s+")).stream().sorted().toList());
        assertEquals(2, users.size(), "exactly the two containers, nothing else");

        driver.delete(new SandboxId(id), p.state());
        assertEquals(List.of(), DockerCommand.containersLabelled("openshell.ai/sandbox-id=" + id));
        assertEquals(List.of(), DockerCommand.volumesLabelled("openshell.ai/sandbox-id=" + id));
        assertEquals(DriverStatus.Phase.GONE, driver.status(new SandboxId(id), p.state()).phase());
        driver.delete(new SandboxId(id), p.state());
    }

    @Test
    void aSupervisorKilledStopsItsWorkloadWithinTheBoundAndDeleteWithTheSupervisorDeadLeavesNothing() throws InterruptedException {
        String id = "sup-killed";
        Provisioned p = driver.create(plan(id, 1));
        String workload = workloadName(id);
        DockerCommand.run("kill", workload + "-supervisor").orFail("docker kill");
        long killed = System.nanoTime();
        while (DockerCommand.running(workload)) {
            if ((System.nanoTime() - killed) / 1_000_000 > SUPERVISOR_LOSS_BOUND_MILLIS) {
                fail("the workload still runs " + SUPERVISOR_LOSS_BOUND_MILLIS + " ms after its supervisor was killed");
            }
            Thread.sleep(50);
        }
        System.out.println("supervisor killed -> workload stopped: " + (System.nanoTime() - killed) / 1_000_000 + " ms");
        DriverStatus s = driver.status(new SandboxId(id), p.state());
        assertNotEquals(DriverStatus.Phase.RUNNING, s.phase(), s.toString());
        assertFalse(s.part(DriverStatus.SUPERVISOR).orElseThrow().alive(), s.toString());
        assertFalse(s.part(DriverStatus.WORKLOAD).orElseThrow().alive(), s.toString());
        driver.delete(new SandboxId(id), p.state());
    }

    @Test
    void aWorkloadRemovedBehindTheDriversBackLeavesNothingRunning() throws InterruptedException {
        String id = "removed";
        Provisioned p = driver.create(plan(id, 1));
        String workload = workloadName(id);
        DockerCommand.run("rm", "-f", workload).orFail("docker rm");
        DriverStatus s = driver.status(new SandboxId(id), p.state());
        assertNotEquals(DriverStatus.Phase.RUNNING, s.phase(), s.toString());
        assertFalse(s.part(DriverStatus.WORKLOAD).orElseThrow().alive(), s.toString());
        long deadline = System.nanoTime() + SUPERVISOR_LOSS_BOUND_MILLIS * 1_000_000;
        while (DockerCommand.running(workload + "-supervisor")) {
            assertTrue(System.nanoTime() < deadline, "the supervisor outlived its removed workload");
            Thread.sleep(50);
        }
        driver.delete(new SandboxId(id), p.state());
    }

    @Test
    void theEngineRefusesToGiveTheWorkloadANetworkBehindTheDriversBack() {
        String id = "reconnect";
        Provisioned p = driver.create(plan(id, 1));
        String workload = workloadName(id);
        String network = "openshell-bb-" + TAG;
        DockerCommand.run("network", "create", "--internal", network).orFail("network create");
        try {
            for (String n : List.of("host", network)) {
                DockerCommand.Result r = DockerCommand.run("network", "connect", n, workload);
                assertNotEquals(0, r.exit(), "dockerd connected the workload to " + n);
            }
            assertEquals("none", DockerCommand.inspect(workload, "{{.HostConfig.NetworkMode}}"));
            assertEquals("[none]", DockerCommand.inspect(workload, "{{range $k, $v := .NetworkSettings.Networks}}[{{$k}}]{{end}}"));
        } finally {
            DockerCommand.run("network", "rm", network);
            driver.delete(new SandboxId(id), p.state());
        }
    }

    @Test
    void aWorkloadWhoseFenceIsBrokenIsStoppedWithTheReasonAndNothingIsLeftRunning() {
        // dockerd refuses to give a none-mode container a network, so the broken fence is a replaced
        // container: one labelled exactly as the driver labels the workload, but on the host's network.
        String id = "fence";
        SandboxId sandbox = new SandboxId(id);
        Provisioned p = driver.create(plan(id, 1));
        String workloadId = DockerCommand.inspect(workloadName(id), "{{.Id}}");
        List<String> args = new java.util.ArrayList<>(List.of("run", "-d", "--network", "host", "--cap-drop", "ALL",
                "--security-opt", "no-new-privileges", "--user", UID + ":" + UID, "--entrypoint", "/bin/busybox"));
        for (String label : List.of("managed-by", "sandbox-id", "sandbox-namespace", "owner", "isolation-backend",
                "isolation-role", "runtime-generation")) {
            String key = "openshell.ai/" + label;
            args.addAll(List.of("--label", key + "=" + DockerCommand.inspect(workloadId, "{{index .Config.Labels \"" + key + "\"}}")));
        }
        args.addAll(List.of(WORKLOAD_IMAGE, "sleep", "600"));
        String replaced = DockerCommand.run(args.toArray(String[]::new)).orFail("docker run").out();
        DockerCommand.run("rm", "-f", workloadId).orFail("docker rm");
        byte[] state = new String(p.state(), StandardCharsets.ISO_8859_1).replace(workloadId, replaced)
                .getBytes(StandardCharsets.ISO_8859_1);
        DriverStatus s = driver.status(sandbox, state);
        assertEquals(DriverStatus.Phase.STOPPED, s.phase(), s.toString());
        assertTrue(s.detail().contains("outer fence violated") && s.detail().contains("network mode is 'host', not none"),
                s.detail());
        assertFalse(s.part(DriverStatus.WORKLOAD).orElseThrow().alive());
        assertFalse(DockerCommand.running(replaced), "the container with the broken fence still runs");
        assertFalse(DockerCommand.running(workloadName(id) + "-supervisor"), "its supervisor still runs");
        driver.delete(sandbox, state);
        assertFalse(DockerCommand.exists(replaced));
    }

    @Test
    void startLaunchesTheNextGenerationOnTheSameChannelVolume() {
        String id = "restart";
        SandboxId sandbox = new SandboxId(id);
        Provisioned first = driver.create(plan(id, 1));
        String workload = workloadName(id);
        String firstId = DockerCommand.inspect(workload, "{{.Id}}");
        String volume = DockerCommand.volumesLabelled("openshell.ai/sandbox-id=" + id).getFirst();
        driver.stop(sandbox, first.state());
        assertFalse(DockerCommand.running(workload));
        Provisioned second = driver.start(sandbox, first.state(), plan(id, 2));
        assertEquals(first.direction(), second.direction(), "a restarted sandbox keeps its recorded direction");
        assertNotEquals(firstId, DockerCommand.inspect(workload, "{{.Id}}"));
        assertFalse(DockerCommand.exists(firstId), "the first generation's workload is gone");
        assertEquals("2", DockerCommand.inspect(workload, "{{index .Config.Labels \"openshell.ai/runtime-generation\"}}"));
        assertEquals(List.of(volume), DockerCommand.volumesLabelled("openshell.ai/sandbox-id=" + id));
        driver.delete(sandbox, second.state());
    }

    @Test
    void aRestartedGatewayAdoptsBySateAndLabelsAndNeverTouchesAContainerItDidNotMake() {
        String id = "adopt";
        SandboxId sandbox = new SandboxId(id);
        Provisioned p = driver.create(plan(id, 1));
        String workloadId = DockerCommand.inspect(workloadName(id), "{{.Id}}");
        String imposter = DockerCommand.run("create", "--network", "none", "--entrypoint", "/nonexistent", WORKLOAD_IMAGE)
                .orFail("docker create").out();
        try (ComputeDriver restarted = newDriver()) {
            // The state as persisted, and a forged one naming a container the driver never made.
            assertNotEquals(DriverStatus.Phase.GONE, restarted.status(sandbox, p.state()).phase());
            byte[] forged = new String(p.state(), StandardCharsets.ISO_8859_1).replace(workloadId, imposter)
                    .getBytes(StandardCharsets.ISO_8859_1);
            restarted.delete(sandbox, forged);
            assertTrue(DockerCommand.exists(imposter), "delete removed a container the driver did not make");
            restarted.delete(sandbox, p.state());
            assertFalse(DockerCommand.exists(workloadId));
        } finally {
            DockerCommand.run("rm", "-f", imposter);
        }
    }
}
