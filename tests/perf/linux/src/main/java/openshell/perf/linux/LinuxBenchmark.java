package openshell.perf.linux;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import openshell.linux.BpfProgram;
import openshell.linux.ChildExit;
import openshell.linux.LaunchPlan;
import openshell.linux.LaunchResult;
import openshell.linux.LauncherProcess;
import openshell.linux.Namespaces;
import openshell.linux.OwnedFd;
import openshell.linux.ProcessControl;
import openshell.linux.Seccomp;
import openshell.linux.SeccompListener;
import openshell.linux.SeccompNotification;

/**
 * Measures and writes one JSON document:
 * <ul>
 * <li>{@code notification}: per intercepted {@code socket()} call, p50/p90/p99 of (a) a call the
 * filter itself refuses (no notification), (b) a call answered with an errno by the Java
 * {@code SeccompListener}, with and without the sync wake-up flag, and (c) the same round trip with
 * a minimal C supervisor (compiled with {@code cc} if present). "Java added" is (b) - (c).</li>
 * <li>{@code launcher}: request to {@code execve} of {@code /usr/bin/true} done (the plan socket's
 * close-on-exec end of stream), for the native launcher started for the launch (what the runtime
 * does) and for one started ahead of time that waits for its plan.</li>
 * </ul>
 * Arguments: {@code smoke|full} and the output path.
 */
public final class LinuxBenchmark {
    static final int AF_INET = 2;
    static final int SOCK_DGRAM = 2;
    static final int SOCK_RAW = 3;
    static final int EACCES = 13;
    static final Duration WAIT = Duration.ofSeconds(60);

    private LinuxBenchmark() {
    }

    /**
     * Runs the benchmark.
     *
     * @param args {@code smoke|full} and the JSON output path
     * @throws Exception on any failure (the benchmark fails loudly)
     */
    public static void main(String[] args) throws Exception {
        boolean full = args.length > 0 && args[0].equals("full");
        Path out = Path.of(args.length > 1 ? args[1] : "target/perf-linux.json");
        Path work = out.toAbsolutePath().getParent();
        int calls = full ? 50_000 : 1_000;
        int launches = full ? 25 : 1;

        Map<String, Object> root = new LinkedHashMap<>();
        root.put("mode", full ? "full" : "smoke");
        root.put("cpus", Runtime.getRuntime().availableProcessors());
        root.put("java", Runtime.version().toString());

        Map<String, Object> notification = new LinkedHashMap<>();
        notification.put("calls", calls);
        notification.put("filter_errno_ns", percentiles(filtered(calls, false, SOCK_RAW)));
        notification.put("java_round_trip_ns", percentiles(filtered(calls, false, SOCK_DGRAM)));
        notification.put("java_round_trip_sync_wake_up_ns", percentiles(filtered(calls, true, SOCK_DGRAM)));
        notification.put("java_round_trip_blocking_receive_ns", percentiles(filtered(calls, false, SOCK_DGRAM, true)));
        String c = cBaseline(work, calls);
        notification.put("c_supervisor", c == null ? "unavailable: no cc on this machine" : new Raw(c));
        root.put("notification", notification);

        Map<String, Object> launcher = new LinkedHashMap<>();
        launcher.put("launches_per_variant", launches);
        launcher.put("launcher", command().executable());
        launcher.put("cold_ms", percentilesMs(cold(launches)));
        launcher.put("prestarted_ms", percentilesMs(prestarted(launches)));
        root.put("launcher", launcher);

        String json = toJson(root);
        Files.writeString(out, json + "\n");
        System.out.println(json);
    }

    /** Per-call nanoseconds of socket(AF_INET, type) on a thread filtered like the sandbox's. */
    static long[] filtered(int calls, boolean syncWakeUp, int type) throws Exception {
        return filtered(calls, syncWakeUp, type, false);
    }

