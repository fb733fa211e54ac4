package openshell.driver.docker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import openshell.driver.DriverEnvironment;
import openshell.driver.DriverException;
import openshell.driver.LaunchMaterial;
import openshell.driver.LaunchPlan;
import openshell.driver.container.ContainerNames;
import openshell.driver.container.Labels;
import openshell.isolation.AgentSpec;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.WorkloadIdentity;
import openshell.isolation.WorkloadTrust;

/**
 * The driver against the real dockerd: what it refuses and that a refused or failed create
 * leaves nothing, and the orphan sweep. (A sandbox that runs needs bundles the gateway mints:
 * those tests are black-box, in {@code tests/docker}, package {@code openshell.tests.docker.driver}.)
 */
class DockerDriverTest {
    private static final String NAMESPACE = "driver-test-" + ProcessHandle.current().pid();
    private static TestImages images;
    private final List<String> extraContainers = new ArrayList<>();
    private final List<String> extraVolumes = new ArrayList<>();

    @TempDir
    static Path state;

    @BeforeAll
    static void images() throws IOException, InterruptedException {
        images = TestImages.build(Path.of(System.getProperty("openshell.docker.work.dir", "target/docker-work")));
    }

    @AfterAll
    static void removeImages() {
        if (images != null) {
            images.close();
        }
    }

    @AfterEach
    void nothingOfTheNamespaceIsLeft() {
        DockerCli.removeContainers(extraContainers);
        DockerCli.removeVolumes(extraVolumes);
        List<String> containers = DockerCli.containersLabelled(Labels.NAMESPACE + "=" + NAMESPACE);
        List<String> volumes = DockerCli.volumesLabelled(Labels.NAMESPACE + "=" + NAMESPACE);
        DockerCli.removeContainers(containers);
        DockerCli.removeVolumes(volumes);
        assertEquals(List.of(), containers, "containers left behind");
        assertEquals(List.of(), volumes, "volumes left behind");
    }

    private static Path jlink(String image) {
        return Path.of(System.getProperty("openshell.jlink.dir", "../../jlink"), "openshell-" + image, "target", "openshell-" + image)
                .toAbsolutePath().normalize();
    }

    private static Map<String, String> settings(String... extra) {
        Map<String, String> m = new HashMap<>(Map.of("namespace", NAMESPACE, "runtime.dir", jlink("sandbox").toString(),
                "supervisor.dir", jlink("supervisor").toString(), "supervisor.image", images.reference("glibc")));
        // The engine the docker command line uses (.ci/run exports its private dockerd's socket).
        String host = System.getenv("DOCKER_HOST");
        if (host != null && (host.startsWith("unix:///") || host.startsWith("tcp://"))) {
            m.put("docker.host", host);
        }
        for (int i = 0; i < extra.length; i += 2) {
            m.put(extra[i], extra[i + 1]);
        }
        return m;
    }

    private static DockerDriver driver(Map<String, String> settings) {
        return new DockerDriver(new DriverEnvironment(state, settings));
    }

    private static LaunchPlan plan(String id, String policy, Map<String, String> options) {
        SandboxContext context = new SandboxContext(new SandboxId(id), SandboxSessionId.fresh(),
                PolicySnapshot.of(1, policy.getBytes(StandardCharsets.UTF_8)),
                new AgentSpec(List.of("/bin/true"), Map.of(), "/"), WorkloadIdentity.of(1000, 1000), WorkloadTrust.none());
        // Not bundles a runtime accepts: the tests here end before one would serve.
        LaunchMaterial material = LaunchMaterial.of("supervisor".getBytes(StandardCharsets.UTF_8),
                "runtime".getBytes(StandardCharsets.UTF_8));
        return new LaunchPlan(context, 1, material, options);
    }

    private static final String POLICY = "version: 1\n";

    @Test
    void anUnreachableDockerdIsUnavailableNamingTheSocketAndHowToStartIt(@TempDir Path dir) throws IOException {
        Path missing = dir.resolve("missing.sock");
        Path dead = dir.resolve("dead.sock");
        // A socket file nobody listens on any more.
        try (ServerSocketChannel s = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            s.bind(UnixDomainSocketAddress.of(dead));
        }
        for (Path socket : List.of(missing, dead)) {
            try (DockerDriver d = driver(settings("docker.host", "unix://" + socket))) {
                DriverException e = assertThrows(DriverException.class,
                        () -> d.create(plan("unreachable", POLICY, Map.of("image", images.reference("glibc")))));
                assertEquals(DriverException.Kind.UNAVAILABLE, e.kind());
                assertTrue(e.getMessage().contains("unix://" + socket), e.getMessage());
                assertTrue(e.getMessage().contains("start it (dockerd"), e.getMessage());
            }
        }
    }

