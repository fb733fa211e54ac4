package openshell.driver.process;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HexFormat;
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
    /** Setting: how many warm spares to keep ready (default 0: every create starts its JVMs cold). */
    static final String SPARES_SETTING = "spares";
    /** The most warm spares one driver keeps: each is two idle JVMs (~145 MiB resident together). */
    static final int MAX_SPARES = 4;
    /** Where idle spares keep their logs and topology, under the driver's state root. */
    static final String SPARES = "spares";
    /** Every spare's name starts so (its slot owner, run directory, log directory and cgroup). */
    static final String SPARE_PREFIX = "spare-";
    /** The file beside a spare's logs that names its processes, for the sweep after a crash. */
    static final String SPARE_TOPOLOGY = "topology";
    /** What both launchers of a spare get instead of the sandbox, generation and workspace. */
    static final String SPARE_FLAG = "--late-arguments";
    /**
     * The niceness a spare starts and idles at, so its two JVM starts take the cores only when
     * nothing else wants them (an exec, another sandbox's start). A claim puts every thread of it
     * back to 0 before it gets its bundles.
     */
    static final int SPARE_NICENESS = 19;
    /** Passes over a claimed spare's threads until none is left niced (threads started meanwhile inherit it). */
    static final int MAX_RENICE_PASSES = 5;
    private static final java.security.SecureRandom RANDOM = new java.security.SecureRandom();
    /**
     * Longest wait, after the bundles, for the runtime to say it serves (or to exit refusing): as
     * long as the supervisor waits for it to attach.
     */
    static final Duration RUNTIME_VERDICT_WAIT = Duration.ofSeconds(120);
    /** How often the runtime's log is looked at meanwhile. */
    static final Duration RUNTIME_VERDICT_POLL = Duration.ofMillis(20);
    /** What the runtime prints once it has taken its bundle and the policy's static sections. */
    static final String RUNTIME_SERVING = "\"serving\":true";
    /** What the runtime prints before it exits instead of serving. */
    static final String RUNTIME_REFUSAL = "openshell-sandbox: refusing to serve: ";
    /** What the runtime prints when the workload's confinement is weaker than the sandbox targets. */
    static final String CONFINEMENT_WARNING = "openshell-sandbox: WARNING: workload confinement: ";
    /** How every create or start the runtime refused begins (INVALID: the launch cannot be honoured). */
    static final String REFUSED = "the sandbox runtime refused the launch: ";

    private final DriverEnvironment environment;
    private final Path runRoot;
    private final Path workspaceRoot;
    private final Path stateRoot;
    private final SlotAllocator slots;
    private final SparePool spares;

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
        // The state root exists before any slot names it: another driver's sweep frees only slots whose owner's is gone.
        try {
            Files.createDirectories(stateRoot);
        } catch (IOException e) {
            throw new DriverException(Kind.FAILED, "cannot create the driver's state directory " + stateRoot + ": "
                    + e.getMessage(), e);
        }
        sweepAbandoned();
        int size = spareCount(environment.settings().getOrDefault(SPARES_SETTING, "0"));
        this.spares = size == 0 ? null : new SparePool(this, size);
    }

    private static int spareCount(String value) {
        try {
            int n = Integer.parseInt(value);
            if (n >= 0 && n <= MAX_SPARES) {
                return n;
            }
        } catch (NumberFormatException e) {
            // refused below
        }
        throw new DriverException(Kind.INVALID, "the setting " + SPARES_SETTING + " must be a number from 0 to " + MAX_SPARES
                + ": " + value);
    }

    /** @return the pool of warm spares, if the driver keeps any */
    Optional<SparePool> spares() {
        return Optional.ofNullable(spares);
    }

    /** Ends the warm spares nobody took; sandboxes are not touched. */
    @Override
    public void close() {
        if (spares != null) {
            spares.close();
        }
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Provisioned create(LaunchPlan plan) {
        checkOptions(plan);
        SandboxId id = plan.context().sandboxId();
        if (spares != null) {
            Optional<Provisioned> warm = spares.take().flatMap(spare -> claim(spare, id, plan));
            if (warm.isPresent()) {
                spares.claimed(stateDir(id).resolve("supervisor.log"));
                return warm.get();
            }
        }
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
        // A sandbox made from a warm spare ran in the spare's run directory; the new launch has its own.
        runDirectory(previous).filter(dir -> !dir.equals(runRoot.resolve(id.value()))).ifPresent(ProcessDriver::remove);
        return launch(id, previous.slot(), plan);
    }

    @Override
    public void stop(SandboxId id, byte[] state) {
        ProcessTopology t = ProcessTopology.fromState(state);
        killSupervisor(t);
        holder(t).ifPresent(NamespaceHolder::kill);
        t.cgroup().map(SandboxCgroup::named).orElseGet(() -> SandboxCgroup.of(id)).ifPresent(SandboxCgroup::remove);
    }

    /** @return the run directory the topology's channel is in, if it is one of this driver's */
    private Optional<Path> runDirectory(ProcessTopology t) {
        Path dir = t.channel().toAbsolutePath().normalize().getParent();
        return dir != null && runRoot.normalize().equals(dir.getParent()) ? Optional.of(dir) : Optional.empty();
    }

    @Override
    public void delete(SandboxId id, byte[] state) {
        ProcessTopology t = ProcessTopology.fromState(state);
        stop(id, state);
        remove(runRoot.resolve(id.value()));
        runDirectory(t).ifPresent(ProcessDriver::remove);
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
                    + ") and supervisor (pid " + t.supervisorPid() + ") alive" + confinementWarning(id));
        }
        List<DriverStatus.Part> parts = parts(id, t);
        String seen = parts.stream().map(p -> p.name() + " " + p.detail()).collect(java.util.stream.Collectors.joining("; "));
        if (runtime || supervisor) {
            return new DriverStatus(DriverStatus.Phase.DEGRADED, (runtime ? "supervisor" : "runtime") + " is gone ("
                    + seen + ")", parts);
        }
        return Files.isDirectory(stateDir(id))
                ? new DriverStatus(DriverStatus.Phase.STOPPED, "nothing runs; state kept (" + seen + ")", parts)
                : new DriverStatus(DriverStatus.Phase.GONE, "nothing of the sandbox is left", parts);
    }

    /**
     * Each part as seen now, for a sandbox of which something is gone (never on the running path:
     * it walks the host's processes). Inside the namespaces, the runtime is what was entered from
     * outside (its parent is not in them); the workload is everything else but the holder.
     */
    private List<DriverStatus.Part> parts(SandboxId id, ProcessTopology t) {
        List<DriverStatus.Part> parts = new ArrayList<>();
        boolean supervisor = supervisor(t).isPresent();
        parts.add(new DriverStatus.Part(DriverStatus.SUPERVISOR, supervisor, supervisor ? "(pid " + t.supervisorPid()
                + ") alive" : "(pid " + t.supervisorPid() + ") ended: " + lastWords(stateDir(id).resolve("supervisor.log"))));
        Optional<NamespaceHolder> holder = holder(t);
        parts.add(new DriverStatus.Part(DriverStatus.NAMESPACES, holder.isPresent(), "holder (pid " + t.holderPid() + ") "
                + (holder.isPresent() ? "alive" : "ended")));
        List<Long> inside = holder.map(NamespaceHolder::processes).orElse(List.of());
        long runtimes = 0;
        long workload = 0;
        for (long pid : inside) {
            if (pid == t.holderPid()) {
                continue;
            }
            long parent = ProcessHandle.of(pid).flatMap(ProcessHandle::parent).map(ProcessHandle::pid).orElse(-1L);
            if (inside.contains(parent)) {
                workload++;
            } else {
                runtimes++;
            }
        }
        parts.add(new DriverStatus.Part(DriverStatus.RUNTIME, runtimes > 0, runtimes > 0 ? "alive" : "ended"));
        parts.add(new DriverStatus.Part(DriverStatus.WORKLOAD, workload > 0, workload > 0 ? workload + " process(es) alive"
                : "no process left"));
        return parts;
    }

    /** Most of the end of a supervisor's log read for its last words. */
    static final int LAST_WORDS_BYTES = 16 * 1024;

    /**
     * How the supervisor's last launch ended, in its own words (the agent's exit, a failed
     * boundary), or that it left none: a supervisor killed by a signal says nothing.
     */
    static String lastWords(Path log) {
        String tail;
        try (java.io.RandomAccessFile f = new java.io.RandomAccessFile(log.toFile(), "r")) {
            long from = Math.max(0, f.length() - LAST_WORDS_BYTES);
            byte[] bytes = new byte[(int) (f.length() - from)];
            f.seek(from);
            f.readFully(bytes);
            tail = new String(bytes, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "its log cannot be read";
        }
        int ready = tail.lastIndexOf("\"ready\":true");
        List<String> words = (ready < 0 ? tail : tail.substring(ready)).lines()
                .filter(l -> l.startsWith("openshell-supervisor: the agent ended") || l.startsWith("openshell-supervisor: boundary failed")
                        || l.startsWith("openshell-supervisor: stopped"))
                .toList();
        return words.isEmpty() ? "without a word in its log (killed by a signal?)"
                : words.getLast().substring("openshell-supervisor: ".length());
    }

    private Provisioned launch(SandboxId id, int slot, LaunchPlan plan) {
        IdRange ids = IdRange.slot(slot);
        Path run = runRoot.resolve(id.value());
        Path state = stateDir(id);
        privateDirectory(state);
        privateDirectory(run);
        chown(run, ids.first());
        Path channel = socket(id);
        String workspace = workspace(id, ids, plan);
        List<String> common = List.of("--sandbox", id.value(), "--generation", Long.toString(plan.runtimeGeneration()),
                "--channel", channel.toString(), "--bundle-stdin");
        List<String> runtimeArgs = new ArrayList<>(common);
        runtimeArgs.addAll(List.of("--workspace", workspace));
        Pair pair = startPair(ids, channel, state, SandboxCgroup.of(id), List.of(), runtimeArgs, common);
        try {
            feed(pair.runtime(), new byte[0], plan.material().runtimeBundle(), "sandbox runtime");
            feed(pair.supervisor(), new byte[0], plan.material().supervisorBundle(), "supervisor");
            awaitServing(pair.runtime(), state.resolve("runtime.log"));
            ProcessTopology t = pair.topology(slot);
            return Provisioned.of(t.descriptor(), DialDirection.RUNTIME_INITIATED, t.state());
        } catch (RuntimeException e) {
            pair.discard();
            throw e;
        }
    }

    /**
     * Starts the namespace holder, the runtime inside it and the supervisor beside it; both read
     * their standard input next.
     */
    private Pair startPair(IdRange ids, Path channel, Path logs, Optional<SandboxCgroup> cgroup, List<String> wrapper,
                           List<String> runtimeArgs, List<String> supervisorArgs) {
        Path supervisorLauncher = launcher(environment, "supervisor.launcher");
        Path runtimeLauncher = launcher(environment, "runtime.launcher");
        NamespaceHolder holder = null;
        Process runtime = null;
        try {
            holder = NamespaceHolder.create(ids);
            List<String> runtimeCommand = new ArrayList<>(List.of(runtimeLauncher.toString()));
            runtimeCommand.addAll(runtimeArgs);
            // The runtime enters the sandbox's delegated cgroup before nsenter, so its workload leaf is its own to manage.
            List<String> prefix = new ArrayList<>(wrapper);
            cgroup.ifPresent(c -> {
                c.create(ids.first());
                prefix.addAll(c.enterPrefix());
            });
            // The runtime starts first (it redials until the supervisor listens), so the supervisor can be
            // told which process tree the runtime's connection must come from, not only which uid.
            runtime = holder.enter(prefix, runtimeCommand, ENV, Path.of("/"), logs.resolve("runtime.log"));
            List<String> supervisorCommand = new ArrayList<>(wrapper);
            supervisorCommand.add(supervisorLauncher.toString());
            supervisorCommand.addAll(supervisorArgs);
            supervisorCommand.addAll(List.of("--runtime-uid", Long.toString(ids.first()),
                    "--runtime-pid", Long.toString(runtime.pid())));
            Process supervisor = startHost(supervisorCommand, logs.resolve("supervisor.log"));
            return new Pair(holder, runtime, supervisor, channel, ids, cgroup);
        } catch (RuntimeException e) {
            if (runtime != null) {
                runtime.destroyForcibly();
            }
            if (holder != null) {
                holder.kill();
            }
            cgroup.ifPresent(ProcessDriver::removeQuietly);
            throw e;
        }
    }

    /** The processes of one launch, started and not yet given their bundles. */
    record Pair(NamespaceHolder holder, Process runtime, Process supervisor, Path channel, IdRange ids,
                Optional<SandboxCgroup> cgroup) {
        ProcessTopology topology(int slot) {
            return new ProcessTopology(channel, ids.first(), slot, holder.pid(), holder.started().toEpochMilli(),
                    supervisor.pid(), startMillis(supervisor.toHandle()), cgroup.map(SandboxCgroup::name));
        }

        boolean alive() {
            return holder.alive() && runtime.isAlive() && supervisor.isAlive();
        }

        /** Kills all of it and removes its cgroup: a launch that failed, or a spare nobody will take. */
        void discard() {
            supervisor.destroyForcibly();
            runtime.destroyForcibly();
            try {
                holder.kill();
            } finally {
                cgroup.ifPresent(ProcessDriver::removeQuietly);
            }
        }
    }

    /**
     * A warm spare: a holder, a runtime and a supervisor started before any sandbox asked for
     * them, each blocked reading its standard input, in a slot, run directory, log directory and
     * cgroup named after {@code name} ({@link #SPARE_PREFIX}).
     */
    record Spare(SandboxId name, int slot, Pair pair) {
    }

    /**
     * Starts a warm spare. Its launchers get {@code --late-arguments} instead of the sandbox, the
     * generation and the workspace, which {@link #claim} writes ahead of the bundles. Its topology
     * is written beside its logs, so a gateway that died with spares idle finds and removes them
     * ({@link #sweepSpares}).
     *
     * @return the spare
     * @throws DriverException as a launch would
     */
    Spare launchSpare() {
        SandboxId name = new SandboxId(SPARE_PREFIX + HexFormat.of().formatHex(randomBytes(6)));
        Path socket = socket(name);
        int bytes = socket.toString().getBytes(StandardCharsets.UTF_8).length;
        if (bytes > MAX_SOCKET_PATH_BYTES) {
            // A spare's name is longer than a sandbox id: its socket must fit too, or no spare is made.
            throw new DriverException(Kind.INVALID, "run.root " + runRoot + " is too long for a warm spare: its socket "
                    + socket + " would be " + bytes + " bytes, over the " + MAX_SOCKET_PATH_BYTES
                    + " a Unix socket address holds");
        }
        int slot = slots.take(name);
        Path run = runRoot.resolve(name.value());
        Path logs = spareDir(name);
        Pair pair = null;
        try {
            IdRange ids = IdRange.slot(slot);
            privateDirectory(logs);
            privateDirectory(run);
            chown(run, ids.first());
            Path channel = run.resolve(SOCKET_NAME);
            List<String> args = List.of("--channel", channel.toString(), "--bundle-stdin", SPARE_FLAG);
            List<String> nice = List.of(NamespaceHolder.hostTool("nice").toString(), "-n", Integer.toString(SPARE_NICENESS));
            pair = startPair(ids, channel, logs, SandboxCgroup.of(name), nice, args, args);
            // Written beside and renamed: a sweep never reads half a topology.
            Path written = logs.resolve(SPARE_TOPOLOGY + ".new");
            Files.write(written, pair.topology(slot).state());
            Files.move(written, logs.resolve(SPARE_TOPOLOGY), StandardCopyOption.ATOMIC_MOVE);
            return new Spare(name, slot, pair);
        } catch (IOException | RuntimeException e) {
            if (pair != null) {
                pair.discard();
            }
            removeQuietly(run);
            removeQuietly(logs);
            slots.release(slot, name);
            throw e instanceof DriverException d ? d
                    : new DriverException(Kind.FAILED, "cannot start a warm spare: " + e.getMessage(), e);
        }
    }

    /**
     * Gives a spare to a new sandbox: its logs become the sandbox's, its slot the sandbox's, and
     * the late arguments and bundles go to the two programs waiting for them.
     *
     * @return what to persist, or empty if the spare is gone or could not be given (it is then
     *         removed, and the create launches cold)
     */
    Optional<Provisioned> claim(Spare spare, SandboxId id, LaunchPlan plan) {
        Pair pair = spare.pair();
        Path state = stateDir(id);
        if (!pair.alive() || Files.exists(state)) {
            discard(spare);
            return Optional.empty();
        }
        try {
            Files.createDirectories(state.getParent());
            Files.move(spareDir(spare.name()), state, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            discard(spare);
            return Optional.empty();
        }
        boolean transferred = false;
        try {
            Files.deleteIfExists(state.resolve(SPARE_TOPOLOGY));
            slots.transfer(spare.slot(), spare.name(), id);
            transferred = true;
            String workspace = workspace(id, pair.ids(), plan);
            String generation = Long.toString(plan.runtimeGeneration());
            long unniced = System.nanoTime();
            unnice(pair);
            System.err.println("openshell process driver: warm spare " + spare.name() + " given to " + id
                    + " (reniced in " + (System.nanoTime() - unniced) / 1_000_000 + " ms)");
            feed(pair.runtime(), late(List.of("--sandbox", id.value(), "--generation", generation, "--workspace", workspace)),
                    plan.material().runtimeBundle(), "sandbox runtime");
            feed(pair.supervisor(), late(List.of("--sandbox", id.value(), "--generation", generation)),
                    plan.material().supervisorBundle(), "supervisor");
            awaitServing(pair.runtime(), state.resolve("runtime.log"));
            ProcessTopology t = pair.topology(spare.slot());
            return Optional.of(Provisioned.of(t.descriptor(), DialDirection.RUNTIME_INITIATED, t.state()));
        } catch (IOException | RuntimeException e) {
            boolean refused = e instanceof DriverException d && d.getMessage().startsWith(REFUSED);
            if (!refused) {
                System.err.println("openshell process driver: warm spare " + spare.name() + " could not be given to " + id
                        + " (" + e.getMessage() + "); launching it cold");
            }
            try {
                pair.discard();
            } finally {
                removeQuietly(pair.channel().getParent());
                removeQuietly(state);
                slots.release(spare.slot(), transferred ? id : spare.name());
            }
            if (refused) {
                // The launch itself cannot be honoured: a cold launch would be refused the same way.
                throw (DriverException) e;
            }
            return Optional.empty();
        }
    }

    /**
     * Puts every thread of a spare's processes (the supervisor, the runtime's wrapper and all it
     * started) back to niceness 0, passing again while threads started meanwhile inherited
     * {@link #SPARE_NICENESS}.
     *
     * @throws DriverException FAILED if some are still niced after {@link #MAX_RENICE_PASSES}
     */
    static void unnice(Pair pair) {
        List<String> niced = List.of();
        for (int pass = 0; pass < MAX_RENICE_PASSES; pass++) {
            List<ProcessHandle> processes = new ArrayList<>(List.of(pair.supervisor().toHandle(), pair.runtime().toHandle()));
            processes.addAll(pair.supervisor().toHandle().descendants().toList());
            processes.addAll(pair.runtime().toHandle().descendants().toList());
            niced = nicedThreads(processes);
            if (niced.isEmpty()) {
                return;
            }
            List<String> command = new ArrayList<>(List.of(NamespaceHolder.hostTool("renice").toString(), "--priority", "0", "-p"));
            command.addAll(niced);
            try {
                Process renice = new ProcessBuilder(command).redirectErrorStream(true)
                        .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
                renice.getOutputStream().close();
                renice.waitFor();
            } catch (IOException e) {
                throw new DriverException(Kind.FAILED, "cannot renice a warm spare: " + e.getMessage(), e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new DriverException(Kind.FAILED, "interrupted while renicing a warm spare", e);
            }
        }
        throw new DriverException(Kind.FAILED, "threads of a warm spare stayed niced after " + MAX_RENICE_PASSES
                + " passes: " + niced);
    }

    /** The thread ids, among these processes', whose niceness is not 0 (a thread that ended is skipped). */
    static List<String> nicedThreads(List<ProcessHandle> processes) {
        List<String> niced = new ArrayList<>();
        for (ProcessHandle p : processes) {
            try (java.util.stream.Stream<Path> tasks = Files.list(Path.of("/proc", Long.toString(p.pid()), "task"))) {
                for (Path task : tasks.toList()) {
                    try {
                        if (niceness(Files.readString(task.resolve("stat"), StandardCharsets.US_ASCII)) != 0) {
                            niced.add(task.getFileName().toString());
                        }
                    } catch (IOException ended) {
                        // the thread ended meanwhile
                    }
                }
            } catch (IOException ended) {
                // the process ended meanwhile
            }
        }
        return niced;
    }

    /** The niceness in a {@code /proc/<pid>/task/<tid>/stat} line: the 17th field after the command name's ')'. */
    static int niceness(String stat) throws IOException {
        String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        if (fields.length < 17) {
            throw new IOException("malformed stat line");
        }
        return Integer.parseInt(fields[16]);
    }

    /** @return whether both programs of an idle spare print that they wait for their sandbox */
    boolean spareWaiting(Spare spare) {
        return waiting(spareDir(spare.name()));
    }

    private static boolean waiting(Path logs) {
        return SparePool.printed(logs.resolve("runtime.log"), SparePool.WAITING)
                && SparePool.printed(logs.resolve("supervisor.log"), SparePool.WAITING);
    }

    /** Removes a spare nobody took: its processes, cgroup, run and log directories, and slot. */
    void discard(Spare spare) {
        try {
            spare.pair().discard();
        } finally {
            removeQuietly(spare.pair().channel().getParent());
            removeQuietly(spareDir(spare.name()));
            slots.release(spare.slot(), spare.name());
        }
    }

    /**
     * Removes what sandboxes of a gateway whose state root is gone left on this host: their
     * processes (every one in a user namespace mapped to the slot's id range), cgroup, run
     * directory and slot. Nobody else can: their driver state went with the state root. A
     * workspace is data and stays where it is. Runs when the driver starts, before it takes a
     * slot; a slot whose processes cannot be ended keeps its range taken.
     *
     * @return the slots freed
     */
    int sweepAbandoned() {
        int freed = 0;
        for (SlotAllocator.Abandoned a : slots.abandoned()) {
            try {
                killMappedTo(IdRange.slot(a.slot()));
                SandboxCgroup.of(a.owner()).ifPresent(ProcessDriver::removeQuietly);
                removeQuietly(runRoot.resolve(a.owner().value()));
                slots.releaseAbandoned(a);
                freed++;
                System.err.println("openshell process driver: removed sandbox " + a.owner() + " (id range slot " + a.slot()
                        + ") whose gateway state is gone");
            } catch (RuntimeException e) {
                System.err.println("openshell process driver: cannot remove abandoned sandbox " + a.owner() + " (id range slot "
                        + a.slot() + "): " + e.getMessage() + "; its id range stays taken");
            }
        }
        return freed;
    }

    /**
     * Removes the spares a gateway with this state root left idle when it died: their topology
     * names their holder and supervisor (matched by start time, as for sandboxes).
     *
     * @return how many were found
     */
    int sweepSpares() {
        Path spares = stateRoot.resolve(SPARES);
        if (!Files.isDirectory(spares)) {
            return 0;
        }
        int found = 0;
        try (java.util.stream.Stream<Path> dirs = Files.list(spares)) {
            for (Path dir : dirs.toList()) {
                String name = dir.getFileName().toString();
                if (!name.startsWith(SPARE_PREFIX)) {
                    continue;
                }
                found++;
                try {
                    sweepSpare(dir, new SandboxId(name));
                } catch (RuntimeException e) {
                    // One spare that cannot be removed must not keep the driver, and its gateway, from starting.
                    System.err.println("openshell process driver: cannot remove left warm spare " + name + ": " + e.getMessage());
                }
            }
        } catch (IOException e) {
            throw new DriverException(Kind.FAILED, "cannot sweep the spares in " + spares + ": " + e.getMessage(), e);
        }
        return found;
    }

    /**
     * Removes one left spare: its processes, cgroup, run and log directories, and slot. Its
     * topology names its holder and supervisor; without one (never written, or unreadable) every
     * process in a user namespace mapped to the spare's id ranges is killed, which takes the
     * holder and the runtime. Its supervisor, a host process, ends on its own when the standard
     * input the dead gateway held reaches its end.
     */
    private void sweepSpare(Path dir, SandboxId spare) {
        boolean killed = false;
        try {
            killed = killSpare(dir.resolve(SPARE_TOPOLOGY));
        } catch (IOException | RuntimeException e) {
            System.err.println("openshell process driver: left warm spare " + spare
                    + " has an unreadable topology (" + e.getMessage() + "); removing it by its id range");
        }
        if (!killed) {
            for (int slot : slots.held(spare)) {
                killMappedTo(IdRange.slot(slot));
            }
        }
        SandboxCgroup.of(spare).ifPresent(ProcessDriver::removeQuietly);
        removeQuietly(runRoot.resolve(spare.value()));
        remove(dir);
        slots.releaseAll(spare);
    }

    /**
     * Kills every process whose user namespace maps id 0 to {@code ids}: only that range's
     * sandbox (or spare) can have one, as ranges never overlap and a nested namespace maps into
     * its parent's range.
     *
     * Each is waited for, at most {@link NamespaceHolder#KILL_TIMEOUT} in all.
     */
    static void killMappedTo(IdRange ids) {
        List<ProcessHandle> killed = new ArrayList<>();
        try (java.util.stream.Stream<Path> procs = Files.list(Path.of("/proc"))) {
            for (Path proc : procs.toList()) {
                String name = proc.getFileName().toString();
                if (!name.chars().allMatch(Character::isDigit)) {
                    continue;
                }
                try {
                    String[] first = Files.readString(proc.resolve("uid_map"), StandardCharsets.US_ASCII)
                            .lines().findFirst().orElse("").trim().split("\\s+");
                    if (first.length == 3 && first[0].equals("0") && first[1].equals(Long.toString(ids.first()))
                            && !NamespaceHolder.ended(Long.parseLong(name))) {
                        ProcessHandle.of(Long.parseLong(name)).filter(ProcessHandle::destroyForcibly).ifPresent(killed::add);
                    }
                } catch (IOException | NumberFormatException ended) {
                    // the process ended meanwhile
                }
            }
        } catch (IOException e) {
            throw new DriverException(Kind.FAILED, "cannot list /proc: " + e.getMessage(), e);
        }
        long deadline = System.nanoTime() + NamespaceHolder.KILL_TIMEOUT.toNanos();
        for (ProcessHandle p : killed) {
            if (!NamespaceHolder.awaitEnded(p, deadline)) {
                throw new DriverException(Kind.FAILED, "process " + p.pid() + " in id range " + ids.first()
                        + " did not end within " + NamespaceHolder.KILL_TIMEOUT);
            }
        }
    }

    /**
     * Kills the supervisor and holder a left spare's topology file names (the holder takes its
     * whole pid namespace with it).
     *
     * @return false if it has no topology file
     */
    private boolean killSpare(Path topology) throws IOException {
        if (!Files.exists(topology)) {
            return false;
        }
        ProcessTopology t = ProcessTopology.fromState(Files.readAllBytes(topology));
        killSupervisor(t);
        holder(t).ifPresent(NamespaceHolder::kill);
        return true;
    }

    private Path spareDir(SandboxId name) {
        return stateRoot.resolve(SPARES).resolve(name.value());
    }

    /** The late arguments as {@link #SPARE_FLAG} reads them: NUL after each, and an empty one last. */
    static byte[] late(List<String> arguments) {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        for (String a : arguments) {
            byte[] bytes = a.getBytes(StandardCharsets.UTF_8);
            for (byte b : bytes) {
                if (b == 0) {
                    throw new DriverException(Kind.INVALID, "a launch argument holds a NUL byte");
                }
            }
            out.writeBytes(bytes);
            out.write(0);
        }
        out.write(0);
        return out.toByteArray();
    }

    private static byte[] randomBytes(int n) {
        byte[] b = new byte[n];
        RANDOM.nextBytes(b);
        return b;
    }

    private String workspace(SandboxId id, IdRange ids, LaunchPlan plan) {
        return Optional.ofNullable(plan.options().get("workspace")).orElseGet(() -> freshWorkspace(id, ids, plan).toString());
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

    /**
     * Waits until the runtime serves, or refuses the launch (it exits naming what it cannot
     * honour, for example the policy's Landlock hard requirement or its run_as_user).
     *
     * @throws DriverException INVALID with the runtime's reason if it exited; FAILED if it said
     *                         nothing within {@link #RUNTIME_VERDICT_WAIT}
     */
    static void awaitServing(Process runtime, Path log) {
        long deadline = System.nanoTime() + RUNTIME_VERDICT_WAIT.toNanos();
        while (true) {
            String text = head(log);
            if (text.contains(RUNTIME_SERVING)) {
                return;
            }
            if (!runtime.isAlive()) {
                text = head(log);
                if (text.contains(RUNTIME_SERVING)) {
                    return;
                }
                int at = text.lastIndexOf(RUNTIME_REFUSAL);
                String why = at >= 0 ? text.substring(at + RUNTIME_REFUSAL.length()).lines().findFirst().orElse("")
                        : "it exited with " + runtime.exitValue() + " before serving";
                throw new DriverException(Kind.INVALID, REFUSED + why);
            }
            if (System.nanoTime() - deadline > 0) {
                throw new DriverException(Kind.FAILED, "the sandbox runtime neither served nor refused within "
                        + RUNTIME_VERDICT_WAIT + " (" + log + ")");
            }
            try {
                Thread.sleep(RUNTIME_VERDICT_POLL);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new DriverException(Kind.FAILED, "interrupted while waiting for the sandbox runtime", e);
            }
        }
    }

    /**
     * What the runtime said when the policy allowed a weaker confinement than the sandbox targets
     * (landlock best_effort on a kernel that cannot enforce it all): part of every status, never silent.
     */
    private String confinementWarning(SandboxId id) {
        String text = head(stateDir(id).resolve("runtime.log"));
        int at = text.indexOf(CONFINEMENT_WARNING);
        return at < 0 ? "" : "; " + text.substring(at + CONFINEMENT_WARNING.length()).lines().findFirst().orElse("");
    }

    /** The start of a log, as far as {@link SparePool#MAX_LOG_READ}; empty if it cannot be read. */
    private static String head(Path log) {
        try (java.io.InputStream in = Files.newInputStream(log)) {
            return new String(in.readNBytes(SparePool.MAX_LOG_READ), StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "";
        }
    }

    private void checkOptions(LaunchPlan plan) {
        int uid = plan.context().workload().uid();
        int gid = plan.context().workload().gid();
        if (uid >= IdRange.SIZE || gid >= IdRange.SIZE) {
            // Ids inside the sandbox are 0..SIZE-1 mapped to its private host range: another id does not exist there.
            throw new DriverException(Kind.INVALID, "the workload's " + (uid >= IdRange.SIZE ? "uid " + uid : "gid " + gid)
                    + " (process.run_as_user / run_as_group) cannot be honoured by the process driver: each sandbox maps"
                    + " only ids 0-" + (IdRange.SIZE - 1) + " to its own host range; nothing was created");
        }
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

    /**
     * Writes the late arguments (none for a cold launch) and the launch bundle to the program's
     * stdin and closes it: the only way secrets reach it.
     */
    private static void feed(Process p, byte[] late, byte[] bundle, String what) {
        try (OutputStream in = p.getOutputStream()) {
            in.write(late);
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
            if (!NamespaceHolder.awaitEnded(h, System.nanoTime() + SUPERVISOR_KILL_TIMEOUT.toNanos())) {
                throw new DriverException(Kind.FAILED, "the supervisor (pid " + t.supervisorPid()
                        + ") survived SIGKILL for " + SUPERVISOR_KILL_TIMEOUT);
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

    private static void removeQuietly(SandboxCgroup cgroup) {
        try {
            cgroup.remove();
        } catch (DriverException ignored) {
            // Best effort while undoing a failed launch; the original failure is what matters.
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
