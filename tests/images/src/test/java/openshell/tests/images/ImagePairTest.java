package openshell.tests.images;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
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
import org.junit.jupiter.api.Test;

/**
 * Issue 8's smoke of the two images, as the process driver packages them: one sandbox whose
 * supervisor and runtime are the jlink images' own JVMs (checked by their executables), the
 * supervisor answering {@code /healthz}, {@code /readyz} and {@code /metrics}, and SIGTERM to the
 * supervisor ending the agent, the supervisor and then the runtime, without a stack trace.
 */
class ImagePairTest {
    /** Longest wait for the supervisor's ready line (two JVM starts and the runtime's probes on 2 loaded cores). */
    private static final Duration READY_WAIT = Duration.ofSeconds(120);
    /** Longest the supervisor may take to end after SIGTERM (it terminates the boundary first). */
    private static final Duration SUPERVISOR_EXIT = Duration.ofSeconds(30);
    /** Longest the runtime may outlive its supervisor: its supervisor-loss grace (30 s) or its linger, plus slack. */
    private static final Duration RUNTIME_EXIT = Duration.ofSeconds(75);
    private static final int WORKLOAD_ID = 1000;
    /** Most of a JVM's resident AOT-cache pages that may be its own copies: about 40 % mapped in place, 80 relocated. */
    private static final int MAX_PRIVATE_CACHE_PERCENT = 60;
    private static final Pattern RUNTIME_DIRECTORY = Pattern.compile("\"serving\":true,.*\"runtimeDirectory\":\"([^\"]+)\"");
    private static final Path TEMPORARY = Path.of("/tmp");
    private static final Pattern READY = Pattern.compile("\\{\"ready\":true,\"admin\":\"(http://127\\.0\\.0\\.1:\\d+)\"");

    @Test
    void theImagesRunASandboxAnswerTheirProbesAndEndOnSigterm() throws Exception {
        runPair(0, true);
    }

    /**
     * A sandbox deleted while it runs: the driver kills the runtime with its pid namespace, so the
     * runtime cannot clean up after itself. Its files (the resolver view, the trust bundles) were
     * in the sandbox's run directory, which the delete removes; nothing is left in the host's
     * temporary directory (each such sandbox used to leave ~400 KB there).
     */
    @Test
    void aSandboxDeletedWhileItRunsLeavesNoRuntimeFilesOnTheHost() throws Exception {
        runPair(0, false);
    }

    /**
     * The same from a warm spare: both images started with {@code --late-arguments}, waiting,
     * before the sandbox exists; the create gives that very pair its sandbox.
     */
    @Test
    void aWarmSpareOfTheImagesBecomesTheSandbox() throws Exception {
        runPair(1, true);
    }