    @Test
    void anUnknownImageIsInvalidNamingItAndNothingIsMade() {
        try (DockerDriver d = driver(settings())) {
            DriverException e = assertThrows(DriverException.class,
                    () -> d.create(plan("unknown-image", POLICY, Map.of("image", "openshell-driver-test/no-such:never"))));
            assertEquals(DriverException.Kind.INVALID, e.kind());
            assertTrue(e.getMessage().contains("'openshell-driver-test/no-such:never'"), e.getMessage());
        }
    }

    @Test
    void aCreateWithoutAnImageOrWithAnUnknownOptionIsInvalid() {
        try (DockerDriver d = driver(settings())) {
            assertEquals(DriverException.Kind.INVALID, assertThrows(DriverException.class,
                    () -> d.create(plan("no-image", POLICY, Map.of()))).kind());
            assertEquals(DriverException.Kind.INVALID, assertThrows(DriverException.class,
                    () -> d.create(plan("bad-option", POLICY, Map.of("image", "x", "privileged", "true")))).kind());
        }
    }

    @Test
    void anImageWithUserRootAndNoPolicyUserIsRefusedAndNothingIsLeft() {
        try (DockerDriver d = driver(settings())) {
            DriverException e = assertThrows(DriverException.class,
                    () -> d.create(plan("root-user", POLICY, Map.of("image", images.reference("root-user")))));
            assertEquals(DriverException.Kind.INVALID, e.kind());
            assertTrue(e.getMessage().contains("never runs as root"), e.getMessage());
        }
    }

    @Test
    void anImageUserOtherThanTheSealedOneIsRefusedByName() {
        try (DockerDriver d = driver(settings())) {
            DriverException e = assertThrows(DriverException.class, () -> d.create(plan("other-user",
                    "version: 1\nprocess:\n  run_as_user: 4242\n", Map.of("image", images.reference("glibc")))));
            assertEquals(DriverException.Kind.INVALID, e.kind());
            assertTrue(e.getMessage().contains("4242:4242") && e.getMessage().contains("sealed for 1000:1000"), e.getMessage());
        }
    }

    @Test
    void aWorkspaceNamingAnotherSandboxsChannelVolumeIsRefused() {
        ContainerNames victim = new ContainerNames(NAMESPACE, new SandboxId("victim"));
        // The victim's real channel volume, labelled as the driver labels it, under its predictable name
        // and under a name outside the pattern: refused by name and by labels.
        String renamed = "innocent-looking-" + ProcessHandle.current().pid();
        // The driver first: its sweep at start would remove a victim volume that has no workload.
        try (DockerDriver d = driver(settings())) {
            for (String name : List.of(victim.channelVolume(), renamed)) {
                List<String> args = new ArrayList<>(List.of("volume", "create"));
                Labels.of(victim, Labels.Role.CHANNEL, "openshell-sandbox")
                        .forEach((k, v) -> args.addAll(List.of("--label", k + "=" + v)));
                args.add(name);
                DockerCli.run(args.toArray(String[]::new)).orFail("docker volume create");
                extraVolumes.add(name);
            }
            for (String name : List.of(victim.channelVolume(), renamed)) {
                DriverException e = assertThrows(DriverException.class, () -> d.create(plan("attacker", POLICY,
                        Map.of("image", images.reference("glibc"), "workspace", name))));
                assertEquals(DriverException.Kind.INVALID, e.kind(), name + ": " + e.getMessage());
                assertTrue(e.getMessage().contains(name), e.getMessage());
            }
        }
        // The victim's volume is untouched and the attacker got nothing.
        assertEquals(2, DockerCli.volumesLabelled(Labels.SANDBOX_ID + "=victim").size());
        assertEquals(List.of(), DockerCli.containersLabelled(Labels.SANDBOX_ID + "=attacker"));
        assertEquals(List.of(), DockerCli.volumesLabelled(Labels.SANDBOX_ID + "=attacker"));
    }

