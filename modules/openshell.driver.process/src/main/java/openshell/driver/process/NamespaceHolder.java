package openshell.driver.process;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;

/**
 * PID 1 of a sandbox's fresh namespaces, started by util-linux {@code unshare} and given its id
 * maps from outside. Everything of the sandbox is started inside with {@link #enter}, and
 * {@link #kill()} takes it all down: when a pid namespace's init dies, the kernel kills every
 * other process in it, double-forked and setsid'd ones included.
 *
 * <p>The holder is addressed by pid and start time together, never by pid alone, so a recycled
 * pid is never mistaken for it after a gateway restart.
 */
final class NamespaceHolder {
    /** How long the namespaces may take to appear. */
    static final Duration READY_TIMEOUT = Duration.ofSeconds(10);
    /** How long the kernel may take to empty the pid namespace after the holder is killed. */
    static final Duration KILL_TIMEOUT = Duration.ofSeconds(10);
    /**
     * How far two readings of one process's start may differ and still name the same process.
     * The JDK derives a start instant from the boot time in {@code /proc/stat}, read once per JVM
     * in whole seconds, and the kernel moves that boot time as the wall clock is adjusted (by a
     * second in 13 hours on the CI machine): a sandbox recorded by one JVM looked dead to a later
     * one, and its stop would have left it running. A recycled pid within this slack of the
     * original's start would need the pid space to wrap in that time.
     */
    static final Duration START_SLACK = Duration.ofSeconds(2);
    private static final List<String> NAMESPACES = List.of("user", "net", "mnt", "pid", "ipc", "uts");

    private final long pid;
    private final Instant started;
    private final IdRange ids;

    private NamespaceHolder(long pid, Instant started, IdRange ids) {
        this.pid = pid;
        this.started = started;
        this.ids = ids;
    }

