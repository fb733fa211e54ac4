package openshell.tests.conformance;

import java.io.ByteArrayInputStream;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Stream;
import openshell.driver.ComputeDriver;
import openshell.driver.DriverEnvironment;
import openshell.driver.DriverRegistry;
import openshell.driver.LaunchMaterial;
import openshell.driver.LaunchPlan;
import openshell.driver.Provisioned;
import openshell.isolation.AgentSpec;
import openshell.isolation.BackendException;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.TopologyDescriptor;
import openshell.isolation.VerifiedTopologyDescriptor;
import openshell.isolation.WorkloadIdentity;
import openshell.protocol.Initiator;
import openshell.protocol.LaunchBundles;
import openshell.protocol.ProtocolException;
import openshell.protocol.Refusal;
import openshell.protocol.SupervisorBundle;
import openshell.protocol.SupervisorEndpoint;
import openshell.protocol.SupervisorLink;
import openshell.protocol.TokenIssuer;
import openshell.protocol.TokenSlot;
import openshell.protocol.Transport;
import openshell.protocol.UnixPeerPolicy;
import openshell.supervisor.OpenShellRuntimeBackend;

/**
 * Real sandbox runtimes for this JVM, which plays their supervisor. Each launch is minted as the
 * gateway mints it ({@link LaunchBundles}) and provisioned by the real process driver: the runtime
 * main in fresh user, net, mount, pid, ipc and uts namespaces and its own cgroup, dialing the
 * channel socket in the sandbox's private run directory. The driver's supervisor launcher is a
 * stand-in that only holds the supervisor's place (it discards its bundle on standard input and
 * sleeps); this JVM listens on the channel instead, with the pin and tokens of the same bundle,
 * exactly as {@code SupervisorMain} does, and installs that as the launch material of the
 * registered {@code openshell-sandbox}@1 backend.
 */
final class RuntimeLaunches {
    /** The workload's uid and gid inside every sandbox. */
    static final int WORKLOAD_ID = 1000;
    /** Longest wait for a runtime to dial in (as {@code SupervisorMain.ATTACH_WAIT}). */
    static final Duration ATTACH_WAIT = Duration.ofSeconds(120);
    /** The policy every launch carries: default deny (the kit decides each open itself). */
    static final String POLICY = "version: 1\nnetwork_policies: {}\n";

    private static RuntimeLaunches shared;

    private final Path root;
    private final Path runRoot;
    private final Path workspaces;
    private final ComputeDriver driver;
    private final TokenIssuer issuer = TokenIssuer.generate("openshell-gateway", "gateway-key-1", Clock.systemUTC());
    private final Map<String, Live> byChannel = new ConcurrentHashMap<>();
    private final Path stateRoot;
    /** Each launch's runtime log, kept from its discard (the driver's cleanup deletes the file), newest last. */
    private final java.util.Deque<Ended> ended = new java.util.concurrent.ConcurrentLinkedDeque<>();
    /** Discarded launches whose runtime log tails are kept for a failing check's report. */
    static final int KEPT_LOGS = 16;
    /** Lines of each runtime log a failing check's report shows. */
    static final int LOG_LINES = 60;

    /** A discarded launch's runtime log tail. */
    private record Ended(String id, long launchedNanos, String log) {
    }

    /** One provisioned launch and the supervisor side this JVM holds for it. */
    static final class Live {
        final SandboxContext context;
        final TopologyDescriptor descriptor;
        final Provisioned provisioned;
        final Path workspace;
        final Path channel;
        final long runtimeHostUid;
        final SupervisorEndpoint endpoint;
        final List<SupervisorLink> links = new CopyOnWriteArrayList<>();
        final long launchedNanos = System.nanoTime();
        volatile boolean lost;

        Live(SandboxContext context, Provisioned provisioned, Path workspace, Path channel, long runtimeHostUid,
             SupervisorEndpoint endpoint) {
            this.context = context;
            this.descriptor = provisioned.descriptor();
            this.provisioned = provisioned;
            this.workspace = workspace;
            this.channel = channel;
            this.runtimeHostUid = runtimeHostUid;
            this.endpoint = endpoint;
        }

        /** The supervisor goes away: its links close and nothing listens for the runtime any more. */
        void loseSupervisor() {
            lost = true;
            endpoint.close();
            links.forEach(SupervisorLink::close);
        }

        /** @return the workload's host uid (the sandbox's id range starts at the runtime's) */
        long workloadHostUid() {
            return runtimeHostUid + WORKLOAD_ID;
        }
    }

