package openshell.tests.docker.runtime;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetAddress;
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
import java.util.function.Predicate;
import openshell.isolation.SandboxSessionId;
import openshell.protocol.LaunchBundles;
import openshell.protocol.TokenIssuer;

/**
 * One sandbox made of the two real programs, the way the Docker driver will make it, minus the
 * driver: launch bundles minted here as the gateway mints them, the runtime as PID 1 of a workload
 * container ({@link WorkloadContainer}) with its bundle on the container's standard input, and the
 * supervisor as a host process (root, the host's network namespace, as the process driver starts
 * it) listening on {@code supervisor.sock} in a host directory that is the container's channel
 * volume; the workspace is another host directory (the container's {@code /sandbox}), so the test
 * reads what the agent wrote there. {@link #close} stops both and removes the container.
 */
final class ContainerSandbox implements AutoCloseable {
    /** Where the workspace is in the container. */
    static final String WORKSPACE = "/sandbox";

    private final Docker docker;
    private final String name;
    private final Path workspace;
    private final long started = System.nanoTime();
    private final List<String> runtimeOut = new CopyOnWriteArrayList<>();
    private final List<String> supervisorOut = new CopyOnWriteArrayList<>();
    private final CompletableFuture<Long> serving = new CompletableFuture<>();
    private final CompletableFuture<Long> ready = new CompletableFuture<>();
    private Process runtime;
    private Process supervisor;

    private ContainerSandbox(Docker docker, String name, Path workspace) {
        this.docker = docker;
        this.name = name;
        this.workspace = workspace;
    }

    /** What the gateway would put in the bundles besides the policy and the agent. */
    record Options(Map<String, InetAddress> hostAliases, Optional<openshell.protocol.WorkloadConfinement> confinement) {
        static Options none() {
            return new Options(Map.of(), Optional.empty());
        }
    }

    /**
     * Starts a sandbox.
     *
     * @param files   files to put in the workspace first (name -> content; made executable)
     */
    static ContainerSandbox start(Docker docker, String image, Path work, String policy, List<String> agentArgv,
                                  Map<String, String> env, Options options, Map<String, String> files) throws IOException {
        Path dir = Files.createTempDirectory(work, "sandbox");
        // The runtime keeps its private directory beside the socket: the channel directory must be
        // its own uid's and nobody else's (the supervisor, root here, enters it anyway).
        Path channel = owned(Files.createDirectories(dir.resolve("channel")));
        Path workspace = owned(Files.createDirectories(dir.resolve("workspace")));
        for (Map.Entry<String, String> f : files.entrySet()) {
            Path file = Files.writeString(workspace.resolve(f.getKey()), f.getValue());
            Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rwxr-xr-x"));
            Files.setAttribute(file, "unix:uid", WorkloadContainer.UID);
            Files.setAttribute(file, "unix:gid", WorkloadContainer.UID);
        }
        String id = "docker-" + Long.toHexString(System.nanoTime() & 0xffffff);
        TokenIssuer issuer = TokenIssuer.generate("openshell-gateway", "gateway-key-1", java.time.Clock.systemUTC());
        LaunchBundles.Request.Builder request = LaunchBundles.Request.builder().sandboxId(id)
                .sessionId(SandboxSessionId.fresh().value()).generation(1).policyYaml(policy)
                .agent(new LaunchBundles.Agent(agentArgv, env, WORKSPACE))
                .workload(WorkloadContainer.UID, WorkloadContainer.UID);
        options.hostAliases().forEach(request::hostAlias);
        options.confinement().ifPresent(request::confinement);
        LaunchBundles.Minted minted = LaunchBundles.mint(request.build(), issuer, 1);
        String name = WorkloadContainer.uniqueName("sandbox");
        ContainerSandbox sandbox = new ContainerSandbox(docker, name, workspace);
        try {
            List<String> args = WorkloadContainer.runArguments(name, Optional.of(channel), Optional.empty());
            args.add(1, "-i");
            args.addAll(List.of("--volume", workspace + ":" + WORKSPACE, image, "--sandbox", id, "--generation", "1",
                    "--channel", WorkloadContainer.CHANNEL + "/supervisor.sock", "--bundle-stdin", "--workspace", WORKSPACE));
            sandbox.runtime = docker.start(args);
            follow(sandbox.runtime.getInputStream(), sandbox.runtimeOut, l -> l.contains("\"serving\":true"), sandbox.serving, sandbox.started);
            follow(sandbox.runtime.getErrorStream(), sandbox.runtimeOut, l -> false, new CompletableFuture<>(), sandbox.started);
            feed(sandbox.runtime.getOutputStream(), minted.runtimeBundle());
            // Across PID namespaces the peer's pid means nothing: only --runtime-uid (no --runtime-pid).
            sandbox.supervisor = new ProcessBuilder(supervisorLauncher().toString(), "--sandbox", id, "--generation", "1",
                    "--channel", channel.resolve("supervisor.sock").toString(), "--bundle-stdin",
                    "--runtime-uid", Integer.toString(WorkloadContainer.UID)).start();
            follow(sandbox.supervisor.getInputStream(), sandbox.supervisorOut, l -> l.contains("\"ready\":true"), sandbox.ready, sandbox.started);
            follow(sandbox.supervisor.getErrorStream(), sandbox.supervisorOut, l -> false, new CompletableFuture<>(), sandbox.started);
            feed(sandbox.supervisor.getOutputStream(), minted.supervisorBundle());
            return sandbox;
        } catch (IOException | RuntimeException e) {
            sandbox.close();
            throw e;
        }
    }