    /**
     * Makes fresh namespaces and maps their ids.
     *
     * @param ids the sandbox's host id range
     * @return the holder
     * @throws DriverException UNAVAILABLE if the host cannot make the namespaces (the message names
     *                         what is missing); FAILED otherwise, with nothing left running
     */
    static NamespaceHolder create(IdRange ids) {
        Path unshare = hostTool("unshare");
        Process launcher;
        try {
            // The holder does nothing but exist; it has no capabilities after exec (unmapped uid).
            launcher = new ProcessBuilder(unshare.toString(), "--user", "--net", "--mount", "--pid", "--ipc",
                    "--uts", "--fork", "--kill-child=SIGKILL", "--propagation", "private", "--mount-proc",
                    "--", "/bin/sleep", "infinity")
                    .redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile()))
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .redirectError(ProcessBuilder.Redirect.PIPE)
                    .start();
        } catch (IOException e) {
            throw new DriverException(Kind.UNAVAILABLE, "cannot run " + unshare + ": " + e.getMessage(), e);
        }
        try {
            ProcessHandle holder = awaitHolder(launcher);
            writeMaps(holder.pid(), ids);
            return new NamespaceHolder(holder.pid(), holder.info().startInstant().orElseThrow(), ids);
        } catch (RuntimeException e) {
            launcher.destroyForcibly();
            throw e;
        }
    }

    private static ProcessHandle awaitHolder(Process launcher) {
        Instant deadline = Instant.now().plus(READY_TIMEOUT);
        String ownPidNs = namespace(ProcessHandle.current().pid(), "pid").orElseThrow();
        while (Instant.now().isBefore(deadline)) {
            if (!launcher.isAlive()) {
                String err = readAll(launcher);
                throw new DriverException(Kind.UNAVAILABLE, "cannot create the sandbox namespaces (user, net, mount,"
                        + " pid, ipc, uts): " + err.strip() + ". The process driver needs root, or unprivileged"
                        + " user namespaces (sysctl kernel.unprivileged_userns_clone=1).");
            }
            Optional<ProcessHandle> child = launcher.children().findFirst();
            if (child.isPresent()) {
                Optional<String> ns = namespace(child.get().pid(), "pid");
                // The child of unshare --fork is in the new pid namespace once it runs.
                if (ns.isPresent() && !ns.get().equals(ownPidNs) && child.get().info().command()
                        .map(c -> c.endsWith("sleep")).orElse(false)) {
                    return child.get();
                }
            }
            pause();
        }
        throw new DriverException(Kind.FAILED, "sandbox namespaces did not appear within " + READY_TIMEOUT);
    }

    private static void writeMaps(long pid, IdRange ids) {
        try {
            Files.writeString(Path.of("/proc", Long.toString(pid), "uid_map"), ids.mapLine());
            Files.writeString(Path.of("/proc", Long.toString(pid), "gid_map"), ids.mapLine());
        } catch (IOException e) {
            throw new DriverException(Kind.UNAVAILABLE, "cannot map the sandbox's ids " + ids.mapLine().strip()
                    + " (the process driver needs root for a private id range): " + e.getMessage(), e);
        }
    }

    /**
     * Starts a program inside every namespace of the sandbox, as the namespace's root.
     *
     * @param command     program and arguments
     * @param environment the complete environment (nothing is inherited from the gateway)
     * @param directory   working directory (a path in the sandbox's mount namespace)
     * @return the started process (a child of {@code nsenter}, which waits for it)
     */
    Process enter(List<String> command, Map<String, String> environment, Path directory) {
        return enter(command, environment, directory, null);
    }

    /**
     * Like {@link #enter(List, Map, Path)}, with stdout and stderr appended to a log file.
     *
     * @param command     program and arguments
     * @param environment the complete environment
     * @param directory   working directory
     * @param log         where output goes, or null for pipes
     * @return the started process; its stdin is a pipe
     */
    Process enter(List<String> command, Map<String, String> environment, Path directory, Path log) {
        return enter(List.of(), command, environment, directory, log);
    }

    /**
     * Like {@link #enter(List, Map, Path, Path)}, with a host-side command in front of
     * {@code nsenter} (it must exec its arguments), e.g. one that enters a cgroup first.
     *
     * @param prefix      host-side wrapper, may be empty
     * @param command     program and arguments
     * @param environment the complete environment
     * @param directory   working directory
     * @param log         where output goes, or null for pipes
     * @return the started process; its stdin is a pipe
     */
    Process enter(List<String> prefix, List<String> command, Map<String, String> environment, Path directory, Path log) {
        checkAlive();
        List<String> argv = new ArrayList<>(prefix);
        argv.addAll(List.of(hostTool("nsenter").toString(), "--target", Long.toString(pid),
                "--user", "--net", "--mount", "--pid", "--ipc", "--uts", "--wd=" + directory, "--"));
        argv.addAll(command);
        ProcessBuilder pb = new ProcessBuilder(argv);
        pb.environment().clear();
        pb.environment().putAll(environment);
        if (log != null) {
            pb.redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
        }
        try {
            return pb.start();
        } catch (IOException e) {
            throw new DriverException(Kind.FAILED, "cannot start " + command.getFirst() + " in the sandbox: "
                    + e.getMessage(), e);
        }
    }

    /**
     * The holder of an earlier launch, found again after a gateway restart: same pid, same start.
     *
     * @param pid     the holder's host pid
     * @param started its start time
     * @param ids     its id range
     * @return the holder if it still runs
     */
    static Optional<NamespaceHolder> adopt(long pid, Instant started, IdRange ids) {
        NamespaceHolder h = new NamespaceHolder(pid, started, ids);
        return h.alive() ? Optional.of(h) : Optional.empty();
    }

    /**
     * @param recorded a start instant recorded earlier, perhaps by another JVM
     * @param now      the start instant read now
     * @return whether they are one process's start, within {@link #START_SLACK}
     */
    static boolean sameStart(Instant recorded, Instant now) {
        return Duration.between(recorded, now).abs().compareTo(START_SLACK) <= 0;
    }

    /** @return whether the holder (and so the sandbox's namespaces) still exists */
    boolean alive() {
        return ProcessHandle.of(pid).filter(ProcessHandle::isAlive).filter(h -> !ended(h.pid()))
                .flatMap(h -> h.info().startInstant()).map(now -> sameStart(started, now)).orElse(false);
    }

    /**
     * Kills every process of the sandbox and waits until the pid namespace is empty.
     *
     * @throws DriverException FAILED if processes remain after {@link #KILL_TIMEOUT}
     */
    void kill() {
        Optional<String> pidNs = namespace(pid, "pid");
        ProcessHandle.of(pid).filter(h -> alive()).ifPresent(h -> {
            ProcessHandle parent = h.parent().orElse(null);
            h.destroyForcibly();
            if (parent != null && parent.info().command().map(c -> c.endsWith("unshare")).orElse(false)) {
                parent.destroyForcibly();
            }
        });
        if (pidNs.isEmpty()) {
            return;
        }
        Instant deadline = Instant.now().plus(KILL_TIMEOUT);
        while (!members(pidNs.get()).isEmpty()) {
            if (Instant.now().isAfter(deadline)) {
                throw new DriverException(Kind.FAILED, "processes of the sandbox survived " + KILL_TIMEOUT + ": "
                        + members(pidNs.get()));
            }
            pause();
        }
    }

    /** @return the host pids of every process in the sandbox's pid namespace */
    List<Long> processes() {
        return namespace(pid, "pid").map(NamespaceHolder::members).orElse(List.of());
    }

    /** @return the namespace identities ({@code net:[4026…]}) of the sandbox, by type */
    Map<String, String> namespaces() {
        checkAlive();
        java.util.TreeMap<String, String> out = new java.util.TreeMap<>();
        for (String type : NAMESPACES) {
            out.put(type, namespace(pid, type).orElseThrow(() -> new DriverException(Kind.FAILED,
                    "cannot read the sandbox's " + type + " namespace")));
        }
        return out;
    }

    long pid() {
        return pid;
    }

    Instant started() {
        return started;
    }

    IdRange ids() {
        return ids;
    }

    private void checkAlive() {
        if (!alive()) {
            throw new DriverException(Kind.NOT_FOUND, "the sandbox's namespaces are gone (holder pid " + pid + ")");
        }
    }

    private static List<Long> members(String pidNamespace) {
        List<Long> found = new ArrayList<>();
        ProcessHandle.allProcesses().forEach(p -> {
            if (namespace(p.pid(), "pid").filter(pidNamespace::equals).isPresent() && p.isAlive() && !ended(p.pid())) {
                found.add(p.pid());
            }
        });
        return found;
    }

    /**
     * Whether a process has ended: gone, or a zombie its parent has not reaped yet. A zombie runs
     * nothing and holds nothing but its pid, yet the JDK counts it alive. The holder, the pid
     * namespace's init, stays one until whoever adopted it reaps it: a host's init may take its
     * time (this machine's took ~1 s), and every stop waited for it.
     */
    static boolean ended(long pid) {
        try {
            return endedState(Files.readAllBytes(Path.of("/proc", Long.toString(pid), "stat")));
        } catch (IOException e) {
            return true;
        }
    }

    /**
     * Waits until a killed process has ended ({@link #ended}, or its pid now names a newer
     * process). Unlike {@link ProcessHandle#onExit()}, it does not wait for a zombie to be
     * reaped, nor poll a process that is not this JVM's child every 300 ms or more.
     *
     * @return false if it had not ended by {@code deadline} ({@link System#nanoTime()})
     */
    static boolean awaitEnded(ProcessHandle process, long deadline) {
        while (process.isAlive() && !ended(process.pid())) {
            if (System.nanoTime() - deadline > 0) {
                return false;
            }
            pause();
        }
        return true;
    }

    /**
     * From a {@code /proc/<pid>/stat} line: whether its state (the field after the command name's
     * last ')', which the name itself cannot fake) is zombie or dead. A line that cannot be parsed
     * counts as running: the caller keeps waiting, within its own bound.
     */
    static boolean endedState(byte[] stat) {
        for (int i = stat.length - 1; i >= 0; i--) {
            if (stat[i] == ')') {
                if (i + 2 >= stat.length || stat[i + 1] != ' ') {
                    return false;
                }
                return stat[i + 2] == 'Z' || stat[i + 2] == 'X';
            }
        }
        return false;
    }

    static Optional<String> namespace(long pid, String type) {
        try {
            return Optional.of(Files.readSymbolicLink(Path.of("/proc", Long.toString(pid), "ns", type)).toString());
        } catch (IOException e) {
            return Optional.empty();
        }
    }

    static Path hostTool(String name) {
        for (String dir : List.of("/usr/bin", "/bin", "/usr/sbin", "/sbin")) {
            Path p = Path.of(dir, name);
            if (Files.isExecutable(p)) {
                return p;
            }
        }
        throw new DriverException(Kind.UNAVAILABLE, "the process driver needs util-linux's " + name
                + " on the host (apt-get install util-linux)");
    }

    private static String readAll(Process p) {
        try {
            return new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            return e.getMessage();
        }
    }

    private static void pause() {
        try {
            Thread.sleep(5);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new DriverException(Kind.FAILED, "interrupted while waiting for the sandbox's namespaces");
        }
    }
}
