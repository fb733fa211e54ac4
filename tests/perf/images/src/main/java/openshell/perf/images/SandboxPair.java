package openshell.perf.images;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeoutException;
import openshell.driver.ComputeDriver;
import openshell.driver.DriverEnvironment;
import openshell.driver.DriverRegistry;
import openshell.driver.LaunchMaterial;
import openshell.driver.LaunchPlan;
import openshell.driver.Provisioned;
import openshell.isolation.AgentSpec;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.WorkloadIdentity;
import openshell.protocol.LaunchBundles;
import openshell.protocol.TokenIssuer;

/**
 * One sandbox as the gateway has it launched: the process driver starts the supervisor image and
 * the runtime (through the given launcher) with freshly minted launch bundles, one agent. The
 * clock starts at {@code create}; the runtime's {@code "serving":true} line and the supervisor's
 * ready line (attach, confirm and the agent started over the link) are the two points measured.
 */
final class SandboxPair implements AutoCloseable {
    /** Longest wait for either line (two JVM starts on 2 loaded cores). */
    static final Duration WAIT = Duration.ofSeconds(120);
    /** How often the logs are looked at while waiting (the resolution of the two times). */
    static final Duration POLL = Duration.ofMillis(2);
    private static final int WORKLOAD_ID = 1000;
    private static final String SERVING = "\"serving\":true";
    private static final String READY = "{\"ready\":true,";

    private final ComputeDriver driver;
    private final SandboxId id;
    private final Path logs;
    private final long created;
    private final long createReturned;
    private Provisioned provisioned;

    private SandboxPair(ComputeDriver driver, SandboxId id, Path logs, long created, long createReturned, Provisioned provisioned) {
        this.driver = driver;
        this.id = id;
        this.logs = logs;
        this.created = created;
        this.createReturned = createReturned;
        this.provisioned = provisioned;
    }

    /**
     * Times of one start, in milliseconds from {@code create}.
     *
     * @param createMillis     until the driver's create returned (runtime spawned, bundles fed)
     * @param servingMillis    until the runtime's serving line
     * @param readyMillis      until the supervisor's ready line (link, attach, confirm, agent)
     * @param runtimeCpuMillis the runtime JVM's user + system CPU time at its serving line
     */
    record Times(double createMillis, double servingMillis, double readyMillis, double runtimeCpuMillis) {
    }

    /**
     * A launcher of the sandbox image outside it: the image's own launcher without, or with
     * another, AOT cache (the measurement's variants).
     *
     * @param directory where to write it (traversable by the sandbox's mapped ids)
     * @param image     the sandbox image
     * @param cache     the AOT cache to use, or empty for none
     * @param name      file name
     * @return the launcher
     * @throws IOException if it cannot be written
     */
    static Path launcher(Path directory, Path image, Optional<Path> cache, String name) throws IOException {
        Path launcher = directory.resolve(name);
        Files.writeString(launcher, "#!/bin/sh\ncd -P -- '" + image + "' || exit 127\n"
                + "unset JAVA_TOOL_OPTIONS JDK_JAVA_OPTIONS _JAVA_OPTIONS CLASSPATH\n"
                + "exec bin/java " + cache.map(c -> "-XX:AOTCache='" + c + "' ").orElse("")
                + "@conf/openshell-sandbox.args \"$@\"\n");
        Files.setPosixFilePermissions(launcher, PosixFilePermissions.fromString("rwxr-xr-x"));
        return launcher;
    }

