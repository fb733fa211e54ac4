package openshell.sandbox;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import openshell.isolation.BackendException;
import openshell.isolation.TerminalSize;
import openshell.linux.Cgroup;
import openshell.linux.LaunchPlan;
import openshell.linux.LaunchResult;
import openshell.linux.LauncherProcess;
import openshell.linux.LinuxException;
import openshell.linux.OwnedFd;
import openshell.linux.Pidfd;
import openshell.linux.ProcessControl;
import openshell.linux.Pty;

/**
 * The workload's process tree, owned by the runtime: every workload process starts through a
 * launcher of its own (the native {@code openshell-launcher}, started for it), is
 * moved into the workload's cgroup v2 leaf before it receives its plan (so every descendant,
 * double-forked or not, is in it), and has its seccomp listener served by the broker before it
 * may run. Terminating kills the whole leaf ({@code cgroup.kill}). The runtime is a child
 * subreaper, and reaps orphans that are not its own launches.
 *
 * <p>No launcher is started ahead of time: the native launcher starts in about a millisecond and
 * an idle one would only hold memory. (The launcher JVM it replaced needed ~0.4 s of CPU, so a
 * spare was kept ready; see tests/perf/README.md.)
 */
final class ProcessTree implements AutoCloseable {
    /** Longest wait for a launcher to report each step. */
    static final Duration LAUNCH_WAIT = Duration.ofSeconds(60);
    /** Longest wait for the cgroup to empty after {@code cgroup.kill}. */
    static final Duration KILL_WAIT = Duration.ofSeconds(10);
    /** Most bytes of a dead launcher's stderr put into the launch failure and the audit line. */
    static final int MAX_LAST_WORDS = 2048;
    /** First wait before the reaper looks again while an ended child is one of our launches (its watcher reaps it). */
    static final Duration REAP_RETRY = Duration.ofMillis(20);
    /** Longest such wait. */
    static final Duration REAP_INTERVAL = Duration.ofMillis(200);
    /** Everything about a workload process except what the caller chooses. */
    interface PlanTemplate extends Function<LaunchRequest, LaunchPlan> {
        /** @return what every process gets (identity, Landlock), for the confirmation evidence */
        default String describe() {
            return "per-process plan";
        }
    }

    /**
     * What a caller chooses for one process.
     *
     * @param argv        argv, argv[0] absolute or found on PATH by the template
     * @param environment NAME=value entries
     * @param directory   working directory
     * @param terminal    a terminal of this size, or pipes
     */
    record LaunchRequest(List<String> argv, List<String> environment, String directory, Optional<TerminalSize> terminal) {
    }

    private final LauncherProcess.Command command;
    private final PlanTemplate template;
    private final NetworkBroker broker;
    /** Where the workload's leaf comes from; made at the first launch (see {@link #cgroup()}). */
    private final java.util.function.Supplier<Enclosure> cgroupSource;
    private volatile Enclosure cgroup;
    private final WorkloadNetwork network;
    private final Set<Integer> launched = ConcurrentHashMap.newKeySet();
    private final java.util.concurrent.atomic.AtomicLong processLeaves = new java.util.concurrent.atomic.AtomicLong();
    private final Map<Integer, WorkloadProcess> processes = new ConcurrentHashMap<>();
    private volatile boolean terminated;
    private volatile boolean closed;
    /** Released at each launch: a reaper that found no children at all waits for one. */
    private final java.util.concurrent.Semaphore spawned = new java.util.concurrent.Semaphore(0);
    private final Object launching = new Object();
    private final Thread reaper;

    /** A launcher just started, with the pipes it will hand its target. */
    private record Started(LauncherProcess launcher, OwnedFd stdin, OwnedFd stdout, OwnedFd stderr) {
    }

    /** @return what every workload process gets, as the template says */
    String confinement() {
        return template.describe();
    }

    ProcessTree(LauncherProcess.Command command, PlanTemplate template, NetworkBroker broker, Cgroup cgroup) {
        this(command, template, broker, () -> Enclosure.of(cgroup));
        this.cgroup = Enclosure.of(cgroup);
    }

    /**
     * With the workload's leaf made at the first launch: a runtime where none can be made (a
     * container without a writable cgroup v2) still serves, and every launch fails with the
     * source's reason instead of running a process it could not kill with its whole tree.
     */
    ProcessTree(LauncherProcess.Command command, PlanTemplate template, NetworkBroker broker,
                java.util.function.Supplier<Enclosure> cgroupSource) {
        this.command = command;
        this.template = template;
        this.broker = broker;
        this.cgroupSource = cgroupSource;
        this.network = broker.network();
        ProcessControl.setChildSubreaper(true);
        this.reaper = Thread.ofPlatform().daemon(true).name("orphan-reaper").start(this::reapOrphans);
    }

