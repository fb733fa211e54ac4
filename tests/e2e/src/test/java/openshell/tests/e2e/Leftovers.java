package openshell.tests.e2e;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Stream;

/**
 * What one sandbox has on the host, seen the way an operator would look: processes naming the
 * sandbox and every process in its pid namespaces, its run directory and socket under
 * {@code /run/openshell}, its cgroup, its mounts, the driver's state and id-range slot. Taken while
 * the sandbox runs, then checked after delete: all of it must be gone. Other sandboxes of other
 * test runs on the same host are never counted (everything is keyed by this sandbox's id and
 * namespaces).
 */
final class Leftovers {
    private static final Path RUN_ROOT = Path.of("/run/openshell");
    /**
     * Longest wait after delete for the sandbox's zombies to be reaped. Delete returns once
     * nothing of the sandbox runs; its killed namespace holder stays a zombie until the host's
     * init reaps it (~1 s on the CI machines). A zombie that outlives this was leaked, not slow.
     */
    static final java.time.Duration REAP_WAIT = java.time.Duration.ofSeconds(10);

    private final String id;
    private final Path state;
    private final Map<Long, String> processes;
    private final Set<String> pidNamespaces;

    private Leftovers(String id, Path state, Map<Long, String> processes, Set<String> pidNamespaces) {
        this.id = id;
        this.state = state;
        this.processes = processes;
        this.pidNamespaces = pidNamespaces;
    }

    /**
     * @param id    the sandbox id
     * @param state the gateway's state directory
     * @return the sandbox's processes and namespaces now
     */
    static Leftovers of(String id, Path state) {
        String ownPidNs = pidNamespace(ProcessHandle.current().pid()).orElseThrow();
        Set<String> namespaces = new HashSet<>();
        for (long pid : pids()) {
            if (cmdline(pid).contains(id)) {
                pidNamespace(pid).filter(ns -> !ns.equals(ownPidNs)).ifPresent(namespaces::add);
            }
        }
        Map<Long, String> found = new HashMap<>();
        for (long pid : pids()) {
            if (belongs(pid, id, namespaces)) {
                startTime(pid).ifPresent(start -> found.put(pid, start));
            }
        }
        return new Leftovers(id, state, found, namespaces);
    }

    /** @return the processes found (pid to a description) */
    Map<Long, String> processes() {
        Map<Long, String> out = new HashMap<>();
        processes.keySet().forEach(pid -> out.put(pid, cmdline(pid)));
        return out;
    }

    /** @return the sandbox's pid namespaces (other than the host's) */
    Set<String> pidNamespaces() {
        return pidNamespaces;
    }

    /** @return the supervisor's pid: the host process with {@code --sandbox ID} that is the supervisor main */
    long supervisorPid() {
        return processes.keySet().stream().filter(pid -> cmdline(pid).contains("openshell.supervisor.SupervisorMain"))
                .findFirst().orElseThrow(() -> new AssertionError("no supervisor process of " + id + " in "
                        + processes()));
    }