    private void runPair(int spares, boolean sigterm) throws Exception {
        if (!"root".equals(System.getProperty("user.name"))) {
            fail("this test needs root: the process driver maps a private uid range for each sandbox");
        }
        Path sandboxImage = ImageFiles.image("openshell-sandbox");
        Path supervisorImage = ImageFiles.image("openshell-supervisor");
        Path work = Path.of(System.getProperty("openshell.images.work.dir"));
        Files.createDirectories(work);
        Path root = Files.createTempDirectory(work, "pair");
        Files.setPosixFilePermissions(root, PosixFilePermissions.fromString("rwx--x--x"));
        // Short, whatever the checkout path: the supervisor socket under it must fit sun_path.
        Path runRoot = Files.createTempDirectory(Path.of("/tmp"), "ospair");
        Files.setPosixFilePermissions(runRoot, PosixFilePermissions.fromString("rwx--x--x"));
        Path stateRoot = Files.createDirectory(root.resolve("state"));
        Path workspace = Files.createDirectory(root.resolve("workspace"));
        Files.setPosixFilePermissions(workspace, PosixFilePermissions.fromString("rwxrwxrwx"));

        String marker = Long.toString(600_000 + (System.nanoTime() & 0xffff));
        List<String> argv = List.of("/bin/sleep", marker);
        String policy = "version: 1\nnetwork_policies: {}\n";
        SandboxId id = new SandboxId("img-" + Long.toHexString(System.nanoTime() & 0xffffff));
        SandboxSessionId session = SandboxSessionId.fresh();
        Map<String, String> env = Map.of("PATH", "/usr/bin:/bin", "HOME", workspace.toString());
        TokenIssuer issuer = TokenIssuer.generate("openshell-gateway", "gateway-key-1", Clock.systemUTC());
        LaunchBundles.Minted minted = LaunchBundles.mint(LaunchBundles.Request.builder().sandboxId(id.value())
                .sessionId(session.value()).generation(1).policyYaml(policy)
                .agent(new LaunchBundles.Agent(argv, env, workspace.toString()))
                .workload(WORKLOAD_ID, WORKLOAD_ID).build(), issuer, 1);
        ComputeDriver driver = DriverRegistry.load().driver("process", new DriverEnvironment(stateRoot, Map.of(
                "supervisor.launcher", supervisorImage.resolve("bin/openshell-supervisor").toString(),
                "runtime.launcher", sandboxImage.resolve("bin/openshell-sandbox").toString(),
                "run.root", runRoot.toString(), "spares", Integer.toString(spares))));
        Optional<Path> spare = spares == 0 ? Optional.empty() : Optional.of(awaitWaitingSpare(stateRoot));
        SandboxContext context = new SandboxContext(id, session, PolicySnapshot.of(1, policy.getBytes(StandardCharsets.UTF_8)),
                new AgentSpec(argv, env, workspace.toString()), new WorkloadIdentity(WORKLOAD_ID, WORKLOAD_ID, List.of()));
        List<Path> temporaryBefore = runtimeTemporaries();
        Provisioned provisioned = driver.create(new LaunchPlan(context, 1,
                LaunchMaterial.of(minted.supervisorBundle(), minted.runtimeBundle()), Map.of("workspace", workspace.toString())));
        Path logs = stateRoot.resolve("process/sandboxes").resolve(id.value());
        java.util.Properties state = new java.util.Properties();
        state.load(new java.io.StringReader(new String(provisioned.state(), StandardCharsets.ISO_8859_1)));
        Path runtimeDirectory = null;
        try {
            spare.ifPresent(dir -> assertFalse(Files.exists(dir), "the spare's logs became the sandbox's"));
            String admin = awaitReady(logs);
            // Both programs are the images' own JVMs, not the build's class path: the supervisor the
            // driver recorded, and the one runtime JVM in the sandbox's namespaces.
            ProcessHandle supervisor = ProcessHandle.of(Long.parseLong(state.getProperty("supervisor.pid"))).orElseThrow();
            assertEquals(Optional.of(supervisorImage.resolve("bin/java").toString()), supervisor.info().command(), dump(logs));
            String pidNamespace = pidNamespace(Long.parseLong(state.getProperty("holder.pid")));
            List<ProcessHandle> runtimes = ProcessHandle.allProcesses().filter(p -> p.info().command().map(Path::of)
                    .filter(sandboxImage.resolve("bin/java")::equals).isPresent())
                    .filter(p -> pidNamespace.equals(pidNamespace(p.pid()))).toList();
            assertEquals(1, runtimes.size(), "one runtime JVM of the image in the sandbox: " + runtimes + dump(logs));
            ProcessHandle runtime = runtimes.getFirst();
            assertEquals(spares > 0, text(logs.resolve("runtime.log")).contains("{\"spare\":\"waiting\"}")
                    && text(logs.resolve("supervisor.log")).contains("{\"spare\":\"waiting\"}"), dump(logs));
            // The runtime's own helpers (its workload launcher) end with it.
            List<ProcessHandle> runtimeTree = java.util.stream.Stream.concat(java.util.stream.Stream.of(runtime),
                    runtime.descendants()).toList();
            assertTrue(agent(marker).isPresent(), "the agent runs" + dump(logs));
            // Each JVM maps its AOT cache where the cache was dumped (ArchiveRelocationMode=0), so the
            // cache's read-only part stays file pages that every sandbox's JVM of the image shares.
            // Relocated, a JVM rewrites nearly every page of it into a private copy (~25 MiB per JVM,
            // measured): about 80 % private instead of about 40 %.
            for (Map.Entry<ProcessHandle, String> jvm : Map.of(supervisor, "openshell-supervisor.aot",
                    runtime, "openshell-sandbox.aot").entrySet()) {
                ImageFiles.CachePages pages = ImageFiles.cachePages(jvm.getKey().pid(), jvm.getValue());
                assertTrue(pages.residentKib() > 0, jvm.getValue() + " is not mapped: " + pages);
                assertTrue(pages.privateKib() * 100 <= pages.residentKib() * MAX_PRIVATE_CACHE_PERCENT,
                        jvm.getValue() + " is mostly private copies, not shared pages: " + pages);
            }

            // The runtime's own files are in the run directory it dials its supervisor in (the
            // sandbox's, or the spare's it was), which the driver removes.
            Matcher serving = RUNTIME_DIRECTORY.matcher(text(logs.resolve("runtime.log")));
            assertTrue(serving.find(), "the serving line names the runtime directory" + dump(logs));
            runtimeDirectory = Path.of(serving.group(1));
            assertEquals(runRoot, runtimeDirectory.getParent().getParent(), dump(logs));
            assertTrue(Files.isRegularFile(runtimeDirectory.resolve("resolv.conf")), "the resolver view's file" + dump(logs));

            HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
            assertEquals(200, get(http, admin + "/healthz").statusCode());
            HttpResponse<String> ready = get(http, admin + "/readyz");
            assertEquals(200, ready.statusCode(), ready.body());
            HttpResponse<String> metrics = get(http, admin + "/metrics");
            assertEquals(200, metrics.statusCode());
            assertTrue(metrics.body().contains("openshell_"), metrics.body());

            if (sigterm) {
                terminate(supervisor, runtimeTree, marker, logs);
            }
        } finally {
            try {
                driver.delete(id, provisioned.state());
            } finally {
                driver.close();
            }
        }
        afterDelete(runRoot, id, marker, runtimeDirectory, temporaryBefore);
    }