    @Test
    void aLaunchTheRuntimeRefusesLeavesNoContainerAndNoVolume() {
        try (DockerDriver d = driver(settings())) {
            // The bundles are not ones the runtime accepts: it exits at once, after the driver made and
            // started both containers on the channel volume.
            DriverException e = assertThrows(DriverException.class,
                    () -> d.create(plan("refused", POLICY, Map.of("image", images.reference("glibc")))));
            assertTrue(e.kind() == DriverException.Kind.INVALID || e.kind() == DriverException.Kind.FAILED, e.toString());
            assertTrue(e.getMessage().contains("runtime") || e.getMessage().contains("supervisor"), e.getMessage());
        }
        assertEquals(List.of(), DockerCli.containersLabelled(Labels.SANDBOX_ID + "=refused"));
        assertEquals(List.of(), DockerCli.volumesLabelled(Labels.SANDBOX_ID + "=refused"));
    }

    @Test
    void theSweepAtStartRemovesOnlyThisNamespacesObjectsWithoutAWorkload() {
        ContainerNames orphan = new ContainerNames(NAMESPACE, new SandboxId("orphan"));
        ContainerNames alive = new ContainerNames(NAMESPACE, new SandboxId("alive"));
        ContainerNames foreign = new ContainerNames(NAMESPACE + "-other", new SandboxId("orphan"));
        String glibc = images.reference("glibc");
        String orphanSupervisor = create(orphan.supervisor(), Labels.of(orphan, Labels.Role.SUPERVISOR, "openshell-sandbox"), glibc);
        String orphanStaging = create(orphan.staging(), Labels.of(orphan, Labels.Role.STAGING, "openshell-sandbox"), glibc);
        String aliveWorkload = create(alive.workload(), Labels.of(alive, Labels.Role.SANDBOX, "openshell-sandbox"), glibc);
        String aliveSupervisor = create(alive.supervisor(), Labels.of(alive, Labels.Role.SUPERVISOR, "openshell-sandbox"), glibc);
        String otherNamespace = create(foreign.supervisor(), Labels.of(foreign, Labels.Role.SUPERVISOR, "openshell-sandbox"), glibc);
        // Not ours at all: a look-alike name without the managed-by label.
        String unlabelled = create(orphan.workload() + "-lookalike", Map.of(Labels.SANDBOX_ID, "orphan",
                Labels.NAMESPACE, NAMESPACE, Labels.ROLE, "supervisor"), glibc);
        volume(orphan.channelVolume(), Labels.of(orphan, Labels.Role.CHANNEL, "openshell-sandbox"));
        volume(alive.channelVolume(), Labels.of(alive, Labels.Role.CHANNEL, "openshell-sandbox"));
        volume(foreign.channelVolume(), Labels.of(foreign, Labels.Role.CHANNEL, "openshell-sandbox"));
        try (DockerDriver d = driver(settings())) {
            // The constructor swept; a second sweep finds nothing more.
            assertEquals(0, d.sweep());
        }
        assertFalse(exists(orphanSupervisor), "the orphan's supervisor");
        assertFalse(exists(orphanStaging), "the orphan's staging container");
        assertFalse(volumeExists(orphan.channelVolume()), "the orphan's channel volume");
        assertTrue(exists(aliveWorkload) && exists(aliveSupervisor), "a sandbox with its workload is kept");
        assertTrue(volumeExists(alive.channelVolume()));
        assertTrue(exists(otherNamespace) && volumeExists(foreign.channelVolume()), "another namespace's objects are kept");
        assertTrue(exists(unlabelled), "a container without the managed-by label is never touched");
        extraContainers.addAll(List.of(otherNamespace, unlabelled));
        extraVolumes.add(foreign.channelVolume());
    }

    private String create(String name, Map<String, String> labels, String image) {
        List<String> args = new ArrayList<>(List.of("create", "--name", name, "--network", "none", "--entrypoint", "/nonexistent"));
        labels.forEach((k, v) -> args.addAll(List.of("--label", k + "=" + v)));
        args.add(image);
        String id = DockerCli.run(args.toArray(String[]::new)).orFail("docker create").out();
        extraContainers.add(id);
        return id;
    }

    private void volume(String name, Map<String, String> labels) {
        List<String> args = new ArrayList<>(List.of("volume", "create"));
        labels.forEach((k, v) -> args.addAll(List.of("--label", k + "=" + v)));
        args.add(name);
        DockerCli.run(args.toArray(String[]::new)).orFail("docker volume create");
        extraVolumes.add(name);
    }

    private static boolean exists(String id) {
        return DockerCli.run("inspect", "--type", "container", id).exit() == 0;
    }

    private static boolean volumeExists(String name) {
        return DockerCli.run("volume", "inspect", name).exit() == 0;
    }
}
