package openshell.perf.images;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
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
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Stream;

/**
 * Measures the runtime images as the drivers use them and writes one JSON document: size on disk
 * by part, the sandbox's start-to-ready latency (exec of the launcher until its health probe's
 * ready line) with and without the AOT cache, and idle resident memory. Budgets (issue 8) are
 * reported next to each figure, never asserted: the numbers depend on the machine's load, which
 * is recorded too.
 *
 * <pre>
 *   ImageBenchmark --mode smoke|full --sandbox DIR --supervisor DIR --out FILE [--extra-cache LABEL=FILE,...]
 * </pre>
 *
 * <p>As root it also launches sandboxes through the process driver, from both images, as the
 * gateway does: the runtime's start to serving (its {@code "serving":true} line, and the
 * supervisor's ready line after attach, confirm and the agent) with the image's AOT cache, without
 * one and with each {@code --extra-cache} (an AOT cache file trained otherwise, for comparison),
 * interleaved; and the resident memory of the runtime and the supervisor of one idle sandbox
 * with one agent ({@code /bin/sleep}).
 */
public final class ImageBenchmark {
    /** Timed start-ups per variant in a smoke run (seconds, in {@code verify}). */
    static final int SMOKE_RUNS = 2;
    /** Timed start-ups per variant in a full run. */
    static final int FULL_RUNS = 20;
    /** How long an idle process settles before its resident set is read. */
    static final Duration SETTLE = Duration.ofSeconds(2);
    /** Longest wait for one start-up or exit (a loaded 2-core machine). */
    static final Duration WAIT = Duration.ofSeconds(120);
    /** Budgets from issue 8. */
    static final double SANDBOX_BUDGET_MIB = 90;
    static final double SUPERVISOR_BUDGET_MIB = 130;
    static final double READY_BUDGET_MS = 400;
    static final double SANDBOX_RSS_BUDGET_MIB = 64;
    static final double SUPERVISOR_RSS_BUDGET_MIB = 128;
    /** How long one idle sandbox (one sleeping agent) settles before the resident sets are read. */
    static final Duration PAIR_SETTLE = Duration.ofSeconds(5);
    /** How long an idle sandbox's CPU is counted. */
    static final Duration IDLE_CPU_WINDOW = Duration.ofSeconds(10);
    /** Fresh user, network and mount namespaces, as the process driver gives the runtime. */
    static final List<String> FENCED = List.of("/usr/bin/unshare", "--user", "--map-root-user", "--net", "--mount");

    private ImageBenchmark() {
    }

    /**
     * Entry point.
     *
     * @param args see the class comment
     * @throws Exception when a measurement cannot be made
     */
    public static void main(String[] args) throws Exception {
        Map<String, String> options = new LinkedHashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            options.put(args[i], args[i + 1]);
        }
        String mode = options.getOrDefault("--mode", "smoke");
        int runs = mode.equals("full") ? FULL_RUNS : SMOKE_RUNS;
        Path sandbox = Path.of(required(options, "--sandbox")).toRealPath();
        Path supervisor = Path.of(required(options, "--supervisor")).toRealPath();
        Path out = Path.of(required(options, "--out"));

        Json json = new Json();
        json.open();
        json.field("mode", mode).field("runs", runs).field("load_before", loadAverage())
                .field("cores", Runtime.getRuntime().availableProcessors())
                .field("kernel", Files.readString(Path.of("/proc/sys/kernel/osrelease")).trim());
        json.object("size_mib");
        sizes(json, "openshell-sandbox", sandbox, SANDBOX_BUDGET_MIB);
        sizes(json, "openshell-supervisor", supervisor, SUPERVISOR_BUDGET_MIB);
        json.close();

        json.object("sandbox_ready_ms");
        startUps(json, sandbox, runs);
        json.close();