    /** SIGTERM to the supervisor ends the agent, the supervisor and then the runtime, without a stack trace. */
    private static void terminate(ProcessHandle supervisor, List<ProcessHandle> runtimeTree, String marker, Path logs)
            throws IOException, InterruptedException {
        // What the two programs log from SIGTERM on (a link retried while starting may have logged before).
        long supervisorMark = Files.size(logs.resolve("supervisor.log"));
        long runtimeMark = Files.size(logs.resolve("runtime.log"));
        supervisor.destroy();
        assertTrue(await(supervisor, SUPERVISOR_EXIT), "the supervisor ended within " + SUPERVISOR_EXIT + " of SIGTERM" + dump(logs));
        assertTrue(agent(marker).isEmpty(), "SIGTERM to the supervisor terminated the boundary: the agent is gone" + dump(logs));
        for (ProcessHandle p : runtimeTree) {
            assertTrue(await(p, RUNTIME_EXIT), "the runtime's process " + p.pid() + " " + p.info().commandLine().orElse("")
                    + " ended within " + RUNTIME_EXIT + " of its supervisor" + dump(logs));
        }
        for (Map.Entry<String, Long> log : Map.of("supervisor.log", supervisorMark, "runtime.log", runtimeMark).entrySet()) {
            byte[] all = Files.readAllBytes(logs.resolve(log.getKey()));
            String text = new String(all, (int) (long) log.getValue(), all.length - (int) (long) log.getValue(), StandardCharsets.UTF_8);
            assertFalse(text.contains("Exception in thread") || text.lines().anyMatch(l -> l.startsWith("\tat ")),
                    log.getKey() + " shows a stack trace after SIGTERM: the image did not end cleanly" + dump(logs));
        }
    }

    private static void afterDelete(Path runRoot, SandboxId id, String marker, Path runtimeDirectory,
                                    List<Path> temporaryBefore) throws IOException {
        assertFalse(Files.exists(runtimeDirectory), "the runtime's directory is gone: " + runtimeDirectory);
        assertEquals(temporaryBefore, runtimeTemporaries(), "the runtime left nothing in " + TEMPORARY);
        assertFalse(Files.exists(runRoot.resolve(id.value())), "the run directory is gone");
        try (java.util.stream.Stream<Path> left = Files.list(runRoot)) {
            assertEquals(List.of(), left.toList(), "nothing of the sandbox or of a spare is left in the run root");
        }
        Files.delete(runRoot);
        assertTrue(agent(marker).isEmpty());
    }

    /** What runtimes made in the host's temporary directory (where their files were before). */
    private static List<Path> runtimeTemporaries() throws IOException {
        try (java.util.stream.Stream<Path> all = Files.list(TEMPORARY)) {
            return all.filter(p -> p.getFileName().toString().startsWith("openshell-sandbox")).sorted().toList();
        }
    }

    private static String awaitReady(Path logs) throws InterruptedException {
        long deadline = System.nanoTime() + READY_WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            Matcher m = READY.matcher(text(logs.resolve("supervisor.log")));
            if (m.find()) {
                return m.group(1);
            }
            Thread.sleep(100);
        }
        fail("the supervisor printed no ready line within " + READY_WAIT + dump(logs));
        return "";
    }

    private static String pidNamespace(long pid) {
        try {
            return Files.readSymbolicLink(Path.of("/proc", Long.toString(pid), "ns", "pid")).toString();
        } catch (IOException e) {
            return "gone";
        }
    }

    /** The log directory of the driver's one warm spare, once both its images print that they wait. */
    private static Path awaitWaitingSpare(Path stateRoot) throws Exception {
        Path spares = stateRoot.resolve("process/spares");
        long deadline = System.nanoTime() + READY_WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            if (Files.isDirectory(spares)) {
                try (java.util.stream.Stream<Path> dirs = Files.list(spares)) {
                    for (Path dir : dirs.toList()) {
                        if (text(dir.resolve("runtime.log")).contains("{\"spare\":\"waiting\"}")
                                && text(dir.resolve("supervisor.log")).contains("{\"spare\":\"waiting\"}")) {
                            return dir;
                        }
                    }
                }
            }
            Thread.sleep(100);
        }
        fail("no warm spare waited within " + READY_WAIT);
        return spares;
    }

    private static Optional<ProcessHandle> agent(String marker) {
        return ProcessHandle.allProcesses().filter(ProcessHandle::isAlive)
                .filter(p -> p.info().arguments().map(a -> List.of(a).contains(marker)).orElse(false)).findFirst();
    }

    private static boolean await(ProcessHandle process, Duration bound) throws InterruptedException {
        long deadline = System.nanoTime() + bound.toNanos();
        while (process.isAlive() && System.nanoTime() < deadline) {
            Thread.sleep(100);
        }
        return !process.isAlive();
    }

    private static HttpResponse<String> get(HttpClient http, String url) throws IOException, InterruptedException {
        return http.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(10)).build(),
                HttpResponse.BodyHandlers.ofString());
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
