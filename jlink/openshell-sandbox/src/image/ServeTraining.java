import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Clock;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
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
 * The sandbox image's AOT training run over its serve path (build time only, run by train.sh with
 * the build's JDK; never part of the image). One sandbox as the process driver launches it: the
 * supervisor image's own launcher, and the runtime through a training launcher that is the image's
 * launcher plus -XX:AOTCacheOutput. The runtime reads its bundle, probes, installs its resolver
 * view and DNS relay, dials the supervisor, serves attach, confirm and startAgent over TLS, runs
 * the agent (/bin/true) and exits when the boundary ends; its JVM then writes the cache.
 *
 * <p>The same run trains the supervisor image's cache: the supervisor starts through a training
 * launcher of its own (its image's launcher plus -XX:AOTCacheOutput) and, when it exits after the
 * agent, its JVM writes what a real boundary loaded (link, attach, confirm, the agent, the
 * gateway-less path); that cache replaces the one jlink/openshell-supervisor trained with a
 * usage-error run. It happens here because it needs both images, and this module is built after
 * the supervisor's.
 *
 * <p>Only the runtime's JVM records classes: minting (BouncyCastle key and certificate
 * generation, the gateway's side) runs here, in this JVM, and the protocol's client side in the
 * supervisor's JVM, so neither lands in the sandbox image's cache.
 *
 * <pre>ServeTraining IMAGE SUPERVISOR_IMAGE NAME [TRAINING-JVM-OPTION...]</pre>
 */
public final class ServeTraining {
    /** Longest the whole run may take: two JVM starts, the probes and the agent on 2 loaded cores. */
    static final Duration RUN_WAIT = Duration.ofSeconds(300);
    /** Workload ids inside the sandbox (the driver maps a private range). */
    static final int WORKLOAD_ID = 1000;
    static final String READY = "{\"ready\":true,";
    /** The supervisor image's name (its launcher, argument file and cache). */
    static final String SUPERVISOR = "openshell-supervisor";

    public static void main(String[] args) throws Exception {
        Path image = Path.of(args[0]).toRealPath();
        Path supervisorImage = Path.of(args[1]).toRealPath();
        String name = args[2];
        Path supervisorLauncher = supervisorImage.resolve("bin/openshell-supervisor");
        if (!Files.isExecutable(supervisorLauncher)) {
            throw new IllegalStateException("no supervisor image at " + supervisorImage + " (jlink/openshell-supervisor builds it first)");
        }
        // Short (the channel socket under it must fit sun_path) and traversable by the sandbox's mapped ids.
        Path work = Files.createTempDirectory(Path.of("/tmp"), "osaot");
        int status = 1;
        try {
            Files.setPosixFilePermissions(work, PosixFilePermissions.fromString("rwx--x--x"));
            Path state = Files.createDirectory(work.resolve("state"));
            Path run = Files.createDirectory(work.resolve("run"));
            Files.setPosixFilePermissions(run, PosixFilePermissions.fromString("rwx--x--x"));
            Path workspace = Files.createDirectory(work.resolve("ws"));
            Files.setPosixFilePermissions(workspace, PosixFilePermissions.fromString("rwxrwxrwx"));
            // The runtime runs as the sandbox's mapped root, not as the image's owner: it writes here.
            Path out = Files.createDirectory(work.resolve("out"));
            Files.setPosixFilePermissions(out, PosixFilePermissions.fromString("rwxrwxrwx"));
            Path cache = out.resolve(name + ".aot");
            // Options for the training run only (after the image's name): e.g. what the cache records.
            String extra = String.join(" ", List.of(args).subList(3, args.length));
            Path launcher = trainingLauncher(work, image, name, cache, extra);
            Path supervisorCache = out.resolve(SUPERVISOR + ".aot");
            Path supervisorTraining = trainingLauncher(work, supervisorImage, SUPERVISOR, supervisorCache, "");

            List<String> argv = List.of("/bin/true");
            String policy = "version: 1\nnetwork_policies: {}\n";
            Map<String, String> env = Map.of("PATH", "/usr/bin:/bin", "HOME", workspace.toString());
            SandboxId id = new SandboxId("aot-" + Long.toHexString(System.nanoTime() & 0xffffff));
            SandboxSessionId session = SandboxSessionId.fresh();
            TokenIssuer issuer = TokenIssuer.generate("openshell-aot-training", "training-key", Clock.systemUTC());
            LaunchBundles.Minted minted = LaunchBundles.mint(LaunchBundles.Request.builder().sandboxId(id.value())
                    .sessionId(session.value()).generation(1).policyYaml(policy)
                    .agent(new LaunchBundles.Agent(argv, env, workspace.toString()))
                    .workload(WORKLOAD_ID, WORKLOAD_ID).build(), issuer, 1);
            ComputeDriver driver = DriverRegistry.load().driver("process", new DriverEnvironment(state, Map.of(
                    "supervisor.launcher", supervisorTraining.toString(),
                    "runtime.launcher", launcher.toString(),
                    "run.root", run.toString())));
            SandboxContext context = new SandboxContext(id, session, PolicySnapshot.of(1, policy.getBytes(StandardCharsets.UTF_8)),
                    new AgentSpec(argv, env, workspace.toString()), new WorkloadIdentity(WORKLOAD_ID, WORKLOAD_ID, List.of()));
            Path logs = state.resolve("process/sandboxes").resolve(id.value());
            long deadline = System.nanoTime() + RUN_WAIT.toNanos();
            Provisioned provisioned = driver.create(new LaunchPlan(context, 1,
                    LaunchMaterial.of(minted.supervisorBundle(), minted.runtimeBundle()), Map.of("workspace", workspace.toString())));
            try {
                while (!text(logs.resolve("supervisor.log")).contains(READY)) {
                    check(deadline, "the supervisor printed no ready line", logs);
                    Thread.sleep(100);
                }
                // The agent has run; the runtime exits once the boundary ended and the supervisor left,
                // and its JVM writes the cache on the way out.
                while (runtimeAlive(image, id)) {
                    check(deadline, "the runtime did not exit after its agent", logs);
                    Thread.sleep(100);
                }
                if (!Files.isRegularFile(cache) || Files.size(cache) == 0) {
                    throw new IllegalStateException("the runtime wrote no AOT cache" + dump(logs));
                }
                String runtimeLog = text(logs.resolve("runtime.log"));
                if (!runtimeLog.contains("\"serving\":true")) {
                    throw new IllegalStateException("the runtime never served" + dump(logs));
                }
                System.out.print(runtimeLog);
                while (alive(supervisorImage)) {
                    check(deadline, "the supervisor did not exit after its agent", logs);
                    Thread.sleep(100);
                }
                if (!Files.isRegularFile(supervisorCache) || Files.size(supervisorCache) == 0) {
                    throw new IllegalStateException("the supervisor wrote no AOT cache" + dump(logs));
                }
                Files.copy(cache, image.resolve("lib/" + name + ".aot"), StandardCopyOption.REPLACE_EXISTING);
                Files.copy(supervisorCache, supervisorImage.resolve("lib/" + SUPERVISOR + ".aot"), StandardCopyOption.REPLACE_EXISTING);
                status = 0;
            } finally {
                driver.delete(id, provisioned.state());
            }
        } finally {
            try (Stream<Path> all = Files.walk(work)) {
                all.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
        System.exit(status);
    }

    /** A copy of an image's launcher that also writes an AOT cache when its JVM exits. */
    private static Path trainingLauncher(Path work, Path image, String name, Path cache, String extra) throws IOException {
        Path launcher = work.resolve("train-" + name);
        Files.writeString(launcher, "#!/bin/sh\ncd -P -- '" + image + "' || exit 127\n"
                + "unset JAVA_TOOL_OPTIONS JDK_JAVA_OPTIONS _JAVA_OPTIONS CLASSPATH\n"
                + "exec bin/java -XX:AOTCacheOutput='" + cache + "' " + extra + " @conf/" + name + ".args \"$@\"\n");
        Files.setPosixFilePermissions(launcher, PosixFilePermissions.fromString("rwxr-xr-x"));
        return launcher;
    }

    /** Any JVM of this image (the supervisor's, or its cache assembly): only this run starts it. */
    private static boolean alive(Path image) {
        Path java = image.resolve("bin/java");
        return ProcessHandle.allProcesses().anyMatch(p -> p.info().command().map(Path::of).filter(java::equals).isPresent());
    }

    /** The runtime's JVM (the image's java with the sandbox id among its arguments), or its cache assembly. */
    private static boolean runtimeAlive(Path image, SandboxId id) {
        Path java = image.resolve("bin/java");
        return ProcessHandle.allProcesses().anyMatch(p -> p.info().command().map(Path::of).filter(java::equals).isPresent()
                && p.info().arguments().map(a -> List.of(a).contains(id.value()) || String.join(" ", a).contains("AOTMode=create"))
                .orElse(false));
    }

    private static void check(long deadline, String what, Path logs) {
        if (System.nanoTime() > deadline) {
            throw new IllegalStateException(what + " within " + RUN_WAIT + dump(logs));
        }
    }

    private static String dump(Path logs) {
        return "\n--- supervisor.log\n" + text(logs.resolve("supervisor.log")) + "\n--- runtime.log\n" + text(logs.resolve("runtime.log"));
    }

    private static String text(Path file) {
        try {
            return Files.exists(file) ? Files.readString(file) : "";
        } catch (IOException e) {
            return "(unreadable: " + e.getMessage() + ")";
        }
    }
}