    /**
     * As above; with {@code blockingReceive} the handler blocks in RECV instead of polling first
     * (one syscall less per notification; the daemon handler thread then outlives the run).
     */
    static long[] filtered(int calls, boolean syncWakeUp, int type, boolean blockingReceive) throws Exception {
        BpfProgram program = BpfProgram.builder()
                .loadNr()
                .jumpIfNotEqual(41, "allow")
                .loadArgLow(1)
                .jumpIfEqual(SOCK_RAW, "deny")
                .ret(Seccomp.RET_USER_NOTIF)
                .label("deny")
                .ret(Seccomp.errno(1))
                .label("allow")
                .ret(Seccomp.RET_ALLOW)
                .build();
        CompletableFuture<SeccompListener> installed = new CompletableFuture<>();
        CompletableFuture<long[]> samples = new CompletableFuture<>();
        CompletableFuture<Void> start = new CompletableFuture<>();
        Thread.ofPlatform().name("filtered").daemon(true).start(() -> {
            try {
                ProcessControl.setNoNewPrivileges();
                installed.complete(Seccomp.installWithListener(program));
                start.get(60, TimeUnit.SECONDS);
                int warmup = Math.max(1000, calls / 4);
                long[] times = new long[calls];
                for (int i = 0; i < warmup + calls; i++) {
                    long t0 = System.nanoTime();
                    int fd = Sys.socket(AF_INET, type, 0);
                    long t1 = System.nanoTime();
                    if (fd >= 0) {
                        throw new IllegalStateException("socket() was not refused");
                    }
                    if (i >= warmup) {
                        times[i - warmup] = t1 - t0;
                    }
                }
                samples.complete(times);
            } catch (Throwable t) {
                installed.completeExceptionally(t);
                samples.completeExceptionally(t);
            }
        });
        try (SeccompListener listener = installed.get(60, TimeUnit.SECONDS)) {
            if (syncWakeUp && !listener.enableSyncWakeUp()) {
                throw new IllegalStateException("kernel lacks SYNC_WAKE_UP");
            }
            AtomicBoolean done = new AtomicBoolean();
            Thread handler = Thread.ofPlatform().name("handler").daemon(true).start(() -> {
                SeccompNotification n = listener.newNotification();
                while (blockingReceive) {
                    try {
                        if (listener.receive(n)) {
                            listener.respondErrno(n.id(), EACCES);
                        }
                    } catch (RuntimeException e) {
                        return;
                    }
                }
                while (!done.get()) {
                    SeccompListener.Pending pending = listener.awaitPending(Duration.ofMillis(100));
                    if (pending == SeccompListener.Pending.NO_USERS) {
                        return;
                    }
                    if (pending == SeccompListener.Pending.NOTIFICATION && listener.receive(n)) {
                        listener.respondErrno(n.id(), EACCES);
                    }
                }
            });
            start.complete(null);
            long[] result = samples.get(10, TimeUnit.MINUTES);
            done.set(true);
            if (!blockingReceive) {
                handler.join(WAIT.toMillis());
            }
            return result;
        }
    }

    /** Compiles and runs the C supervisor; null when no compiler is installed. */
    static String cBaseline(Path work, int calls) throws Exception {
        Path cc = Path.of("/usr/bin/cc");
        if (!Files.isExecutable(cc)) {
            return null;
        }
        Path source = Path.of(System.getProperty("openshell.perf.c.source", "src/main/c/notify_baseline.c")).toAbsolutePath();
        Path binary = work.resolve("notify_baseline");
        run(List.of(cc.toString(), "-O2", "-pthread", "-o", binary.toString(), source.toString()));
        String plain = run(List.of(binary.toString(), Integer.toString(calls), "0")).trim();
        String sync = run(List.of(binary.toString(), Integer.toString(calls), "1")).trim();
        return "{\"plain\":" + plain + ",\"sync_wake_up\":" + sync + "}";
    }

    private static String run(List<String> command) throws Exception {
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        byte[] output = process.getInputStream().readAllBytes();
        if (!process.waitFor(10, TimeUnit.MINUTES) || process.exitValue() != 0) {
            throw new IllegalStateException(command + " failed: " + new String(output, StandardCharsets.UTF_8));
        }
        return new String(output, StandardCharsets.UTF_8);
    }

    /** The native launcher the build made ({@code -Dopenshell.launcher}). */
    static LauncherProcess.Command command() {
        return new LauncherProcess.Command(System.getProperty("openshell.launcher"));
    }

