package openshell.tests.docker.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import openshell.isolation.SandboxSessionId;
import openshell.protocol.LaunchBundles;
import openshell.protocol.TokenIssuer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The jlink-built sandbox runtime as PID 1 of a workload container on a real dockerd, started as
 * the Docker driver starts it ({@link WorkloadContainer}): its health check in a glibc image, a
 * musl image without glibc and an image of one static binary; an image whose ENV, loader
 * configuration and own files at the runtime's mount point would take over a runtime that
 * trusted them; and the runtime dialling the real supervisor (a host process, as the process
 * driver starts it) through a Unix socket in the channel directory and serving it, up to the
 * agent, which it still refuses (no mount for the trust store, no cgroup v2 leaf in a container).
 */
class RuntimeInContainerTest {
    /** Longest a health check may take, container start included. */
    private static final Duration CHECK_WAIT = Duration.ofSeconds(60);
    /** Longest from {@code docker run} to the runtime's serving line and the supervisor's attach. */
    private static final Duration SERVE_WAIT = Duration.ofSeconds(90);

    private static Docker docker;
    private static TestImages images;
    private static Path work;

    @BeforeAll
    static void images() throws Exception {
        docker = Docker.connect();
        work = Files.createDirectories(Path.of(System.getProperty("openshell.docker.work.dir", "target/docker-work")))
                .toAbsolutePath();
        Path launcher = WorkloadContainer.runtimeImage().resolve("bin/openshell-sandbox-static");
        if (!Files.isExecutable(launcher)) {
            fail("no " + launcher + ": build the sandbox image first (./mvnw -pl jlink/openshell-sandbox -am verify)");
        }
        images = TestImages.build(docker, work);
    }

    @AfterAll
    static void removeImages() {
        if (images != null) {
            images.close();
        }
    }

    private static Docker.Result check(String image) {
        String name = WorkloadContainer.uniqueName("check");
        try {
            List<String> args = WorkloadContainer.runArguments(name, Optional.empty(), Optional.empty());
            args.add(images.reference(image));
            args.add("--check");
            return docker.run(args, CHECK_WAIT);
        } finally {
            docker.removeContainer(name);
        }
    }

    @Test
    void theRuntimePassesItsHealthCheckInAGlibcAMuslAndAScratchImage() {
        for (String image : List.of("glibc", "musl", "scratch")) {
            Docker.Result r = check(image);
            assertEquals(0, r.exit(), image + ": " + r.err() + r.out());
            assertTrue(r.out().contains("\"check\":\"passed\""), image + ": " + r.out());
            // What the walls found inside Docker's default profile, by trying each.
            assertTrue(r.out().contains("\"privilege\":\"unprivileged\""), image + ": " + r.out());
            assertTrue(r.out().contains("\"taskMemory\":\"PROC_MEM\""), image + ": process_vm_readv is EPERM there: " + r.out());
            assertTrue(r.out().contains("\"interfaces\":\"[lo]\""), image + ": " + r.out());
            assertTrue(r.out().contains("\"dnsRelay\":\"/127.0.0.53:53\""), image + ": " + r.out());
            assertTrue(r.out().contains("\"dumpable\":false"), image + ": " + r.out());
            assertTrue(r.out().contains("\"landlockAbi\":"), image + ": " + r.out());
        }
    }