    private RuntimeLaunches() throws IOException {
        if (!"root".equals(System.getProperty("user.name"))) {
            throw new IllegalStateException("these suites need root: the process driver maps a private uid range per sandbox");
        }
        Path work = Path.of(System.getProperty("openshell.mains.work.dir"));
        Files.createDirectories(work);
        root = Files.createTempDirectory(work, "run");
        Files.setPosixFilePermissions(root, PosixFilePermissions.fromString("rwx--x--x"));
        Path bin = Files.createDirectory(root.resolve("bin"));
        Files.setPosixFilePermissions(bin, PosixFilePermissions.fromString("rwxr-xr-x"));
        // Short: the channel socket's path must fit a sockaddr_un (108 bytes).
        runRoot = Files.createTempDirectory(Path.of("/tmp"), "oscf");
        Files.setPosixFilePermissions(runRoot, PosixFilePermissions.fromString("rwx--x--x"));
        Runtime.getRuntime().addShutdownHook(Thread.ofPlatform().unstarted(() -> {
            try {
                Files.deleteIfExists(runRoot);
            } catch (IOException e) {
                System.err.println("cannot remove " + runRoot + ": " + e.getMessage());
            }
        }));
        workspaces = Files.createDirectory(root.resolve("workspaces"));
        Files.setPosixFilePermissions(workspaces, PosixFilePermissions.fromString("rwx--x--x"));
        stateRoot = Files.createDirectory(root.resolve("state"));
        String modulePath = readableModulePath(Files.createDirectory(root.resolve("lib")));
        Path runtimeLauncher = script(bin.resolve("openshell-sandbox"), "#!/bin/sh\nexec "
                + Path.of(System.getProperty("java.home"), "bin", "java") + " --enable-native-access=com.sun.jna"
                + " -Djna.boot.library.path=" + System.getProperty("openshell.mains.jna.dir")
                + " -Djna.nounpack=true -Djna.noclasspath=true" + nativeLauncherOption(bin.resolve("openshell-sandbox"))
                + " --add-modules ALL-MODULE-PATH -p " + modulePath
                + " -m openshell.sandbox/openshell.sandbox.SandboxMain \"$@\"\n");
        // Holds the supervisor's place for the driver; the bundle on stdin is discarded, never stored.
        Path supervisorStandIn = script(bin.resolve("supervisor-stand-in"), "#!/bin/sh\ncat >/dev/null\nexec sleep 86400\n");
        driver = DriverRegistry.load().driver("process", new DriverEnvironment(stateRoot, Map.of(
                "supervisor.launcher", supervisorStandIn.toString(), "runtime.launcher", runtimeLauncher.toString(),
                "run.root", runRoot.toString())));
        OpenShellRuntimeBackend.installLaunchMaterial(this::link);
    }