    /**
     * @return everything of the sandbox still on the host; empty when it left nothing behind. A
     *         process that still runs is reported at once; zombies get {@link #REAP_WAIT} to go.
     */
    List<String> remaining() {
        long deadline = System.nanoTime() + REAP_WAIT.toNanos();
        while (true) {
            List<String> left = remainingNow();
            if (left.isEmpty() || !left.stream().allMatch(l -> l.startsWith(ZOMBIE)) || System.nanoTime() > deadline) {
                return left;
            }
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return left;
            }
        }
    }

    private static final String ZOMBIE = "zombie process ";

    private static String describe(long pid) {
        return (zombie(pid) ? ZOMBIE : "process ") + pid + ": " + cmdline(pid);
    }

    /** Whether the process's state (after its name's last ')') is zombie. */
    private static boolean zombie(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
            return stat.startsWith(") Z", stat.lastIndexOf(')'));
        } catch (IOException e) {
            return false;
        }
    }

    private List<String> remainingNow() {
        List<String> left = new ArrayList<>();
        processes.forEach((pid, start) -> {
            if (startTime(pid).filter(start::equals).isPresent()) {
                left.add(describe(pid));
            }
        });
        for (long pid : pids()) {
            if (!processes.containsKey(pid) && belongs(pid, id, pidNamespaces)) {
                left.add(describe(pid));
            }
        }
        for (Path p : List.of(RUN_ROOT.resolve(id), state.resolve("drivers/process/sandboxes").resolve(id))) {
            if (Files.exists(p)) {
                left.add("path " + p + " " + list(p));
            }
        }
        cgroup().filter(Files::exists).ifPresent(p -> left.add("cgroup " + p));
        try {
            Files.readAllLines(Path.of("/proc/self/mountinfo")).stream().filter(l -> l.contains(id))
                    .forEach(l -> left.add("mount " + l));
        } catch (IOException e) {
            left.add("cannot read /proc/self/mountinfo: " + e);
        }
        slots().forEach(f -> left.add("id-range slot " + f));
        return left;
    }

    /**
     * @return this sandbox's id-range slot files in the host's slot directory (one per host,
     *         whatever the gateway's home; each names its owner as driver state root and sandbox id)
     */
    List<Path> slots() {
        Path slots = Path.of("/var/lib/openshell/id-slots");
        String owner = state.resolve("drivers/process").toAbsolutePath().normalize() + "\n" + id + "\n";
        if (!Files.isDirectory(slots)) {
            return List.of();
        }
        try (Stream<Path> files = Files.list(slots)) {
            List<Path> mine = new ArrayList<>();
            for (Path f : files.toList()) {
                if (Files.isRegularFile(f) && Files.readString(f, StandardCharsets.UTF_8).equals(owner)) {
                    mine.add(f);
                }
            }
            return mine;
        } catch (IOException e) {
            throw new java.io.UncheckedIOException("cannot list " + slots, e);
        }
    }

    /** @return the sandbox's cgroup v2 directory, where the process driver makes it */
    Optional<Path> cgroup() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
                int dash = line.indexOf(" - ");
                if (dash > 0 && line.substring(dash + 3).startsWith("cgroup2 ")) {
                    return Optional.of(Path.of(line.split(" ")[4]).resolve("openshell-" + id));
                }
            }
        } catch (IOException e) {
            throw new AssertionError("cannot read /proc/self/mountinfo", e);
        }
        return Optional.empty();
    }

    private static boolean belongs(long pid, String id, Set<String> namespaces) {
        return cmdline(pid).contains(id) || pidNamespace(pid).filter(namespaces::contains).isPresent();
    }

    private static List<Long> pids() {
        try (Stream<Path> entries = Files.list(Path.of("/proc"))) {
            return entries.map(p -> p.getFileName().toString()).filter(n -> n.chars().allMatch(Character::isDigit))
                    .map(Long::parseLong).toList();
        } catch (IOException e) {
            throw new AssertionError("cannot list /proc", e);
        }
    }

    static String cmdline(long pid) {
        try {
            return new String(Files.readAllBytes(Path.of("/proc", Long.toString(pid), "cmdline")), StandardCharsets.UTF_8)
                    .replace('\0', ' ').strip();
        } catch (IOException e) {
            return "";
        }
    }

    static Optional<String> pidNamespace(long pid) {
        try {
            return Optional.of(Files.readSymbolicLink(Path.of("/proc", Long.toString(pid), "ns", "pid")).toString());
        } catch (IOException e) {
            return Optional.empty();
        }
    }

    /** Field 22 of /proc/PID/stat: with the pid, it names one process (pids are recycled). */
    private static Optional<String> startTime(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
            String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            return Optional.of(fields[19]);
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
    }

    private static String list(Path p) {
        try (Stream<Path> walk = Files.walk(p)) {
            return walk.map(Path::toString).toList().toString();
        } catch (IOException e) {
            return "(" + e.getMessage() + ")";
        }
    }
}