    private static Path owned(Path dir) throws IOException {
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx------"));
        Files.setAttribute(dir, "unix:uid", WorkloadContainer.UID);
        Files.setAttribute(dir, "unix:gid", WorkloadContainer.UID);
        return dir;
    }

    static Path supervisorLauncher() {
        return Path.of(System.getProperty("openshell.jlink.dir", "../../jlink"), "openshell-supervisor", "target",
                "openshell-supervisor", "bin", "openshell-supervisor").toAbsolutePath().normalize();
    }

    /** @return milliseconds from {@code docker run} to the runtime's serving line */
    long awaitServing(Duration wait) {
        return await(serving, wait, "the runtime never served");
    }

    /** @return milliseconds from {@code docker run} to the supervisor's readiness line (agent started) */
    long awaitReady(Duration wait) {
        return await(ready, wait, "the supervisor never became ready");
    }

    private long await(CompletableFuture<Long> mark, Duration wait, String what) {
        try {
            return mark.get(wait.toMillis(), TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.TimeoutException | java.util.concurrent.ExecutionException e) {
            fail(what + " within " + wait + ":\n" + logs());
            throw new IllegalStateException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /**
     * Waits for the supervisor to end (it ends with the agent).
     *
     * @return its exit status
     */
    int awaitSupervisorExit(Duration wait) throws InterruptedException {
        if (!supervisor.waitFor(wait.toMillis(), TimeUnit.MILLISECONDS)) {
            fail("the supervisor did not end within " + wait + ":\n" + logs());
        }
        return supervisor.exitValue();
    }

    /**
     * Waits for the container (the runtime) to end.
     *
     * @return its exit status
     */
    int awaitRuntimeExit(Duration wait) throws InterruptedException {
        if (!runtime.waitFor(wait.toMillis(), TimeUnit.MILLISECONDS)) {
            fail("the runtime did not end within " + wait + ":\n" + logs());
        }
        return runtime.exitValue();
    }

    /** @return a file the agent wrote in its workspace, or empty */
    Optional<String> workspaceFile(String file) throws IOException {
        Path p = workspace.resolve(file);
        return Files.isRegularFile(p) ? Optional.of(Files.readString(p).strip()) : Optional.empty();
    }

    List<String> runtimeLines() {
        return List.copyOf(runtimeOut);
    }

    List<String> supervisorLines() {
        return List.copyOf(supervisorOut);
    }

    /** @return the last lines of both logs, for a failure message */
    String logs() {
        return "runtime:\n" + tail(runtimeOut) + "\nsupervisor:\n" + tail(supervisorOut);
    }

    static String tail(List<String> lines) {
        List<String> copy = new ArrayList<>(lines);
        return String.join("\n", copy.subList(Math.max(0, copy.size() - 60), copy.size()));
    }

    @Override
    public void close() {
        try {
            if (supervisor != null) {
                supervisor.destroyForcibly();
                supervisor.waitFor(10, TimeUnit.SECONDS);
            }
            docker.removeContainer(name);
            if (runtime != null) {
                runtime.destroyForcibly();
                runtime.waitFor(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void feed(OutputStream in, byte[] bundle) throws IOException {
        try (in) {
            in.write(bundle);
        }
    }

    private static void follow(InputStream stream, List<String> lines, Predicate<String> mark, CompletableFuture<Long> marked,
                               long started) {
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
}