    /** @return the launches of this JVM (one driver, one installed launch material) */
    static synchronized RuntimeLaunches shared() {
        if (shared == null) {
            try {
                shared = new RuntimeLaunches();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return shared;
    }

    /**
     * Provisions a new runtime for the agent.
     *
     * @param agent  the agent, carried unchanged
     * @param policy the launch's policy YAML
     * @return the launch
     */
    Live launch(AgentSpec agent, String policy) {
        SandboxId id = new SandboxId("cf-" + Long.toHexString(System.nanoTime() & 0xffffffffL));
        SandboxSessionId session = SandboxSessionId.fresh();
        try {
            Path workspace = Files.createDirectory(workspaces.resolve(id.value()));
            Files.setPosixFilePermissions(workspace, PosixFilePermissions.fromString("rwxrwxrwx"));
            prepareWorkspace(workspace);
            LaunchBundles.Minted minted = LaunchBundles.mint(LaunchBundles.Request.builder().sandboxId(id.value())
                    .sessionId(session.value()).generation(1).policyYaml(policy)
                    .agent(new LaunchBundles.Agent(agent.argv(), agent.environment(), agent.workingDirectory()))
                    .workload(WORKLOAD_ID, WORKLOAD_ID).build(), issuer, 1);
            SupervisorBundle bundle = LaunchBundles.supervisorBundle(LaunchBundles.read(
                    new ByteArrayInputStream(minted.supervisorBundle())));
            SandboxContext context = new SandboxContext(id, session,
                    PolicySnapshot.of(1, policy.getBytes(StandardCharsets.UTF_8)), agent,
                    new WorkloadIdentity(WORKLOAD_ID, WORKLOAD_ID, List.of(WORKLOAD_ID)));
            Provisioned provisioned = driver.create(new LaunchPlan(context, 1,
                    LaunchMaterial.of(minted.supervisorBundle(), minted.runtimeBundle()),
                    Map.of("workspace", workspace.toString())));
            try {
                return listen(context, provisioned, workspace, bundle);
            } catch (RuntimeException | IOException e) {
                // Nothing provisioned may outlive a failed launch: the driver's trusted cleanup.
                driver.delete(id, provisioned.state());
                throw e;
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private Live listen(SandboxContext context, Provisioned provisioned, Path workspace, SupervisorBundle bundle)
            throws IOException {
        Properties topology = topology(provisioned.descriptor());
        Path channel = Path.of(topology.getProperty("channel"));
        long runtimeUid = Long.parseLong(topology.getProperty("runtime.uid"));
        SupervisorEndpoint endpoint = SupervisorEndpoint.builder()
                .transport(Transport.unix(channel))
                .initiator(Initiator.RUNTIME)
                .pin(bundle.pin())
                .tokens(new TokenSlot(bundle.tokens(), Clock.systemUTC()))
                .peerPolicy(UnixPeerPolicy.user(Long.toString(runtimeUid)))
                .build();
        Live live = new Live(context, provisioned, workspace, channel, runtimeUid, endpoint);
        // The probe's execute-only binary belongs to the workload (a mapped owner): its process stays
        // inspectable, and only the runtime's privilege could read the file, so it gets no digest.
        Path unreadable = workspace.resolve("unreadable-bash");
        Files.setAttribute(unreadable, "unix:uid", (int) live.workloadHostUid());
        Files.setAttribute(unreadable, "unix:gid", (int) live.workloadHostUid());
        Files.setPosixFilePermissions(unreadable, PosixFilePermissions.fromString("rwx--x--x"));
        endpoint.listen();
        // The runtime runs as the sandbox's mapped root: it must be able to connect.
        Files.setAttribute(channel, "unix:uid", (int) runtimeUid);
        Files.setAttribute(channel, "unix:gid", (int) runtimeUid);
        byChannel.put(channel.toString(), live);
        return live;
    }

    /**
     * The programs the probes need inside the workspace: a copy of bash the workload may execute
     * but the runtime may not read by its permissions (mode 0711; given to the workload's mapped
     * uid once the launch is known, see {@link #listen}).
     */
    private static void prepareWorkspace(Path workspace) throws IOException {
        Path unreadable = workspace.resolve("unreadable-bash");
        Files.copy(Path.of("/bin/bash"), unreadable);
        Files.setPosixFilePermissions(unreadable, PosixFilePermissions.fromString("rwx--x--x"));
    }

    /** @param launch a launch of this JVM @return it, if live */
    java.util.Optional<Live> live(TopologyDescriptor descriptor) {
        return java.util.Optional.ofNullable(byChannel.get(topology(descriptor).getProperty("channel", "")));
    }

    /** @return every launch not yet discarded */
    List<Live> live() {
        return List.copyOf(byChannel.values());
    }

    /**
     * Releases a launch as the driver's trusted cleanup does.
     *
     * @param descriptor its descriptor
     */
    void discard(TopologyDescriptor descriptor) {
        Live live = byChannel.remove(topology(descriptor).getProperty("channel", ""));
        if (live == null) {
            return;
        }
        live.loseSupervisor();
        ended.addLast(new Ended(live.context.sandboxId().value(), live.launchedNanos, runtimeLog(live.context.sandboxId().value())));
        while (ended.size() > KEPT_LOGS) {
            ended.pollFirst();
        }
        try {
            driver.delete(live.context.sandboxId(), live.provisioned.state());
        } finally {
            remove(live.workspace);
        }
    }

    /**
     * What the runtimes launched since {@code sinceNanos} wrote, live or discarded: a check that
     * failed on the link or the workload shows the runtime's side without a rerun.
     *
     * @param sinceNanos a {@link System#nanoTime()} reading from before the check
     * @return the tails of their runtime logs, each headed by its sandbox id
     */
    String runtimeLogsSince(long sinceNanos) {
        StringBuilder b = new StringBuilder();
        for (Ended e : ended) {
            if (e.launchedNanos() - sinceNanos >= 0) {
                b.append("\n--- runtime.log of ").append(e.id()).append(" (discarded) ---\n").append(e.log());
            }
        }
        for (Live l : byChannel.values()) {
            if (l.launchedNanos - sinceNanos >= 0) {
                String id = l.context.sandboxId().value();
                b.append("\n--- runtime.log of ").append(id).append(" (live) ---\n").append(runtimeLog(id));
            }
        }
        return b.toString();
    }

    private String runtimeLog(String id) {
        Path log = stateRoot.resolve("process/sandboxes").resolve(id).resolve("runtime.log");
        try {
            List<String> lines = Files.exists(log) ? Files.readAllLines(log, StandardCharsets.UTF_8) : List.of("(none)");
            return String.join("\n", lines.subList(Math.max(0, lines.size() - LOG_LINES), lines.size()));
        } catch (IOException | UncheckedIOException e) {
            return "(unreadable: " + e.getMessage() + ")";
        }
    }

    /** The launch material: the one link to the runtime of a verified descriptor, as SupervisorMain opens it. */
    private SupervisorLink link(VerifiedTopologyDescriptor descriptor) {
        Live live = byChannel.get(topology(descriptor.descriptor()).getProperty("channel", ""));
        if (live == null || live.lost) {
            throw new BackendException(BackendException.Kind.UNAVAILABLE, "no live launch for this descriptor");
        }
        // As a supervisor main: the runtime serves one link at a time, and this supervisor holds it.
        if (live.links.stream().anyMatch(SupervisorLink::isOpen)) {
            throw new BackendException(BackendException.Kind.DENIED, "the environment is bound: its one link is held");
        }
        long deadline = System.nanoTime() + ATTACH_WAIT.toNanos();
        while (true) {
            try {
                SupervisorLink link = live.endpoint.connect();
                live.links.add(link);
                return link;
            } catch (ProtocolException e) {
                // A cold runtime JVM may miss its own handshake timeout; it redials (as SupervisorMain retries).
                if (live.lost || System.nanoTime() > deadline || e.refusal() != Refusal.TRANSPORT_FAILED) {
                    throw new BackendException(BackendException.Kind.UNAVAILABLE, "no link to the runtime: " + e.getMessage(), e);
                }
            }
        }
    }

    private static Properties topology(TopologyDescriptor descriptor) {
        Properties p = new Properties();
        try {
            p.load(new java.io.StringReader(new String(descriptor.payload(), StandardCharsets.UTF_8)));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return p;
    }

    /**
     * The mains' module path, with every jar copied where the sandbox's mapped root can read it (the
     * local Maven repository is under root's 0700 home).
     */
    private static String readableModulePath(Path lib) throws IOException {
        Files.setPosixFilePermissions(lib, PosixFilePermissions.fromString("rwxr-xr-x"));
        List<String> entries = new ArrayList<>();
        for (String entry : Files.readString(Path.of(System.getProperty("openshell.mains.module.path.file"))).strip()
                .split(File.pathSeparator)) {
            Path source = Path.of(entry);
            if (Files.isRegularFile(source)) {
                Path copy = lib.resolve(source.getFileName());
                Files.copy(source, copy, StandardCopyOption.REPLACE_EXISTING);
                Files.setPosixFilePermissions(copy, PosixFilePermissions.fromString("rw-r--r--"));
                entries.add(copy.toString());
            } else {
                entries.add(entry);
            }
        }
        return String.join(File.pathSeparator, entries);
    }

    private static Path script(Path file, String text) throws IOException {
        Files.writeString(file, text);
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rwxr-xr-x"));
        return file;
    }

    /**
     * @param uid a host uid
     * @return host pids of the live (not zombie) processes running as it
     */
    static List<Long> processesOf(long uid) {
        List<Long> found = new ArrayList<>();
        try (Stream<Path> procs = Files.list(Path.of("/proc"))) {
            for (Path p : procs.filter(p -> p.getFileName().toString().chars().allMatch(Character::isDigit)).toList()) {
                try {
                    List<String> status = Files.readAllLines(p.resolve("status"));
                    // A zombie is dead; only its parent's wait is missing (the namespace's init never waits).
                    boolean zombie = status.stream().anyMatch(l -> l.startsWith("State:") && l.contains("Z"));
                    for (String line : status) {
                        if (!zombie && line.startsWith("Uid:") && Long.parseLong(line.substring(4).trim().split("\\s+")[0]) == uid) {
                            found.add(Long.parseLong(p.getFileName().toString()));
                        }
                    }
                } catch (IOException | RuntimeException gone) {
                    // the process ended while it was read
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return found;
    }

    private static void remove(Path dir) {
        if (!Files.exists(dir)) {
            return;
        }
        try {
            Files.walkFileTree(dir, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) throws IOException {
                    Files.delete(file);
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult postVisitDirectory(Path d, IOException e) throws IOException {
                    Files.delete(d);
                    return FileVisitResult.CONTINUE;
                }
            });
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * The build's native workload launcher, copied beside {@code file} where the sandbox's mapped
     * root can run it, as the runtime's {@code -Dopenshell.launcher} option.
     */
    private static String nativeLauncherOption(Path file) throws IOException {
        Path copy = file.resolveSibling("openshell-launcher");
        Files.copy(Path.of(System.getProperty("openshell.mains.launcher")), copy, StandardCopyOption.REPLACE_EXISTING);
        Files.setPosixFilePermissions(copy, java.nio.file.attribute.PosixFilePermissions.fromString("rwxr-xr-x"));
        return " -Dopenshell.launcher=" + copy;
    }
}