    /**
     * Launches one sandbox.
     *
     * @param work               a private, short directory (the channel socket must fit sun_path)
     * @param supervisorLauncher the supervisor image's launcher
     * @param runtimeLauncher    the runtime's launcher
     * @param agent              the agent's argv
     * @return the running pair
     * @throws IOException if its directories cannot be made
     */
    static SandboxPair launch(Path work, Path supervisorLauncher, Path runtimeLauncher, List<String> agent) throws IOException {
        Path root = Files.createTempDirectory(work, "p");
        Files.setPosixFilePermissions(root, PosixFilePermissions.fromString("rwx--x--x"));
        Path state = Files.createDirectory(root.resolve("state"));
        Path run = Files.createDirectory(root.resolve("run"));
        Files.setPosixFilePermissions(run, PosixFilePermissions.fromString("rwx--x--x"));
        Path workspace = Files.createDirectory(root.resolve("ws"));
        Files.setPosixFilePermissions(workspace, PosixFilePermissions.fromString("rwxrwxrwx"));
        String policy = "version: 1\nnetwork_policies: {}\n";
        Map<String, String> env = Map.of("PATH", "/usr/bin:/bin", "HOME", workspace.toString());
        SandboxId id = new SandboxId("bench-" + Long.toHexString(System.nanoTime() & 0xffffff));
        SandboxSessionId session = SandboxSessionId.fresh();
        // Minted here, as the gateway does, before the clock starts.
        TokenIssuer issuer = TokenIssuer.generate("openshell-bench", "bench-key", Clock.systemUTC());
        LaunchBundles.Minted minted = LaunchBundles.mint(LaunchBundles.Request.builder().sandboxId(id.value())
                .sessionId(session.value()).generation(1).policyYaml(policy)
                .agent(new LaunchBundles.Agent(agent, env, workspace.toString()))
                .workload(WORKLOAD_ID, WORKLOAD_ID).build(), issuer, 1);
        ComputeDriver driver = DriverRegistry.load().driver("process", new DriverEnvironment(state, Map.of(
                "supervisor.launcher", supervisorLauncher.toString(),
                "runtime.launcher", runtimeLauncher.toString(),
                "run.root", run.toString())));
        SandboxContext context = new SandboxContext(id, session, PolicySnapshot.of(1, policy.getBytes(StandardCharsets.UTF_8)),
                new AgentSpec(agent, env, workspace.toString()), new WorkloadIdentity(WORKLOAD_ID, WORKLOAD_ID, List.of()));
        LaunchPlan plan = new LaunchPlan(context, 1, LaunchMaterial.of(minted.supervisorBundle(), minted.runtimeBundle()),
                Map.of("workspace", workspace.toString()));
        long created = System.nanoTime();
        Provisioned provisioned = driver.create(plan);
        return new SandboxPair(driver, id, state.resolve("process/sandboxes").resolve(id.value()), created, System.nanoTime(),
                provisioned);
    }

    /**
     * Waits for both lines.
     *
     * @param runtimeJava the runtime image's {@code bin/java} (to find the runtime's JVM)
     * @return the times
     * @throws Exception if a line does not come within {@link #WAIT}
     */
    Times awaitReady(Path runtimeJava) throws Exception {
        long serving = awaitLine("runtime.log", SERVING);
        double cpu = process(runtimeJava).map(p -> ImageBenchmark.cpuMillis(p.pid())).orElse(Double.NaN);
        long ready = awaitLine("supervisor.log", READY);
        return new Times(millis(createReturned), millis(serving), millis(ready), cpu);
    }

    private double millis(long nanos) {
        return (nanos - created) / 1e6;
    }

    private long awaitLine(String log, String marker) throws Exception {
        Path file = logs.resolve(log);
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            if (Files.exists(file) && Files.readString(file).contains(marker)) {
                return System.nanoTime();
            }
            Thread.sleep(POLL);
        }
        throw new TimeoutException("no " + marker + " in " + log + " within " + WAIT + dump());
    }

    /**
     * The one JVM of this sandbox running the given image's java (its id is among the arguments).
     *
     * @param java an image's {@code bin/java}
     * @return the process, if it runs
     */
    Optional<ProcessHandle> process(Path java) {
        return ProcessHandle.allProcesses()
                .filter(p -> p.info().command().map(Path::of).filter(java::equals).isPresent())
                .filter(p -> p.info().arguments().map(a -> List.of(a).contains(id.value())).orElse(false))
                .findFirst();
    }

    String dump() {
        return "\n--- supervisor.log\n" + text(logs.resolve("supervisor.log")) + "\n--- runtime.log\n" + text(logs.resolve("runtime.log"));
    }

    private static String text(Path file) {
        try {
            return Files.exists(file) ? Files.readString(file) : "";
        } catch (IOException e) {
            return "(unreadable: " + e.getMessage() + ")";
        }
    }

    @Override
    public void close() {
        if (provisioned != null) {
            driver.delete(id, provisioned.state());
            provisioned = null;
        }
    }
}
