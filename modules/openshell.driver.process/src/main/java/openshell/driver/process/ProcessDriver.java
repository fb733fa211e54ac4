package openshell.driver.process;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import openshell.driver.ComputeDriver;
import openshell.driver.DialDirection;
import openshell.driver.DriverEnvironment;
import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;
import openshell.driver.DriverStatus;
import openshell.driver.LaunchPlan;
import openshell.driver.Provisioned;
import openshell.isolation.SandboxId;

/**
 * The process topology. Per sandbox: an id-range slot; a run directory {@code <run.root>/<id>}
 * (0700, owned by the sandbox's mapped root) holding the channel socket; a state directory for
 * logs; the supervisor as a host process; the sandbox runtime inside fresh namespaces
 * ({@link NamespaceHolder}) and inside a cgroup v2 directory delegated to the sandbox
 * ({@link SandboxCgroup}), removed on stop. Launch bundles (secrets) reach both programs only through a pipe on
 * their standard input, never a file or a command line. The runtime dials the supervisor.
 *
 * <p>Settings (trusted gateway configuration): {@code supervisor.launcher} and
 * {@code runtime.launcher} (absolute paths of the two programs' launchers), {@code run.root}
 * (default {@code /run/openshell}; must be traversable, 0711, by the sandboxes' mapped users),
 * {@code workspace.root} (default {@code /var/tmp/openshell-workspaces}, made 0711: where a sandbox
 * launched without a workspace gets its fresh one, {@code <workspace.root>/<id>}, 0700 and owned by
 * the workload's host uid; kept across stop and start, removed by delete).
 * Options: {@code workspace} (an existing absolute host directory, writable by the agent; never
 * removed by the driver).
 */
final class ProcessDriver implements ComputeDriver {
    static final String NAME = "process";
    /** How long stop and delete wait for the supervisor to exit after SIGKILL. */
    static final Duration SUPERVISOR_KILL_TIMEOUT = Duration.ofSeconds(10);
    private static final Set<String> OPTIONS = Set.of("workspace");
    /**
     * Longest supervisor socket path (bytes): the JDK binds at most 106 (sun_path's 108 less its
     * NUL, less one), the same bound the Sandbox Protocol checks. Refused before anything is made.
     */
    static final int MAX_SOCKET_PATH_BYTES = 106;
    static final String SOCKET_NAME = "supervisor.sock";
    /**
     * Where the host's uid-range slots are kept: one directory per host, whatever gateway state
     * root, so two gateways never hand out one range (setting {@code id.slots}).
     */
    static final String DEFAULT_SLOTS = "/var/lib/openshell/id-slots";
    private static final Map<String, String> ENV = Map.of("PATH", "/usr/local/bin:/usr/bin:/bin", "LANG", "C.UTF-8");

    private final DriverEnvironment environment;
    private final Path runRoot;
    private final Path workspaceRoot;
    private final Path stateRoot;
    private final SlotAllocator slots;