    @Test
    void anImagesEnvironmentLoaderFilesAndFilesAtTheRuntimesMountPointNeverReachTheRuntime() {
        // The image's ENV sets LD_PRELOAD (evil.so exits 66 when loaded), LD_LIBRARY_PATH, GLIBC_TUNABLES and
        // every JVM options variable; its /etc/ld.so.preload names evil.so; it ships its own launcher and
        // argument file at /.openshell/runtime, where the runtime image is mounted read-only.
        Docker.Result r = check("hostile");
        assertEquals(0, r.exit(), r.err() + r.out());
        assertTrue(r.out().contains("\"check\":\"passed\""), r.out());
        String all = r.out() + r.err();
        assertFalse(all.contains("EVIL-PRELOAD"), "the image's preload ran in the runtime: " + all);
        assertFalse(all.contains("SHADOWED-LAUNCHER"), "the image's file shadowed the runtime's launcher: " + all);
        assertFalse(all.contains("Picked up"), "the JVM took options from the image's ENV: " + all);
        assertFalse(all.contains("PrintFlagsFinal") || all.contains("bool UseSerialGC"), "the image's JVM options applied: " + all);
        // The same image's own programs do get its ENV and preload: the hostile parts are real.
        String name = WorkloadContainer.uniqueName("hostile-self");
        try {
            // glibc's libc.so.6 is itself a dynamically loaded program (it prints its version).
            Docker.Result own = docker.run(List.of("run", "--rm", "--name", name, "--network", "none", "--user", "10001:10001",
                    "--entrypoint", "/lib/x86_64-linux-gnu/libc.so.6", images.reference("hostile")), CHECK_WAIT);
            assertEquals(66, own.exit(), "evil.so should stop the image's own dynamically loaded program: " + own.err() + own.out());
            assertTrue(own.err().contains("EVIL-PRELOAD"), own.err());
        } finally {
            docker.removeContainer(name);
        }
    }

