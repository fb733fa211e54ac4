package openshell.sandbox;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import openshell.isolation.BackendRegistry;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.TopologyDescriptor;
import openshell.isolation.VerifiedTopologyDescriptor;
import openshell.protocol.Initiator;
import openshell.protocol.LaunchBundles;
import openshell.protocol.SupervisorBundle;
import openshell.protocol.SupervisorEndpoint;
import openshell.protocol.SupervisorLink;
import openshell.protocol.TokenIssuer;
import openshell.protocol.TokenSlot;
import openshell.protocol.Transport;
import openshell.supervisor.OpenShellRuntimeBackend;

/**
 * The runtime's main as a real process (in fresh network and mount namespaces, as host root),
 * with real launch bundles, and the test as its supervisor on a real Unix socket.
 */
final class MainHarness implements AutoCloseable {
    static final TokenIssuer ISSUER = TokenIssuer.generate("openshell-gateway", "gateway-key-1", Clock.systemUTC());

    final Path directory = Files.createTempDirectory("osm");
    final Path channel = directory.resolve("supervisor.sock");
    final LaunchBundles.Minted minted;
    final SupervisorBundle bundle;
    final SupervisorEndpoint supervisor;
    final Process process;
    final List<SupervisorLink> links = new java.util.concurrent.CopyOnWriteArrayList<>();

    MainHarness(String sandbox, long generation, List<String> agent) throws IOException {
        minted = mint(sandbox, generation, agent);
        bundle = LaunchBundles.supervisorBundle(minted.supervisorBundle());
        supervisor = SupervisorEndpoint.builder().transport(Transport.unix(channel)).initiator(Initiator.RUNTIME)
                .pin(bundle.pin()).tokens(new TokenSlot(bundle.tokens(), Clock.systemUTC())).build();
        supervisor.listen();
        process = start(List.of("--sandbox", sandbox, "--generation", Long.toString(generation), "--channel",
                channel.toString(), "--bundle-stdin"), minted.runtimeBundle());
        stderr = new java.util.concurrent.CompletableFuture<>();
        Thread.ofPlatform().daemon().start(() -> {
            try {
                stderr.complete(new String(process.getErrorStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8));
            } catch (IOException e) {
                stderr.complete("(stderr unreadable: " + e + ")");
            }
        });
        java.io.BufferedReader lines = new java.io.BufferedReader(new java.io.InputStreamReader(process.getInputStream(),
                java.nio.charset.StandardCharsets.UTF_8));
        java.util.concurrent.CompletableFuture<String> first = new java.util.concurrent.CompletableFuture<>();
        Thread.ofPlatform().daemon().start(() -> {
            try {
                first.complete(lines.readLine());
                while (lines.readLine() != null) {
                    // drained so the main never blocks on a full pipe
                }
            } catch (IOException e) {
                first.complete(null);
            }
        });
        try {
            servingLine = first.get(TestSandbox.WAIT.toSeconds(), java.util.concurrent.TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new AssertionError("the runtime main did not report serving within " + TestSandbox.WAIT, e);
        }
        if (servingLine == null) {
            throw new AssertionError("the runtime main exited before serving: " + stderr.join());
        }
    }

    final java.util.concurrent.CompletableFuture<String> stderr;
    final String servingLine;

    static LaunchBundles.Minted mint(String sandbox, long generation, List<String> agent) {
        return LaunchBundles.mint(LaunchBundles.Request.builder().sandboxId(sandbox)
                .sessionId(SandboxSessionId.fresh().value()).generation(generation).policyYaml("version: 1\n")
                .agent(new LaunchBundles.Agent(agent, Map.of("PATH", "/usr/bin:/bin"), "/"))
                .workload(TestSandbox.NOBODY, TestSandbox.NOBODY).build(), ISSUER, 1);
    }

    /** The backend over this harness's endpoint, and a verified descriptor for it. */
    OpenShellRuntimeBackend backend() {
        return OpenShellRuntimeBackend.over(d -> {
            // A cold runtime JVM on a loaded machine may miss its own handshake timeout once: take its next dial.
            for (int attempt = 1; ; attempt++) {
                try {
                    SupervisorLink link = supervisor.connect();
                    links.add(link);
                    return link;
                } catch (openshell.protocol.ProtocolException e) {
                    if (attempt >= 5) {
                        throw e;
                    }
                    System.err.println("link attempt " + attempt + " failed: " + e.getMessage());
                }
            }
        });
    }

    /** The supervisor goes away: its listener and every link close. */
    void loseSupervisor() {
        supervisor.close();
        links.forEach(SupervisorLink::close);
    }

    static VerifiedTopologyDescriptor descriptor() {
        BackendRegistry registry = BackendRegistry.of(List.of(new OpenShellRuntimeBackend.Provider()));
        return registry.verify(TopologyDescriptor.of(OpenShellRuntimeBackend.KEY, new byte[0]), OpenShellRuntimeBackend.KEY);
    }

    static Process start(List<String> args, byte[] stdin) throws IOException {
        List<String> command = new ArrayList<>(List.of("/usr/bin/unshare", "--net", "--mount",
                System.getProperty("java.home") + "/bin/java",
                "--enable-native-access=com.sun.jna", "-Djna.boot.library.path=" + System.getProperty("jna.boot.library.path"),
                "-Djna.nounpack=true", "-Djna.noclasspath=true",
                "-D" + WorkloadLaunch.LAUNCHER_PROPERTY + "=" + System.getProperty(WorkloadLaunch.LAUNCHER_PROPERTY), "--add-modules", "ALL-MODULE-PATH", "-cp", System.getProperty("java.class.path"), "-p", System.getProperty("jdk.module.path"),
                "-m", "openshell.sandbox/openshell.sandbox.SandboxMain"));
        command.addAll(args);
        Process p = new ProcessBuilder(command).start();
        p.getOutputStream().write(stdin);
        p.getOutputStream().close();
        return p;
    }

    @Override
    public void close() throws IOException {
        loseSupervisor();
        process.destroyForcibly();
        try {
            // For the test report: what the runtime said. (Readers are platform threads: a blocking pipe read must not pin a carrier.)
            System.err.println("runtime main stderr:\n" + stderr.get(TestSandbox.WAIT.toSeconds(), java.util.concurrent.TimeUnit.SECONDS));
        } catch (Exception e) {
            System.err.println("runtime main stderr unavailable: " + e);
        }
        try (var files = Files.list(directory)) {
            for (Path f : files.toList()) {
                Files.deleteIfExists(f);
            }
        }
        Files.deleteIfExists(directory);
    }
}