    ProcessDriver(DriverEnvironment environment) {
        // Launchers are looked up when a sandbox is launched, not here: cleanup must work without them.
        this.environment = environment;
        this.runRoot = Path.of(environment.settings().getOrDefault("run.root", "/run/openshell"));
        this.workspaceRoot = Path.of(environment.settings().getOrDefault("workspace.root", "/var/tmp/openshell-workspaces"));
        this.stateRoot = environment.stateRoot().resolve(NAME);
        Path slotDirectory = Path.of(environment.settings().getOrDefault("id.slots", DEFAULT_SLOTS));
        if (!runRoot.isAbsolute() || !workspaceRoot.isAbsolute() || !slotDirectory.isAbsolute()) {
            throw new DriverException(Kind.INVALID, "run.root, workspace.root and id.slots must be absolute: " + runRoot
                    + ", " + workspaceRoot + ", " + slotDirectory);
        }
        this.slots = new SlotAllocator(slotDirectory, stateRoot);
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Provisioned create(LaunchPlan plan) {
        checkOptions(plan);
        SandboxId id = plan.context().sandboxId();
        int slot = slots.take(id);
        try {
            return launch(id, slot, plan);
        } catch (RuntimeException e) {
            slots.release(slot, id);
            removeQuietly(runRoot.resolve(id.value()));
            removeQuietly(stateDir(id));
            removeQuietly(workspaceRoot.resolve(id.value()));
            throw e;
        }
    }

    @Override
    public Provisioned start(SandboxId id, byte[] state, LaunchPlan plan) {
        checkOptions(plan);
        ProcessTopology previous = ProcessTopology.fromState(state);
        if (processesAlive(previous)) {
            throw new DriverException(Kind.INVALID, "sandbox " + id + " still runs; stop it first");
        }
        return launch(id, previous.slot(), plan);
    }

    @Override
    public void stop(SandboxId id, byte[] state) {
        ProcessTopology t = ProcessTopology.fromState(state);
        killSupervisor(t);
        holder(t).ifPresent(NamespaceHolder::kill);
        SandboxCgroup.of(id).ifPresent(SandboxCgroup::remove);
    }

    @Override
    public void delete(SandboxId id, byte[] state) {
        ProcessTopology t = ProcessTopology.fromState(state);
        stop(id, state);
        remove(runRoot.resolve(id.value()));
        remove(stateDir(id));
        // Only the fresh workspace the driver made; a host directory given with --workspace is the user's.
        remove(workspaceRoot.resolve(id.value()));
        slots.release(t.slot(), id);
    }

    @Override
    public DriverStatus status(SandboxId id, byte[] state) {
        ProcessTopology t = ProcessTopology.fromState(state);
        boolean runtime = holder(t).isPresent();
        boolean supervisor = supervisor(t).isPresent();
        if (runtime && supervisor) {
            return new DriverStatus(DriverStatus.Phase.RUNNING, "runtime namespaces (pid " + t.holderPid()
                    + ") and supervisor (pid " + t.supervisorPid() + ") alive");
        }
        if (runtime || supervisor) {
            return new DriverStatus(DriverStatus.Phase.DEGRADED, (runtime ? "supervisor" : "runtime") + " is gone");
        }
        return Files.isDirectory(stateDir(id))
                ? new DriverStatus(DriverStatus.Phase.STOPPED, "nothing runs; state kept")
                : new DriverStatus(DriverStatus.Phase.GONE, "nothing of the sandbox is left");
    }

    private Provisioned launch(SandboxId id, int slot, LaunchPlan plan) {
        IdRange ids = IdRange.slot(slot);
        Path run = runRoot.resolve(id.value());
        Path state = stateDir(id);
        privateDirectory(state);
        privateDirectory(run);
        chown(run, ids.first());
        Path supervisorLauncher = launcher(environment, "supervisor.launcher");
        Path runtimeLauncher = launcher(environment, "runtime.launcher");
        Path channel = socket(id);
        List<String> common = List.of("--sandbox", id.value(), "--generation", Long.toString(plan.runtimeGeneration()),
                "--channel", channel.toString(), "--bundle-stdin");

        NamespaceHolder holder = null;
        Process runtime = null;
        Process supervisor = null;
        try {
            holder = NamespaceHolder.create(ids);
            List<String> runtimeCommand = new ArrayList<>(List.of(runtimeLauncher.toString()));
            runtimeCommand.addAll(common);
            String workspace = Optional.ofNullable(plan.options().get("workspace"))
                    .orElseGet(() -> freshWorkspace(id, ids, plan).toString());
            runtimeCommand.addAll(List.of("--workspace", workspace));
            // The runtime enters the sandbox's delegated cgroup before nsenter, so its workload leaf is its own to manage.
            List<String> prefix = SandboxCgroup.of(id).map(cgroup -> {
                cgroup.create(ids.first());
                return cgroup.enterPrefix();
            }).orElse(List.of());
            // The runtime starts first (it redials until the supervisor listens), so the supervisor can be
            // told which process tree the runtime's connection must come from, not only which uid.
            runtime = holder.enter(prefix, runtimeCommand, ENV, Path.of("/"), state.resolve("runtime.log"));
            feed(runtime, plan.material().runtimeBundle(), "sandbox runtime");
            List<String> supervisorCommand = new ArrayList<>(List.of(supervisorLauncher.toString()));
            supervisorCommand.addAll(common);
            supervisorCommand.addAll(List.of("--runtime-uid", Long.toString(ids.first()),
                    "--runtime-pid", Long.toString(runtime.pid())));
            supervisor = startHost(supervisorCommand, state.resolve("supervisor.log"));
            feed(supervisor, plan.material().supervisorBundle(), "supervisor");
            ProcessTopology t = new ProcessTopology(channel, ids.first(), slot, holder.pid(),
                    holder.started().toEpochMilli(), supervisor.pid(), startMillis(supervisor.toHandle()));
            return Provisioned.of(t.descriptor(), DialDirection.RUNTIME_INITIATED, t.state());
        } catch (RuntimeException e) {
            if (supervisor != null) {
                supervisor.destroyForcibly();
            }
            if (runtime != null) {
                runtime.destroyForcibly();
            }
            if (holder != null) {
                holder.kill();
            }
            throw e;
        }
    }

    /**
     * The driver's own workspace for a sandbox launched without one: where delete finds it again,
     * unlike a directory the runtime would make in the host's /tmp.
     */
    private Path freshWorkspace(SandboxId id, IdRange ids, LaunchPlan plan) {
        Path dir = workspaceRoot.resolve(id.value());
        try {
            if (!Files.isDirectory(workspaceRoot)) {
                Files.createDirectories(workspaceRoot);
                Files.setPosixFilePermissions(workspaceRoot, PosixFilePermissions.fromString("rwx--x--x"));
            }
            privateDirectory(dir);
            long uid = ids.first() + plan.context().workload().uid();
            long gid = ids.first() + plan.context().workload().gid();
            Files.setAttribute(dir, "unix:uid", (int) uid);
            Files.setAttribute(dir, "unix:gid", (int) gid);
            return dir;
        } catch (IOException | UnsupportedOperationException e) {
            throw new DriverException(Kind.UNAVAILABLE, "cannot make the workspace " + dir + " for the sandbox's workload"
                    + " (the process driver needs root): " + e.getMessage(), e);
        }
    }

    private void checkOptions(LaunchPlan plan) {
        Path socket = socket(plan.context().sandboxId());
        int bytes = socket.toString().getBytes(StandardCharsets.UTF_8).length;
        if (bytes > MAX_SOCKET_PATH_BYTES) {
            throw new DriverException(Kind.INVALID, "run.root " + runRoot + " is too long: the supervisor socket "
                    + socket + " would be " + bytes + " bytes, over the " + MAX_SOCKET_PATH_BYTES
                    + " a Unix socket address holds");
        }
        for (String option : plan.options().keySet()) {
            if (!OPTIONS.contains(option)) {
                throw new DriverException(Kind.INVALID, "the process driver has no option '" + option + "'; options: "
                        + OPTIONS);
            }
        }
        String workspace = plan.options().get("workspace");
        if (workspace != null && (!Path.of(workspace).isAbsolute() || !Files.isDirectory(Path.of(workspace)))) {
            throw new DriverException(Kind.INVALID, "workspace must be an existing absolute directory: " + workspace);
        }
    }

    private Path socket(SandboxId id) {
        return runRoot.resolve(id.value()).resolve(SOCKET_NAME);
    }

    private Path stateDir(SandboxId id) {
        return stateRoot.resolve("sandboxes").resolve(id.value());
    }

    private static Process startHost(List<String> command, Path log) {
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
        pb.environment().clear();
        pb.environment().putAll(ENV);
        try {
            return pb.start();
        } catch (IOException e) {
            throw new DriverException(Kind.FAILED, "cannot start " + command.getFirst() + ": " + e.getMessage(), e);
        }
    }

    /** Writes a launch bundle to the program's stdin and closes it: the only way secrets reach it. */
    private static void feed(Process p, byte[] bundle, String what) {
        try (OutputStream in = p.getOutputStream()) {
            in.write(bundle);
        } catch (IOException e) {
            throw new DriverException(Kind.FAILED, "the " + what + " did not take its launch bundle (exited "
                    + (p.isAlive() ? "?" : Integer.toString(p.exitValue())) + "): " + e.getMessage(), e);
        }
    }

    private static Optional<NamespaceHolder> holder(ProcessTopology t) {
        return NamespaceHolder.adopt(t.holderPid(), Instant.ofEpochMilli(t.holderStart()), IdRange.slot(t.slot()));
    }

    private static Optional<ProcessHandle> supervisor(ProcessTopology t) {
        return ProcessHandle.of(t.supervisorPid()).filter(ProcessHandle::isAlive)
                .filter(h -> NamespaceHolder.sameStart(Instant.ofEpochMilli(t.supervisorStart()), Instant.ofEpochMilli(startMillis(h))));
    }

    private static boolean processesAlive(ProcessTopology t) {
        return holder(t).isPresent() || supervisor(t).isPresent();
    }

    private static void killSupervisor(ProcessTopology t) {
        supervisor(t).ifPresent(h -> {
            h.destroyForcibly();
            try {
                h.onExit().get(SUPERVISOR_KILL_TIMEOUT.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
            } catch (Exception e) {
                throw new DriverException(Kind.FAILED, "the supervisor (pid " + t.supervisorPid()
                        + ") survived SIGKILL for " + SUPERVISOR_KILL_TIMEOUT, e);
            }
        });
    }

    private static long startMillis(ProcessHandle h) {
        return h.info().startInstant().map(Instant::toEpochMilli).orElse(-1L);
    }

    private static Path launcher(DriverEnvironment environment, String key) {
        String value = environment.settings().get(key);
        if (value == null || !Path.of(value).isAbsolute() || !Files.isExecutable(Path.of(value))) {
            throw new DriverException(Kind.UNAVAILABLE, "the process driver needs the setting " + key
                    + " naming an executable launcher (absolute path); got " + value);
        }
        return Path.of(value);
    }

    private static void privateDirectory(Path dir) {
        try {
            Files.createDirectories(dir.getParent());
            if (!Files.isDirectory(dir)) {
                Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            }
        } catch (IOException e) {
            throw new DriverException(Kind.FAILED, "cannot create " + dir + ": " + e.getMessage(), e);
        }
    }

    private static void chown(Path dir, long uid) {
        try {
            Files.setAttribute(dir, "unix:uid", (int) uid);
            Files.setAttribute(dir, "unix:gid", (int) uid);
        } catch (IOException | UnsupportedOperationException e) {
            throw new DriverException(Kind.UNAVAILABLE, "cannot give " + dir + " to the sandbox's uid " + uid
                    + " (the process driver needs root): " + e.getMessage(), e);
        }
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
            throw new DriverException(Kind.FAILED, "cannot remove " + dir + ": " + e.getMessage(), e);
        }
    }

    private static void removeQuietly(Path dir) {
        try {
            remove(dir);
        } catch (DriverException ignored) {
            // Best effort while undoing a failed create; the original failure is what matters.
        }
    }
}