    @Test
    void theRuntimeServesTheSupervisorThroughTheChannelDirectoryAndRefusesAnAgentItCannotConfineYet() throws Exception {
        Path dir = Files.createTempDirectory(work, "serve");
        Path channel = Files.createDirectories(dir.resolve("channel"));
        // The runtime keeps its private directory beside the socket (0700, its own uid).
        Files.setPosixFilePermissions(channel, PosixFilePermissions.fromString("rwx------"));
        Files.setAttribute(channel, "unix:uid", WorkloadContainer.UID);
        Files.setAttribute(channel, "unix:gid", WorkloadContainer.UID);
        String id = "docker-" + Long.toHexString(System.nanoTime() & 0xffffff);
        String policy = """
                version: 1
                network_policies: {}
                """;
        TokenIssuer issuer = TokenIssuer.generate("openshell-gateway", "gateway-key-1", java.time.Clock.systemUTC());
        LaunchBundles.Minted minted = LaunchBundles.mint(LaunchBundles.Request.builder().sandboxId(id)
                .sessionId(SandboxSessionId.fresh().value()).generation(1).policyYaml(policy)
                .agent(new LaunchBundles.Agent(List.of("/bin/busybox", "sleep", "5"), Map.of("PATH", "/bin"), "/sandbox"))
                .workload(WorkloadContainer.UID, WorkloadContainer.UID).build(), issuer, 1);
        Path supervisorLauncher = Path.of(System.getProperty("openshell.jlink.dir", "../../jlink"),
                "openshell-supervisor", "target", "openshell-supervisor", "bin", "openshell-supervisor").toAbsolutePath().normalize();
        String name = WorkloadContainer.uniqueName("serve");
        List<String> args = WorkloadContainer.runArguments(name, Optional.of(channel), Optional.of("/sandbox"));
        args.add(1, "-i");
        args.addAll(List.of(images.reference("musl"), "--sandbox", id, "--generation", "1",
                "--channel", WorkloadContainer.CHANNEL + "/supervisor.sock", "--bundle-stdin", "--workspace", "/sandbox"));
        Process runtime = null;
        Process supervisor = null;
        List<String> runtimeOut = new CopyOnWriteArrayList<>();
        List<String> supervisorOut = new CopyOnWriteArrayList<>();
        try {
            long started = System.nanoTime();
            runtime = docker.start(args);
            CompletableFuture<Long> serving = new CompletableFuture<>();
            follow(runtime.getInputStream(), runtimeOut, line -> line.contains("\"serving\":true"), serving, started);
            follow(runtime.getErrorStream(), runtimeOut, line -> false, new CompletableFuture<>(), started);
            feed(runtime.getOutputStream(), minted.runtimeBundle());
            // Across PID namespaces the peer's pid means nothing here: only --runtime-uid (no --runtime-pid).
            supervisor = new ProcessBuilder(supervisorLauncher.toString(), "--sandbox", id, "--generation", "1",
                    "--channel", channel.resolve("supervisor.sock").toString(), "--bundle-stdin",
                    "--runtime-uid", Integer.toString(WorkloadContainer.UID)).start();
            follow(supervisor.getInputStream(), supervisorOut, line -> false, new CompletableFuture<>(), started);
            follow(supervisor.getErrorStream(), supervisorOut, line -> false, new CompletableFuture<>(), started);
            feed(supervisor.getOutputStream(), minted.supervisorBundle());
            long servedAt = serving.get(SERVE_WAIT.toMillis(), TimeUnit.MILLISECONDS);
            System.out.println("docker run -> runtime serving: " + servedAt + " ms");
            assertTrue(runtimeOut.stream().anyMatch(l -> l.contains("\"privilege\":\"unprivileged")), tail(runtimeOut));
            // The supervisor attaches over the runtime's TLS through the channel (its peer check passes on the
            // uid alone) and confirms; then it starts the agent, which this runtime still refuses, closed:
            // without a mount it cannot put the supervisor's CA in the image's trust store (the supervisor
            // always sends one), and without a cgroup v2 leaf it could not kill a whole process tree.
            long endedAt = ended(supervisor, SERVE_WAIT);
            String supervisorLog = String.join("\n", supervisorOut);
            assertFalse(supervisorLog.contains("PEER_REFUSED") || supervisorLog.contains("attach failed"), tail(supervisorOut));
            assertTrue(supervisorLog.contains("FAILED: startAgent"), "the supervisor should get as far as the agent: " + tail(supervisorOut));
            assertTrue(supervisorLog.contains("trust store") || supervisorLog.contains("cgroup"),
                    "the refusal names what this runtime cannot do in a container: " + tail(supervisorOut));
            assertFalse(supervisorLog.contains("\"ready\":true"), tail(supervisorOut));
            System.out.println("docker run -> supervisor attached and refused the agent: " + endedAt + " ms");
        } catch (java.util.concurrent.TimeoutException e) {
            fail("the runtime never served:\nruntime:\n" + tail(runtimeOut) + "\nsupervisor:\n" + tail(supervisorOut));
        } finally {
            if (supervisor != null) {
                supervisor.destroyForcibly();
                supervisor.waitFor(10, TimeUnit.SECONDS);
            }
            docker.removeContainer(name);
            if (runtime != null) {
                runtime.destroyForcibly();
                runtime.waitFor(10, TimeUnit.SECONDS);
            }
            System.out.println("runtime:\n" + tail(runtimeOut) + "\nsupervisor:\n" + tail(supervisorOut));
        }
    }

    /** Waits for a process to end; returns the milliseconds waited, fails after {@code wait}. */
    private static long ended(Process p, Duration wait) throws InterruptedException {
        long from = System.nanoTime();
        if (!p.waitFor(wait.toMillis(), TimeUnit.MILLISECONDS)) {
            fail("the supervisor did not end within " + wait);
        }
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - from);
    }

    private static void feed(OutputStream in, byte[] bundle) throws IOException {
        try (in) {
            in.write(bundle);
        }
    }

    private static void follow(java.io.InputStream stream, List<String> lines, java.util.function.Predicate<String> mark,
                               CompletableFuture<Long> marked, long started) {
        Thread.ofPlatform().daemon(true).start(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(stream, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    lines.add(line);
                    if (mark.test(line)) {
                        marked.complete(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started));
                    }
                }
            } catch (IOException e) {
                // The process ended.
            }
        });
    }

    /** The last lines of a log, for a failure message (a retrying supervisor writes thousands). */
    private static String tail(List<String> lines) {
        List<String> copy = new ArrayList<>(lines);
        return String.join("\n", copy.subList(Math.max(0, copy.size() - 40), copy.size()));
    }
}
