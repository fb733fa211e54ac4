import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;

/**
 * The sandbox image's AOT training run over its serve path (build time only, run by train.sh with
 * the build's JDK; never part of the image). One sandbox as a user gets it: this build's gateway
 * (from the image's application jars and the training jars, on this JDK) launches it through the
 * process driver, with the supervisor image's launcher and the runtime's, each plus
 * -XX:AOTCacheOutput. The runtime reads its bundle, probes, installs its resolver view and DNS
 * relay, dials the supervisor, serves attach, confirm and startAgent over TLS; the supervisor opens
 * its session to the gateway; then one exec goes through the REST API (the session, the runtime's
 * launch, the output relayed back, the exit), the agent ends after it, and each JVM writes its
 * cache when it exits. Without the exec and the session, a sandbox's first exec and its session's
 * start ran cold code in both JVMs (tests/perf/README.md, "The native workload launcher"). The
 * exec makes {@link #TRAINING_CONNECTS} mediated connects by name: without them every sandbox's
 * JVMs ran their connect and DNS paths cold, interpreted for thousands of connects in the
 * supervisor (tests/perf/README.md, "The connect path in the AOT caches").
 *
 * <p>The same run trains the supervisor image's cache, which replaces the one
 * jlink/openshell-supervisor trained with a usage-error run. It happens here because it needs both
 * images, and this module is built after the supervisor's.
 *
 * <p>Minting (BouncyCastle key and certificate generation) runs in the gateway's JVM, so it lands
 * in neither cache.
 *
 * <pre>ServeTraining IMAGE SUPERVISOR_IMAGE NAME [TRAINING-JVM-OPTION...]</pre>
 */
public final class ServeTraining {
    /** Longest the whole run may take: two JVM starts, the probes and the agent on 2 loaded cores. */
    static final Duration RUN_WAIT = Duration.ofSeconds(300);
    static final String READY = "{\"ready\":true,";
    /** The supervisor image's name (its launcher, argument file and cache). */
    static final String SUPERVISOR = "openshell-supervisor";
    /**
     * Mediated connects the training exec makes, each after resolving {@link #TRAINING_HOST} through
     * the sandbox's DNS relay: enough that both JVMs compile their connect and DNS paths during
     * training (the supervisor's thresholds are scaled by 10), so the caches carry those classes
     * and profiles to every sandbox's first connects.
     */
    static final int TRAINING_CONNECTS = 3000;
    /** Longest wait, after the exec, for its last connects to leave the listener's backlog. */
    static final Duration BACKLOG_WAIT = Duration.ofSeconds(5);
    /** A host alias of the training gateway for the listener below (never a real name). */
    static final String TRAINING_HOST = "aot-training.invalid";