        boolean root = "root".equals(System.getProperty("user.name"));
        Map<String, Path> extraCaches = new LinkedHashMap<>();
        for (String variant : options.getOrDefault("--extra-cache", "").split(",")) {
            if (!variant.isBlank()) {
                int eq = variant.indexOf('=');
                if (eq <= 0 || eq == variant.length() - 1) {
                    throw new IllegalArgumentException("--extra-cache takes LABEL=FILE[,LABEL=FILE...], not " + variant);
                }
                extraCaches.put(variant.substring(0, eq), Path.of(variant.substring(eq + 1)));
            }
        }
        Path work = Files.createTempDirectory(Path.of("/tmp"), "osimg");
        try {
            Files.setPosixFilePermissions(work, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
            json.object("sandbox_serving_ms");
            if (root) {
                servingStartUps(json, work, sandbox, supervisor, runs, extraCaches);
            } else {
                json.field("not_measured", "needs root: the process driver maps a private uid range per sandbox");
            }
            json.close();

            json.object("idle_rss_mib");
            double rss = idleRss(sandbox);
            json.object("openshell-sandbox-waiting").field("value", rss)
                    .field("what", "launcher, AOT cache, runtime waiting for its launch bundle (no agent)").close();
            if (root) {
                pairRss(json, work, sandbox, supervisor);
            } else {
                json.field("not_measured", "one sandbox with an agent needs root (the process driver)");
            }
            json.close();
        } finally {
            try (Stream<Path> all = Files.walk(work)) {
                all.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
        json.field("load_after", loadAverage());
        json.close();
        Files.createDirectories(out.toAbsolutePath().getParent());
        Files.writeString(out, json.text());
        System.out.println(json.text());
    }

    private static String required(Map<String, String> options, String name) {
        String value = options.get(name);
        if (value == null) {
            throw new IllegalArgumentException("missing " + name);
        }
        return value;
    }

    private static String loadAverage() throws IOException {
        return Files.readString(Path.of("/proc/loadavg")).trim();
    }

    /** Bytes by part: the linked JDK, the application jars, JNA's native library, the AOT cache. */
    static void sizes(Json json, String name, Path image, double budget) throws IOException {
        long total = 0;
        long app = 0;
        long aot = 0;
        long jna = 0;
        try (Stream<Path> files = Files.walk(image)) {
            for (Path file : files.filter(Files::isRegularFile).toList()) {
                long size = Files.size(file);
                String relative = image.relativize(file).toString();
                total += size;
                if (relative.startsWith("app/")) {
                    app += size;
                } else if (relative.endsWith(".aot")) {
                    aot += size;
                } else if (relative.startsWith("lib/jna/")) {
                    jna += size;
                }
            }
        }
        json.object(name).field("total", mib(total)).field("budget", budget).field("within_budget", mib(total) <= budget)
                .field("jdk_runtime", mib(total - app - aot - jna)).field("app_jars", mib(app)).field("aot_cache", mib(aot))
                .field("jna_native", mib(jna)).close();
    }

    private static double mib(long bytes) {
        return Math.round(bytes / 1048576.0 * 10) / 10.0;
    }

    /** Start-to-ready of the sandbox's health probe, variants interleaved so they share the load. */
    static void startUps(Json json, Path image, int runs) throws Exception {
        List<String> withAot = new ArrayList<>(FENCED);
        withAot.addAll(List.of(image.resolve("bin/openshell-sandbox").toString(), "--check"));
        List<String> withoutAot = new ArrayList<>(FENCED);
        withoutAot.addAll(List.of(image.resolve("bin/java").toString(), "@conf/openshell-sandbox.args", "--check"));
        List<String> namespacesOnly = new ArrayList<>(FENCED);
        namespacesOnly.add("/bin/true");
        // One untimed run each: the page cache, not the image, is what a first run measures.
        readyMillis(image, withAot);
        readyMillis(image, withoutAot);
        readyMillis(image, namespacesOnly);
        double[] aot = new double[runs];
        double[] plain = new double[runs];
        double[] unshare = new double[runs];
        double[] aotCpu = new double[runs];
        double[] plainCpu = new double[runs];
        for (int i = 0; i < runs; i++) {
            Sample a = readyMillis(image, withAot);
            Sample b = readyMillis(image, withoutAot);
            aot[i] = a.wallMillis();
            aotCpu[i] = a.cpuMillis();
            plain[i] = b.wallMillis();
            plainCpu[i] = b.cpuMillis();
            unshare[i] = readyMillis(image, namespacesOnly).wallMillis();
        }
        percentiles(json, "with_aot_cache", aot, READY_BUDGET_MS);
        percentiles(json, "without_aot_cache", plain, READY_BUDGET_MS);
        percentiles(json, "unshare_alone", unshare, Double.NaN);
        // CPU time (all threads) at the ready line: far less sensitive to other load than wall time.
        percentiles(json, "cpu_with_aot_cache", aotCpu, Double.NaN);
        percentiles(json, "cpu_without_aot_cache", plainCpu, Double.NaN);
    }

    /**
     * Start to serving through the process driver, the variants interleaved: the image's launcher
     * (its AOT cache), the image without a cache, and each extra cache.
     */
    static void servingStartUps(Json json, Path work, Path sandbox, Path supervisor, int runs, Map<String, Path> extraCaches)
            throws Exception {
        Map<String, Path> launchers = new LinkedHashMap<>();
        launchers.put("with_aot_cache", sandbox.resolve("bin/openshell-sandbox"));
        launchers.put("without_aot_cache", SandboxPair.launcher(work, sandbox, java.util.Optional.empty(), "no-cache"));
        for (Map.Entry<String, Path> extra : extraCaches.entrySet()) {
            launchers.put("with_" + extra.getKey(), SandboxPair.launcher(work, sandbox, java.util.Optional.of(extra.getValue().toRealPath()),
                    "cache-" + extra.getKey()));
        }
        Path supervisorLauncher = supervisor.resolve("bin/openshell-supervisor");
        Path java = sandbox.resolve("bin/java");
        Map<String, List<SandboxPair.Times>> times = new LinkedHashMap<>();
        launchers.keySet().forEach(k -> times.put(k, new ArrayList<>()));
        json.field("load_before", loadAverage());
        // One untimed round: the page cache, not the image, is what a first run measures.
        for (int i = -1; i < runs; i++) {
            for (Map.Entry<String, Path> launcher : launchers.entrySet()) {
                try (SandboxPair pair = SandboxPair.launch(work, supervisorLauncher, launcher.getValue(), List.of("/bin/sleep", "600"))) {
                    SandboxPair.Times t = pair.awaitReady(java);
                    if (i >= 0) {
                        times.get(launcher.getKey()).add(t);
                    }
                }
            }
        }
        for (Map.Entry<String, List<SandboxPair.Times>> variant : times.entrySet()) {
            List<SandboxPair.Times> all = variant.getValue();
            json.object(variant.getKey());
            percentiles(json, "serving", all.stream().mapToDouble(SandboxPair.Times::servingMillis).toArray(), READY_BUDGET_MS);
            percentiles(json, "supervisor_ready", all.stream().mapToDouble(SandboxPair.Times::readyMillis).toArray(), Double.NaN);
            percentiles(json, "cpu_at_serving", all.stream().mapToDouble(SandboxPair.Times::runtimeCpuMillis).toArray(), Double.NaN);
            percentiles(json, "driver_create", all.stream().mapToDouble(SandboxPair.Times::createMillis).toArray(), Double.NaN);
            json.close();
        }
        json.field("load_after", loadAverage());
    }

    /** Resident sets of one idle sandbox with one agent, launched from the images by the process driver. */
    static void pairRss(Json json, Path work, Path sandbox, Path supervisor) throws Exception {
        try (IdlePair pair = IdlePair.launch(work, sandbox, supervisor)) {
            ProcessHandle runtime = pair.runtime();
            ProcessHandle supervisorJvm = pair.supervisor();
            double runtimeRss = rss(runtime.pid());
            double supervisorRss = rss(supervisorJvm.pid());
            json.object("openshell-sandbox").field("value", runtimeRss).field("budget", SANDBOX_RSS_BUDGET_MIB)
                    .field("within_budget", runtimeRss <= SANDBOX_RSS_BUDGET_MIB)
                    .field("what", "the runtime's JVM, one idle sandbox with one agent (/bin/sleep), " + PAIR_SETTLE.toSeconds()
                            + " s after the supervisor's ready line").close();
            json.object("openshell-supervisor").field("value", supervisorRss).field("budget", SUPERVISOR_RSS_BUDGET_MIB)
                    .field("within_budget", supervisorRss <= SUPERVISOR_RSS_BUDGET_MIB)
                    .field("what", "the supervisor's JVM of the same sandbox").close();
            // The runtime's helpers (its workload launcher) and the agent, apart: not the runtime's budget.
            json.object("runtime_descendants");
            for (ProcessHandle p : runtime.descendants().toList()) {
                json.field(p.pid() + " " + p.info().command().map(c -> Path.of(c).getFileName().toString()).orElse("?"), rss(p.pid()));
            }
            json.close();
            // What an idle sandbox costs the host's CPU: every sandbox on a host pays it all the time.
            double runtimeBefore = cpuMillis(runtime.pid());
            double supervisorBefore = cpuMillis(supervisorJvm.pid());
            Thread.sleep(IDLE_CPU_WINDOW);
            double seconds = IDLE_CPU_WINDOW.toMillis() / 1000.0;
            json.object("idle_cpu_ms_per_s")
                    .field("openshell-sandbox", round((cpuMillis(runtime.pid()) - runtimeBefore) / seconds))
                    .field("openshell-supervisor", round((cpuMillis(supervisorJvm.pid()) - supervisorBefore) / seconds))
                    .field("what", "user + system CPU of each JVM of the same idle sandbox over " + IDLE_CPU_WINDOW.toSeconds()
                            + " s (10 ms ticks)").close();
            secondSandbox(json, work, sandbox, supervisor, runtime, supervisorJvm);
        }
    }

    /**
     * A second idle sandbox of the same images beside the first: each JVM's proportional set
     * (PSS, its private pages plus its share of the pages both map: {@code libjvm.so}, the AOT
     * cache, {@code lib/modules}), the part of the resident set a further sandbox adds to the host.
     */
    private static void secondSandbox(Json json, Path work, Path sandbox, Path supervisor, ProcessHandle runtime,
                                      ProcessHandle supervisorJvm) throws Exception {
        try (IdlePair second = IdlePair.launch(work, sandbox, supervisor)) {
            ProcessHandle runtime2 = second.runtime();
            ProcessHandle supervisor2 = second.supervisor();
            json.object("two_sandboxes_pss_mib")
                    .field("openshell-sandbox", round((pss(runtime.pid()) + pss(runtime2.pid())) / 2))
                    .field("openshell-supervisor", round((pss(supervisorJvm.pid()) + pss(supervisor2.pid())) / 2))
                    .field("openshell-sandbox_rss", round((rss(runtime.pid()) + rss(runtime2.pid())) / 2))
                    .field("what", "mean PSS (and VmRSS) of each image's JVM with two idle sandboxes of the same images, "
                            + PAIR_SETTLE.toSeconds() + " s after the second one's ready line").close();
        }
    }

    /**
     * One idle sandbox with one agent, launched from the images by the process driver, once its
     * supervisor is ready and {@link #PAIR_SETTLE} has passed, with both of its JVMs.
     */
    private record IdlePair(SandboxPair pair, ProcessHandle runtime, ProcessHandle supervisor) implements AutoCloseable {
        static IdlePair launch(Path work, Path sandbox, Path supervisor) throws Exception {
            SandboxPair pair = SandboxPair.launch(work, supervisor.resolve("bin/openshell-supervisor"),
                    sandbox.resolve("bin/openshell-sandbox"), List.of("/bin/sleep", "600"));
            try {
                pair.awaitReady(sandbox.resolve("bin/java"));
                Thread.sleep(PAIR_SETTLE);
                ProcessHandle runtime = pair.process(sandbox.resolve("bin/java"))
                        .orElseThrow(() -> new IllegalStateException("no runtime JVM" + pair.dump()));
                ProcessHandle supervisorJvm = pair.process(supervisor.resolve("bin/java"))
                        .orElseThrow(() -> new IllegalStateException("no supervisor JVM" + pair.dump()));
                return new IdlePair(pair, runtime, supervisorJvm);
            } catch (Exception | Error e) {
                pair.close();
                throw e;
            }
        }

        @Override
        public void close() {
            pair.close();
        }
    }

    /** The proportional set size from {@code /proc/PID/smaps_rollup}. */
    static double pss(long pid) throws IOException {
        return procMib(pid, "smaps_rollup", "Pss:");
    }

    private static double rss(long pid) throws IOException {
        return procMib(pid, "status", "VmRSS:");
    }

    /** A {@code kB} field of a {@code /proc/PID} file, in MiB. */
    private static double procMib(long pid, String file, String field) throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), file))) {
            if (line.startsWith(field)) {
                return round(Long.parseLong(line.replaceAll("\\D", "")) / 1024.0);
            }
        }
        throw new IllegalStateException("no " + field + " in /proc/" + pid + "/" + file);
    }

    /**
     * One start-up.
     *
     * @param wallMillis start to the ready line (or exit)
     * @param cpuMillis  user + system CPU time of the process at the ready line (10 ms ticks); NaN if unread
     */
    record Sample(double wallMillis, double cpuMillis) {
    }

    /** User + system time of a live process, from /proc/PID/stat; NaN if it is gone. */
    static double cpuMillis(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
            String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            // Fields 14 and 15 of stat(5); index 0 here is field 3.
            return (Long.parseLong(fields[11]) + Long.parseLong(fields[12])) * 10.0;
        } catch (IOException | RuntimeException e) {
            return Double.NaN;
        }
    }

    private static void percentiles(Json json, String name, double[] values, double budget) {
        double[] sorted = Arrays.stream(values).filter(v -> !Double.isNaN(v)).sorted().toArray();
        if (sorted.length == 0) {
            json.field(name, (String) null);
            return;
        }
        double p50 = sorted[(sorted.length - 1) / 2];
        json.object(name).field("p50", round(p50)).field("p90", round(sorted[(int) Math.ceil(sorted.length * 0.9) - 1]))
                .field("min", round(sorted[0])).field("max", round(sorted[sorted.length - 1]));
        if (!Double.isNaN(budget)) {
            json.field("budget", budget).field("within_budget", p50 <= budget);
        }
        json.close();
    }

    private static double round(double value) {
        return Math.round(value * 10) / 10.0;
    }

    /**
     * Milliseconds from starting the command until its first line on standard output (for
     * {@code /bin/true}, until it exits); the command must exit 0.
     */
    static Sample readyMillis(Path directory, List<String> command) throws Exception {
        long start = System.nanoTime();
        Process p = new ProcessBuilder(command).directory(directory.toFile()).start();
        p.getOutputStream().close();
        CompletableFuture<String> err = drain(p.getErrorStream());
        long ready;
        double cpu;
        try (BufferedReader reader = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            CompletableFuture<String> first = CompletableFuture.supplyAsync(() -> {
                try {
                    return reader.readLine();
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            String line = first.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            ready = System.nanoTime();
            cpu = line == null ? Double.NaN : cpuMillis(p.pid());
            if (line != null && !line.startsWith("{\"check\":\"passed\"")) {
                throw new IllegalStateException("not the ready line: " + line);
            }
            reader.transferTo(java.io.Writer.nullWriter());
        }
        if (!p.waitFor(WAIT.toSeconds(), TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new TimeoutException("no exit: " + command);
        }
        if (p.exitValue() != 0) {
            throw new IllegalStateException(command + " exited " + p.exitValue() + ": " + err.get(WAIT.toSeconds(), TimeUnit.SECONDS));
        }
        return new Sample((ready - start) / 1e6, cpu);
    }

    /** Resident set of the runtime started by its launcher, idle while it waits for its bundle. */
    static double idleRss(Path image) throws Exception {
        Process p = new ProcessBuilder(image.resolve("bin/openshell-sandbox").toString(), "--sandbox", "sb-bench", "--generation", "1",
                "--channel", "/nonexistent/channel.sock", "--bundle-stdin").start();
        CompletableFuture<String> err = drain(p.getErrorStream());
        try {
            if (p.waitFor(SETTLE.toMillis(), TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("the runtime ended while idle: " + err.get(WAIT.toSeconds(), TimeUnit.SECONDS));
            }
            return rss(p.pid());
        } finally {
            p.destroy();
            p.waitFor(WAIT.toSeconds(), TimeUnit.SECONDS);
            p.destroyForcibly();
        }
    }

    private static CompletableFuture<String> drain(InputStream stream) {
        CompletableFuture<String> text = new CompletableFuture<>();
        Thread.ofPlatform().daemon(true).start(() -> {
            try (stream) {
                text.complete(new String(stream.readAllBytes(), StandardCharsets.UTF_8));
            } catch (IOException e) {
                text.completeExceptionally(e);
            }
        });
        return text;
    }

    /** A small JSON writer: objects, strings, numbers and booleans are all this report needs. */
    static final class Json {
        private final StringBuilder text = new StringBuilder();
        private final List<Boolean> first = new ArrayList<>();

        void open() {
            text.append('{');
            first.add(true);
        }

        Json object(String name) {
            key(name);
            text.append('{');
            first.add(true);
            return this;
        }

        void close() {
            text.append('}');
            first.removeLast();
        }

        Json field(String name, String value) {
            key(name);
            text.append(value == null ? "null" : '"' + value.replace("\\", "\\\\").replace("\"", "\\\"") + '"');
            return this;
        }

        Json field(String name, double value) {
            key(name);
            text.append(String.format(Locale.ROOT, "%s", value));
            return this;
        }

        Json field(String name, int value) {
            key(name);
            text.append(value);
            return this;
        }

        Json field(String name, boolean value) {
            key(name);
            text.append(value);
            return this;
        }

        private void key(String name) {
            if (!first.getLast()) {
                text.append(',');
            }
            first.set(first.size() - 1, false);
            text.append('"').append(name).append("\":");
        }

        String text() {
            return text + "\n";
        }
    }
}