    /** @return the cgroup v2 leaf for a workload, under the first writable cgroup2 mount */
    static Cgroup leaf(String name) {
        Path root = Cgroup.v2Root().orElseThrow(() -> new BackendException(BackendException.Kind.UNAVAILABLE,
                "cgroup v2 is not mounted: the runtime cannot guarantee to kill a whole process tree"));
        return Cgroup.create(root, name);
    }

    private Started startWithPipes() {
        List<OwnedFd> in = OwnedFd.pipe();
        List<OwnedFd> out = OwnedFd.pipe();
        List<OwnedFd> err = OwnedFd.pipe();
        try (OwnedFd childIn = in.get(0); OwnedFd childOut = out.get(1); OwnedFd childErr = err.get(1)) {
            LauncherProcess launcher = spawn(new LauncherProcess.Stdio(childIn.value(), childOut.value(), childErr.value(), false));
            return new Started(launcher, in.get(1), out.get(0), err.get(0));
        }
    }

    /** @return the workload's leaf, made now if it was not yet (throws the source's reason) */
    private Enclosure cgroup() {
        Enclosure c = cgroup;
        if (c == null) {
            synchronized (cgroupSource) {
                c = cgroup;
                if (c == null) {
                    c = cgroupSource.get();
                    cgroup = c;
                }
            }
        }
        return c;
    }

    private LauncherProcess spawn(LauncherProcess.Stdio stdio) {
        Enclosure leaf = cgroup();
        // Spawned from the namespace thread (if any), so the launcher starts in the workload's namespaces.
        LauncherProcess launcher;
        // The reaper decides whose an ended child is under the same lock: a launcher that died at
        // once is ours (its launch reports why), never an orphan to reap before we knew its pid.
        synchronized (launching) {
            launcher = network.run(() -> LauncherProcess.start(command, stdio));
            launched.add(launcher.process().pid());
        }
        spawned.release();
        try {
            leaf.move(launcher.process().pid());
        } catch (LinuxException e) {
            launcher.kill();
            launcher.close();
            throw e;
        }
        return launcher;
    }

    /**
     * Starts a workload process.
     *
     * @param request what to run
     * @return the running process
     * @throws BackendException TERMINATED after {@link #terminateAll}; FAILED if a launch step failed
     */
    WorkloadProcess start(LaunchRequest request) {
        if (terminated) {
            throw new BackendException(BackendException.Kind.TERMINATED, "the workload was terminated");
        }
        LaunchPlan plan = template.apply(request);
        LauncherProcess launcher;
        OwnedFd stdin;
        OwnedFd stdout;
        Optional<OwnedFd> stderr;
        Optional<Pty> pty = Optional.empty();
        if (request.terminal().isPresent()) {
            Pty terminal = Pty.open();
            TerminalSize size = request.terminal().get();
            terminal.resize(new Pty.WindowSize(size.rows(), size.columns()));
            launcher = spawn(new LauncherProcess.Stdio(terminal.slave().value(), terminal.slave().value(),
                    terminal.slave().value(), true));
            terminal.slave().close();
            pty = Optional.of(terminal);
            stdin = terminal.master();
            stdout = terminal.master();
            stderr = Optional.empty();
        } else {
            Started taken = startWithPipes();
            launcher = taken.launcher();
            stdin = taken.stdin();
            stdout = taken.stdout();
            stderr = Optional.of(taken.stderr());
        }
        // Its own leaf under the workload's, before it runs anything: terminate() of this process
        // kills exactly its tree (double forks and setsid included), the workload's leaf all of them.
        Enclosure own;
        try {
            own = cgroup().child("p" + processLeaves.incrementAndGet());
            own.move(launcher.process().pid());
        } catch (LinuxException e) {
            abandon(launcher, stdin, stdout, stderr, pty);
            throw new BackendException(BackendException.Kind.FAILED, "cannot give the process its own cgroup: " + e.getMessage());
        }
        LaunchResult result = launcher.sendPlan(plan, LAUNCH_WAIT);
        if (!(result instanceof LaunchResult.Ready r)) {
            // A launcher gone before its plan may have said why on its stderr.
            String said = result instanceof LaunchResult.Failed f && f.step() == openshell.linux.LaunchStep.PLAN
                    ? stderr.map(ProcessTree::lastWords).filter(w -> !w.isEmpty()).map(w -> "; the launcher wrote: " + w)
                            .orElse("")
                    : "";
            abandon(launcher, stdin, stdout, stderr, pty);
            throw new BackendException(BackendException.Kind.FAILED, "launch failed: " + result + said);
        }
        if (!r.landlock().complete() && plan.landlock() == LaunchPlan.Mode.REQUIRED) {
            r.listener().close();
            abandon(launcher, stdin, stdout, stderr, pty);
            throw new BackendException(BackendException.Kind.FAILED, "Landlock incomplete: " + r.landlock());
        }
        broker.serve(r.listener());
        LaunchResult started = launcher.acknowledge(LAUNCH_WAIT);
        if (!(started instanceof LaunchResult.Started)) {
            abandon(launcher, stdin, stdout, stderr, pty);
            throw new BackendException(BackendException.Kind.FAILED, "exec failed: " + started);
        }
        WorkloadProcess process = new WorkloadProcess(own, launcher.process(), stdin, stdout, stderr, pty);
        processes.put(process.pid(), process);
        process.watch();
        // Reaped by its watcher once the future completes: the pid may come back as someone else's.
        int pid = process.pid();
        process.exitFuture().whenComplete((status, failure) -> launched.remove(pid));
        if (terminated) {
            terminateAll();
        }
        return process;
    }