    public static void main(String[] args) throws Exception {
        Path image = Path.of(args[0]).toRealPath();
        Path supervisorImage = Path.of(args[1]).toRealPath();
        String name = args[2];
        Path supervisorLauncher = supervisorImage.resolve("bin/openshell-supervisor");
        if (!Files.isExecutable(supervisorLauncher)) {
            throw new IllegalStateException("no supervisor image at " + supervisorImage + " (jlink/openshell-supervisor builds it first)");
        }
        // Short (the channel socket under it must fit sun_path) and traversable by the sandbox's mapped ids.
        Path work = Files.createTempDirectory(Path.of("/tmp"), "osaot");
        int status = 1;
        try {
            Files.setPosixFilePermissions(work, PosixFilePermissions.fromString("rwx--x--x"));
            // The gateway's state: its keys and API token, and the driver's records (the gateway requires 0700).
            Path state = Files.createDirectory(work.resolve("state"), PosixFilePermissions.asFileAttribute(
                    PosixFilePermissions.fromString("rwx------")));
            Path run = Files.createDirectory(work.resolve("run"));
            Files.setPosixFilePermissions(run, PosixFilePermissions.fromString("rwx--x--x"));
            Path workspace = Files.createDirectory(work.resolve("ws"));
            Files.setPosixFilePermissions(workspace, PosixFilePermissions.fromString("rwxrwxrwx"));
            // The runtime runs as the sandbox's mapped root, not as the image's owner: it writes here.
            Path out = Files.createDirectory(work.resolve("out"));
            Files.setPosixFilePermissions(out, PosixFilePermissions.fromString("rwxrwxrwx"));
            Path cache = out.resolve(name + ".aot");
            // Options for the training run only (after the image's name): e.g. what the cache records.
            String extra = String.join(" ", List.of(args).subList(3, args.length));
            Path launcher = trainingLauncher(work, image, name, cache, extra);
            Path supervisorCache = out.resolve(SUPERVISOR + ".aot");
            Path supervisorTraining = trainingLauncher(work, supervisorImage, SUPERVISOR, supervisorCache, "");

            // The agent waits (at most 120 s) until the exec's exit has reached this program, which then
            // marks it: the exec is what the agent is there for, and an agent that ended as soon as the
            // exec's process did could end the sandbox's session before the exit was relayed to the gateway.
            Path execDone = workspace.resolve("exec-done");
            List<String> agent = List.of("/bin/sh", "-c", "i=0; while [ ! -e " + execDone + " ] && [ $i -lt 1200 ];"
                    + " do sleep 0.1; i=$((i+1)); done");
            // The exec: mediated connects by name (bash's /dev/tcp resolves, then connects), each one
            // decided by the supervisor and spliced, to a listener of this program's on the host's loopback.
            ServerSocket listener = new ServerSocket(0, 256, InetAddress.getLoopbackAddress());
            AtomicInteger accepted = new AtomicInteger();
            Thread acceptor = Thread.ofPlatform().daemon().name("training-listener").start(() -> {
                while (!listener.isClosed()) {
                    try (Socket s = listener.accept()) {
                        accepted.incrementAndGet();
                    } catch (IOException e) {
                        // closed at the end of the run
                    }
                }
            });
            String bash = Path.of("/bin/bash").toRealPath().toString();
            List<String> exec = List.of(bash, "-c", "for i in $(seq " + TRAINING_CONNECTS + "); do exec 3<>/dev/tcp/"
                    + TRAINING_HOST + "/" + listener.getLocalPort() + " || exit 3; exec 3<&-; done; echo trained");
            String policy = "version: 1\nnetwork_policies:\n  training:\n    endpoints:\n      - host: " + TRAINING_HOST
                    + "\n        port: " + listener.getLocalPort() + "\n        protocol: tcp\n    binaries:\n      - path: "
                    + bash + "\n";
            long deadline = System.nanoTime() + RUN_WAIT.toNanos();
            Path gatewayLog = work.resolve("gateway.log");
            Process gateway = new ProcessBuilder(ProcessHandle.current().info().command().orElseThrow(),
                    "--module-path", System.getProperty("jdk.module.path"), "--add-modules", "ALL-MODULE-PATH",
                    "-m", "openshell.gateway/openshell.gateway.GatewayMain", "--state", state.toString(),
                    "--host", "127.0.0.1", "--port", "0",
                    "--host-alias", TRAINING_HOST + "=127.0.0.1",
                    "--driver-setting", "supervisor.launcher=" + supervisorTraining,
                    "--driver-setting", "runtime.launcher=" + launcher,
                    "--driver-setting", "run.root=" + run)
                    .redirectErrorStream(true).redirectOutput(gatewayLog.toFile()).start();
            Path logs = null;
            Rest rest = null;
            String id = null;
            try {
                Path endpoint = state.resolve("gateway.json");
                while (!Files.exists(endpoint) || !text(endpoint).contains("\"url\"")) {
                    if (!gateway.isAlive()) {
                        throw new IllegalStateException("the gateway ended: " + text(gatewayLog));
                    }
                    check(deadline, "the gateway did not listen", gatewayLog);
                    Thread.sleep(100);
                }
                rest = new Rest(URI.create(field(text(endpoint), "url")),
                        Files.readString(state.resolve("api-token"), StandardCharsets.US_ASCII).strip());
                id = field(rest.call("POST", "/v1/sandboxes", "{\"name\":\"aot-training\",\"policy\":" + quote(policy)
                        + ",\"agent\":{\"argv\":" + array(agent) + ",\"env\":{}},\"providers\":[],\"workspace\":"
                        + quote(workspace.toString()) + "}"), "id");
                logs = state.resolve("drivers/process/sandboxes").resolve(id);
                while (true) {
                    String record = rest.call("GET", "/v1/sandboxes/" + id, null);
                    if (record.contains("\"state\":\"RUNNING\"") && record.contains("\"sessionConnected\":true")) {
                        break;
                    }
                    if (record.contains("\"state\":\"FAILED\"")) {
                        throw new IllegalStateException("the sandbox failed: " + record + dump(logs));
                    }
                    check(deadline, "the sandbox was not running with its session", logs);
                    Thread.sleep(50);
                }
                // One exec through the gateway, as a user's: the REST call, the session, the runtime's launch,
                // the output relayed back and the exit. Both JVMs record that path.
                String execStream = rest.call("POST", "/v1/sandboxes/" + id + "/exec", "{\"argv\":" + array(exec) + "}");
                if (!execStream.replace(" ", "").contains("\"exit\":0")) {
                    throw new IllegalStateException("the training exec did not end with 0: " + execStream + dump(logs));
                }
                // The last connects may still wait in the listener's backlog.
                for (long until = System.nanoTime() + BACKLOG_WAIT.toNanos(); accepted.get() < TRAINING_CONNECTS
                        && System.nanoTime() < until; ) {
                    Thread.sleep(10);
                }
                if (accepted.get() != TRAINING_CONNECTS) {
                    throw new IllegalStateException("the training exec's connects reached the listener "
                            + accepted.get() + " times, not " + TRAINING_CONNECTS + dump(logs));
                }
                Files.writeString(execDone, "");
                Files.setPosixFilePermissions(execDone, PosixFilePermissions.fromString("rw-r--r--"));
                // The agent ends after the exec; the runtime exits once the boundary ended and the
                // supervisor left, and each JVM writes its cache on the way out.
                while (alive(supervisorImage) || alive(image)) {
                    check(deadline, "the runtime and the supervisor did not exit after their agent", logs);
                    Thread.sleep(100);
                }
                if (!Files.isRegularFile(cache) || Files.size(cache) == 0) {
                    throw new IllegalStateException("the runtime wrote no AOT cache" + dump(logs));
                }
                if (!Files.isRegularFile(supervisorCache) || Files.size(supervisorCache) == 0) {
                    throw new IllegalStateException("the supervisor wrote no AOT cache" + dump(logs));
                }
                String runtimeLog = text(logs.resolve("runtime.log"));
                if (!runtimeLog.contains("\"serving\":true")) {
                    throw new IllegalStateException("the runtime never served" + dump(logs));
                }
                System.out.print(runtimeLog);
                Files.copy(cache, image.resolve("lib/" + name + ".aot"), StandardCopyOption.REPLACE_EXISTING);
                Files.copy(supervisorCache, supervisorImage.resolve("lib/" + SUPERVISOR + ".aot"), StandardCopyOption.REPLACE_EXISTING);
                status = 0;
            } finally {
                if (id != null) {
                    try {
                        // The driver's trusted cleanup: the namespace holder, the cgroup and the
                        // host's id-range slot would otherwise outlive every build.
                        rest.call("DELETE", "/v1/sandboxes/" + id, null);
                    } catch (IOException | InterruptedException | RuntimeException e) {
                        System.err.println("the training sandbox " + id + " could not be deleted: " + e);
                    }
                }
                listener.close();
                acceptor.join(5_000);
                gateway.destroy();
                if (!gateway.waitFor(30, java.util.concurrent.TimeUnit.SECONDS)) {
                    gateway.destroyForcibly();
                }
                if (status != 0) {
                    System.err.println("--- gateway.log\n" + text(gatewayLog) + (logs == null ? "" : dump(logs)));
                }
            }
        } finally {
            try (Stream<Path> all = Files.walk(work)) {
                all.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
        System.exit(status);
    }

    /** A copy of an image's launcher that also writes an AOT cache when its JVM exits. */
    private static Path trainingLauncher(Path work, Path image, String name, Path cache, String extra) throws IOException {
        Path launcher = work.resolve("train-" + name);
        Files.writeString(launcher, "#!/bin/sh\ncd -P -- '" + image + "' || exit 127\n"
                + "unset JAVA_TOOL_OPTIONS JDK_JAVA_OPTIONS _JAVA_OPTIONS CLASSPATH\n"
                + "exec bin/java -XX:AOTCacheOutput='" + cache + "' " + extra + " @conf/" + name + ".args \"$@\"\n");
        Files.setPosixFilePermissions(launcher, PosixFilePermissions.fromString("rwxr-xr-x"));
        return launcher;
    }

    /** Any JVM of this image (its program's, or its cache assembly): only this run starts one. */
    private static boolean alive(Path image) {
        Path java = image.resolve("bin/java");
        return ProcessHandle.allProcesses().anyMatch(p -> p.info().command().map(Path::of).filter(java::equals).isPresent());
    }

    /** The gateway's REST API with its API token. */
    private record Rest(URI base, String token) {
        /** @return the response body; fails on any status of 300 or more */
        String call(String method, String path, String body) throws IOException, InterruptedException {
            HttpRequest.Builder request = HttpRequest.newBuilder(base.resolve(path)).timeout(Duration.ofSeconds(120))
                    .header("Authorization", "Bearer " + token);
            request = body == null ? request.method(method, HttpRequest.BodyPublishers.noBody())
                    : request.header("Content-Type", "application/json").method(method, HttpRequest.BodyPublishers.ofString(body));
            try (HttpClient http = HttpClient.newHttpClient()) {
                HttpResponse<String> response = http.send(request.build(), HttpResponse.BodyHandlers.ofString());
                if (response.statusCode() >= 300) {
                    throw new IllegalStateException(method + " " + path + " -> HTTP " + response.statusCode() + ": " + response.body());
                }
                return response.body();
            }
        }
    }

    /** A string field of a JSON text (enough for the gateway's own answers). */
    private static String field(String json, String name) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("\"" + name + "\"\\s*:\\s*\"([^\"]*)\"").matcher(json);
        if (!m.find()) {
            throw new IllegalStateException("no \"" + name + "\" in " + json);
        }
        return m.group(1);
    }

    private static String quote(String text) {
        return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
    }

    private static String array(List<String> values) {
        return "[" + String.join(",", values.stream().map(ServeTraining::quote).toList()) + "]";
    }

    private static void check(long deadline, String what, Path logs) {
        if (System.nanoTime() > deadline) {
            throw new IllegalStateException(what + " within " + RUN_WAIT + dump(logs));
        }
    }

    private static String dump(Path logs) {
        return "\n--- supervisor.log\n" + text(logs.resolve("supervisor.log")) + "\n--- runtime.log\n" + text(logs.resolve("runtime.log"));
    }

    private static String text(Path file) {
        try {
            return Files.exists(file) ? Files.readString(file) : "";
        } catch (IOException e) {
            return "(unreadable: " + e.getMessage() + ")";
        }
    }
}