    static LaunchPlan plan(String executable) {
        return LaunchPlan.builder(executable)
                .identity(65534, 65534, List.of())
                .landlock(LaunchPlan.Mode.REQUIRED, List.of("/usr", "/lib", "/lib64", "/bin"), List.of())
                .build();
    }

    /** Request (spawn of the launcher) to execve done, per launch. */
    static long[] cold(int launches) throws Exception {
        long[] times = new long[launches];
        LaunchPlan plan = plan("/usr/bin/true");
        for (int i = 0; i < launches; i++) {
            try (OwnedFd devNull = Namespaces.openPath("/dev/null")) {
                long t0 = System.nanoTime();
                try (LauncherProcess launcher = LauncherProcess.start(command(),
                        new LauncherProcess.Stdio(devNull.value(), devNull.value(), devNull.value(), false))) {
                    finish(launcher, plan);
                    times[i] = System.nanoTime() - t0;
                    reap(launcher);
                }
            }
        }
        return times;
    }

    /** Plan sent to a launcher that is already up and waiting, to execve done. */
    static long[] prestarted(int launches) throws Exception {
        long[] times = new long[launches];
        LaunchPlan plan = plan("/usr/bin/true");
        for (int i = 0; i < launches; i++) {
            try (OwnedFd devNull = Namespaces.openPath("/dev/null");
                 LauncherProcess launcher = LauncherProcess.start(command(),
                         new LauncherProcess.Stdio(devNull.value(), devNull.value(), devNull.value(), false))) {
                // Benchmark only: give the launcher time to reach its plan wait (the protocol has no "idle" message).
                if (launcher.process().awaitExit(Duration.ofMillis(200)).isPresent()) {
                    throw new IllegalStateException("launcher exited before its plan");
                }
                long t0 = System.nanoTime();
                finish(launcher, plan);
                times[i] = System.nanoTime() - t0;
                reap(launcher);
            }
        }
        return times;
    }

    private static void finish(LauncherProcess launcher, LaunchPlan plan) {
        LaunchResult ready = launcher.sendPlan(plan, WAIT);
        if (!(ready instanceof LaunchResult.Ready r)) {
            throw new IllegalStateException("launch failed: " + ready);
        }
        r.listener().close();
        LaunchResult started = launcher.acknowledge(WAIT);
        if (!(started instanceof LaunchResult.Started)) {
            throw new IllegalStateException("exec failed: " + started);
        }
    }

    private static void reap(LauncherProcess launcher) {
        ChildExit exit = launcher.process().awaitExit(WAIT).orElseThrow();
        if (!exit.equals(new ChildExit(0, 0))) {
            throw new IllegalStateException("/usr/bin/true ended with " + exit);
        }
    }

    static Map<String, Object> percentiles(long[] samples) {
        long[] sorted = samples.clone();
        Arrays.sort(sorted);
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("p50", sorted[sorted.length / 2]);
        p.put("p90", sorted[sorted.length * 9 / 10]);
        p.put("p99", sorted[Math.min(sorted.length - 1, sorted.length * 99 / 100)]);
        return p;
    }

    static Map<String, Object> percentilesMs(long[] samples) {
        long[] sorted = samples.clone();
        Arrays.sort(sorted);
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("p50", new Raw(String.format(Locale.ROOT, "%.1f", sorted[sorted.length / 2] / 1e6)));
        p.put("max", new Raw(String.format(Locale.ROOT, "%.1f", sorted[sorted.length - 1] / 1e6)));
        p.put("min", new Raw(String.format(Locale.ROOT, "%.1f", sorted[0] / 1e6)));
        return p;
    }

    /** Pre-rendered JSON. */
    record Raw(String json) {
    }

    static String toJson(Object value) {
        if (value instanceof Map<?, ?> map) {
            StringBuilder out = new StringBuilder("{");
            for (Map.Entry<?, ?> e : map.entrySet()) {
                if (out.length() > 1) {
                    out.append(',');
                }
                out.append('"').append(e.getKey()).append("\":").append(toJson(e.getValue()));
            }
            return out.append('}').toString();
        }
        if (value instanceof Raw raw) {
            return raw.json();
        }
        if (value instanceof Number) {
            return value.toString();
        }
        return "\"" + value.toString().replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }
}