    /** A launch that failed: its launcher killed and reaped (the target never ran), our ends of its stdio closed. */
    private static void abandon(LauncherProcess launcher, OwnedFd stdin, OwnedFd stdout, Optional<OwnedFd> stderr,
                                Optional<Pty> pty) {
        try {
            launcher.kill();
            launcher.process().awaitExit(KILL_WAIT);
        } catch (LinuxException e) {
            NetworkBroker.audit("launcher", "not-reaped", e.getMessage());
        }
        launcher.close();
        if (pty.isPresent()) {
            pty.get().close();
        } else {
            stdin.close();
            stdout.close();
            stderr.ifPresent(OwnedFd::close);
        }
    }

    /**
     * What a dead launcher left on its stderr pipe, at most {@link #MAX_LAST_WORDS} bytes, without
     * waiting for more than a moment (nothing else holds the pipe's write end once it is gone).
     */
    static String lastWords(OwnedFd stderr) {
        byte[] buffer = new byte[MAX_LAST_WORDS];
        int n;
        try {
            n = stderr.read(buffer, Duration.ofMillis(100));
        } catch (openshell.linux.LinuxException e) {
            return "";
        }
        return n <= 0 ? "" : new String(buffer, 0, n, java.nio.charset.StandardCharsets.UTF_8).strip();
    }

    /** Kills every workload process, however it was started or re-parented. Idempotent. */
    void terminateAll() {
        terminated = true;
        processes.values().forEach(WorkloadProcess::killedWithTheTree);
        Enclosure leaf = cgroup;
        if (leaf == null) {
            return; // nothing was ever launched
        }
        leaf.killAll();
        long deadline = System.nanoTime() + KILL_WAIT.toNanos();
        while (leaf.populated() && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
    }

    boolean isTerminated() {
        return terminated;
    }

    /** @return the pids in the workload's cgroup and every process's leaf below it */
    List<Integer> members() {
        Enclosure leaf = cgroup;
        List<Integer> pids = leaf == null ? new ArrayList<>() : new ArrayList<>(leaf.members());
        for (WorkloadProcess p : processes.values()) {
            pids.addAll(p.members());
        }
        return pids;
    }

    /**
     * Reaps orphans: blocks in {@code waitid(WNOWAIT)} until some child has ended, so an idle
     * runtime makes no wake-ups (the {@code /proc} walk it replaced ran five times a second).
     * A child of our own launches is left to its watcher; while such a zombie waits for it, the
     * reaper looks again after {@link #REAP_RETRY}, doubling up to {@link #REAP_INTERVAL}.
     */
    private void reapOrphans() {
        Duration retry = REAP_RETRY;
        while (!closed) {
            spawned.drainPermits();
            java.util.OptionalInt ended;
            try {
                ended = ProcessControl.awaitEndedChild();
            } catch (LinuxException e) {
                NetworkBroker.audit("reaper", "stopped", e.getMessage());
                return;
            }
            if (closed) {
                return;
            }
            try {
                if (ended.isEmpty()) {
                    // No children at all: nothing can be orphaned to us before the next launch.
                    spawned.acquire();
                    continue;
                }
                int pid = ended.getAsInt();
                boolean ours;
                synchronized (launching) {
                    ours = launched.contains(pid);
                }
                if (ours) {
                    Thread.sleep(retry);
                    retry = retry.multipliedBy(2).compareTo(REAP_INTERVAL) > 0 ? REAP_INTERVAL : retry.multipliedBy(2);
                    continue;
                }
                retry = REAP_RETRY;
                try (Pidfd orphan = Pidfd.open(pid)) {
                    orphan.awaitExit(Duration.ZERO);
                } catch (LinuxException e) {
                    // Reaped by someone else meanwhile: nothing to do.
                }
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    @Override
    public void close() {
        closed = true;
        terminateAll();
        // A reaper blocked in waitid wakes at the next child's end and sees closed; one waiting for a launch wakes now.
        reaper.interrupt();
        spawned.release();
        for (WorkloadProcess p : processes.values()) {
            p.close();
            p.removeLeaf();
        }
        try {
            if (cgroup != null) {
                cgroup.remove();
            }
        } catch (LinuxException e) {
            NetworkBroker.audit("cgroup", "not-removed", e.getMessage());
        }
    }
}
