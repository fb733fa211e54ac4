package openshell.perf.sandbox;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The supervisor and runtime processes of one sandbox, found in {@code /proc} by the sandbox id
 * on their command lines (the process driver passes {@code --sandbox ID} to both), and what they
 * hold: resident memory, threads, file descriptors and sockets.
 *
 * <p>Two memory figures: VmRSS counts every page a process maps, so each JVM of each sandbox
 * is charged in full for the pages of {@code libjvm.so}, the AOT cache and {@code lib/modules}
 * that all of them share; PSS ({@code /proc/PID/smaps_rollup}) charges a shared page to each of
 * the N processes mapping it by 1/N, so the PSS of all processes adds up to the host's memory
 * in use, and what one more sandbox costs the host is the growth of that sum.
 */
record SandboxProcesses(long supervisor, long runtime) {
    /** The runtime's main class arguments file in its image; its launcher wrapper is not counted. */
    private static final String RUNTIME_MARK = "openshell-sandbox.args";
    private static final String SUPERVISOR_MARK = "openshell-supervisor.args";

    static SandboxProcesses of(String sandboxId) throws IOException {
        long supervisor = -1;
        long runtime = -1;
        try (DirectoryStream<Path> procs = Files.newDirectoryStream(Path.of("/proc"), p -> p.getFileName().toString().matches("\\d+"))) {
            for (Path p : procs) {
                String cmd;
                try {
                    cmd = new String(Files.readAllBytes(p.resolve("cmdline"))).replace('\0', ' ');
                } catch (IOException e) {
                    continue; // exited meanwhile
                }
                if (!cmd.contains("--sandbox " + sandboxId + " ")) {
                    continue;
                }
                long pid = Long.parseLong(p.getFileName().toString());
                if (cmd.contains(SUPERVISOR_MARK)) {
                    supervisor = pid;
                } else if (cmd.contains(RUNTIME_MARK)) {
                    runtime = pid;
                }
            }
        }
        if (supervisor < 0 || runtime < 0) {
            throw new IOException("supervisor or runtime of " + sandboxId + " not found in /proc (supervisor " + supervisor
                    + ", runtime " + runtime + ")");
        }
        return new SandboxProcesses(supervisor, runtime);
    }

    /** Linux's USER_HZ: the unit of the CPU times in {@code /proc/PID/stat}, 100 on every architecture this runs on. */
    static final long TICKS_PER_SECOND = 100;

    /**
     * @return user and system CPU, in milliseconds, of the supervisor and of the runtime with all
     *         its descendants (the agent, a launcher): the live ones, and those reaped
     */
    long cpuMillis() {
        return treeCpuMillis(supervisor) + treeCpuMillis(runtime);
    }

    /** @return as {@link #cpuMillis()}, of one process and its descendants; 0 for a process that is gone */
    static long treeCpuMillis(long pid) {
        long sum;
        try {
            String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
            // After the command name (which may hold spaces and parentheses): fields 14-17 are utime,
            // stime, cutime and cstime; the last two hold the children it has reaped (a probe, a launcher).
            String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            sum = (Long.parseLong(f[11]) + Long.parseLong(f[12]) + Long.parseLong(f[13]) + Long.parseLong(f[14]))
                    * 1000 / TICKS_PER_SECOND;
            for (long child : children(pid)) {
                sum += treeCpuMillis(child);
            }
        } catch (IOException e) {
            // Exited meanwhile: NoSuchFileException, or ESRCH from a process reaped while being read.
            return 0;
        }
        return sum;
    }

    /** What one process holds right now. */
    record Holdings(double rssMib, double pssMib, long threads, long fds, long sockets, long children) {
        Map<String, Object> json() {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("rss_mib", rssMib);
            m.put("pss_mib", pssMib);
            m.put("threads", threads);
            m.put("fds", fds);
            m.put("sockets", sockets);
            m.put("children", children);
            return m;
        }
    }

    static Holdings holdings(long pid) throws IOException {
        Path proc = Path.of("/proc", Long.toString(pid));
        double rss = 0;
        long threads = 0;
        for (String line : Files.readAllLines(proc.resolve("status"))) {
            if (line.startsWith("VmRSS:")) {
                rss = Long.parseLong(line.replaceAll("\\D", "")) / 1024.0;
            } else if (line.startsWith("Threads:")) {
                threads = Long.parseLong(line.replaceAll("\\D", ""));
            }
        }
        long fds = 0;
        long sockets = 0;
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(proc.resolve("fd"))) {
            for (Path fd : ds) {
                fds++;
                try {
                    if (Files.readSymbolicLink(fd).toString().startsWith("socket:")) {
                        sockets++;
                    }
                } catch (IOException e) {
                    // closed meanwhile
                }
            }
        }
        return new Holdings(Math.round(rss * 10) / 10.0, Math.round(pssMib(pid) * 10) / 10.0, threads, fds, sockets,
                children(pid).size());
    }

    /** @return the process's proportional set size in MiB, 0 if it exited meanwhile */
    static double pssMib(long pid) throws IOException {
        List<String> lines;
        try {
            lines = Files.readAllLines(Path.of("/proc", Long.toString(pid), "smaps_rollup"));
        } catch (java.nio.file.NoSuchFileException e) {
            return 0;
        }
        for (String line : lines) {
            if (line.startsWith("Pss:")) {
                return Long.parseLong(line.replaceAll("\\D", "")) / 1024.0;
            }
        }
        throw new IOException("/proc/" + pid + "/smaps_rollup has no Pss line");
    }

    /**
     * @param pid the root
     * @return the PSS in MiB of the process and all its descendants (for the runtime: its
     *         agent, what the agent started and any launcher still starting a process)
     */
    static double treePssMib(long pid) throws IOException {
        double sum = pssMib(pid);
        try {
            for (long child : children(pid)) {
                sum += treePssMib(child);
            }
        } catch (java.nio.file.NoSuchFileException e) {
            // exited meanwhile: its PSS was read as 0 or counted above
        }
        return sum;
    }

    static List<Long> children(long pid) throws IOException {
        List<Long> out = new ArrayList<>();
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc", Long.toString(pid), "task"))) {
            for (Path t : tasks) {
                try {
                    String c = Files.readString(t.resolve("children")).trim();
                    if (!c.isEmpty()) {
                        for (String s : c.split("\\s+")) {
                            out.add(Long.parseLong(s));
                        }
                    }
                } catch (IOException e) {
                    // thread ended
                }
            }
        }
        return out;
    }
}
