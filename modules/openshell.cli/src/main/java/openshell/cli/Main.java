package openshell.cli;

import java.io.IOException;
import java.io.PrintStream;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import jakarta.json.Json;
import jakarta.json.JsonObject;
import jakarta.json.JsonObjectBuilder;
import jakarta.json.JsonValue;
import jakarta.json.JsonWriter;
import jakarta.json.JsonWriterFactory;

/**
 * {@code openshell [--state DIR] [-o text|json] COMMAND ...}. Text output by default, {@code -o json}
 * (one JSON document on stdout) for every command that prints results; the options every command
 * takes ({@link GlobalOptions}, {@code -h}/{@code --help} among them) may stand anywhere before
 * {@code --}. Errors say what to do; a usage error prints the usage of the command it was given to
 * on stderr; exit codes as in the module doc.
 */
public final class Main {
    /** The overview, as {@code openshell --help} prints it. */
    static final String USAGE = Usage.of("");
    /** How long {@code gateway start --background} waits for the gateway to listen. */
    static final Duration START_TIMEOUT = Duration.ofSeconds(60);
    /** How long {@code gateway stop} waits for the gateway to exit. */
    static final Duration STOP_TIMEOUT = Duration.ofSeconds(30);
    /**
     * How far the gateway's recorded start and the one read now may differ for the same process.
     * Each JVM derives start instants from the kernel's boot time, read once in whole seconds,
     * and the kernel moves it as the wall clock is adjusted: {@code gateway stop} refused a running
     * gateway as "stale" once it had moved by a second. A recycled pid this close to the
     * original's start would need the pid space to wrap in that time.
     */
    static final Duration START_SLACK = Duration.ofSeconds(2);
    /** How long {@code sandbox create}/{@code start} wait for the sandbox's supervisor to report in. */
    static final Duration RUNNING_TIMEOUT = Duration.ofSeconds(180);

    private final LineEnds out;
    private final LineEnds err;
    private Path state;
    private boolean json;

    Main(PrintStream out, PrintStream err) {
        this.out = new LineEnds(out);
        this.err = new LineEnds(err);
    }

    /**
     * @param args command line
     */
    public static void main(String[] args) {
        System.exit(new Main(System.out, System.err).run(List.of(args)));
    }

    int run(List<String> args) {
        GlobalOptions options = GlobalOptions.parse(args);
        String path = Usage.path(options.rest());
        json = options.json();
        try {
            state = options.state().orElseGet(Main::defaultState);
            if (options.problem().isPresent()) {
                throw usage(options.problem().get());
            }
            if (options.help()) {
                out.print(Usage.of(path));
                return 0;
            }
            return dispatch(new ArrayDeque<>(options.rest()));
        } catch (CliException e) {
            report(e, path);
            return e.exitCode();
        } finally {
            out.flush();
            err.flush();
        }
    }

    private int dispatch(Deque<String> in) {
        String command = in.isEmpty() ? "help" : in.pop();
        switch (command) {
            case "policy" -> {
                String sub = in.isEmpty() ? "" : in.pop();
                PolicyCommands.Output output = new PolicyCommands.Output() {
                    @Override
                    public void print(JsonObject body, Runnable human) {
                        Main.this.print(body, human);
                    }

                    @Override
                    public void line(String text) {
                        out.println(text);
                    }
                };
                return switch (sub) {
                    case "set" -> policySet(in);
                    case "check" -> PolicyCommands.check(in, output);
                    case "explain" -> PolicyCommands.explain(in, output);
                    default -> throw unknownSubcommand("policy", sub);
                };
            }
            case "gateway" -> gateway(in);
            case "sandbox" -> {
                return sandbox(in);
            }
            case "provider" -> provider(in);
            case "run" -> {
                noJson("run");
                return SandboxCommands.run(this, in);
            }
            case "version" -> {
                end(in);
                print(Json.createObjectBuilder().add("version", version()).build(),
                        () -> out.println("openshell " + version()));
            }
            case "help" -> {
                // help [COMMAND...]: the same as COMMAND --help; an unknown COMMAND is a usage error.
                String of = Usage.path(List.copyOf(in));
                if (!in.isEmpty() && of.isEmpty()) {
                    throw usage("no command '" + String.join(" ", in) + "'");
                }
                out.print(Usage.of(of));
            }
            default -> throw usage("unknown command '" + command + "'");
        }
        return 0;
    }

    /**
     * Prints an error: text on stderr, or with {@code -o json} one error document on stdout
     * ({@code {"error":REASON,"message":...,"exitCode":N}}, the gateway's error body's shape with the
     * exit code added). A usage error also prints the command's usage on stderr.
     */
    private void report(CliException e, String path) {
        if (json) {
            JsonObjectBuilder doc = Json.createObjectBuilder();
            e.details().ifPresent(d -> d.forEach(doc::add));
            out.startLine();
            out.println(write(doc.add("error", e.reason()).add("message", e.getMessage()).add("exitCode", e.exitCode())
                    .build()));
        } else {
            message("openshell: " + e.getMessage());
        }
        if (e.showUsage()) {
            err.println();
            err.print(Usage.of(path));
        }
    }

    /**
     * Prints a line of the CLI's own on stderr (progress, a warning, an error), always on a line of
     * its own: after output that did not end its line (a command's, in exec or run) it starts a new one.
     */
    void message(String line) {
        if (!out.atLineStart() || !err.atLineStart()) {
            err.println();
            out.markLineStart();
        }
        err.println(line);
    }

    /** {@code -o json} is for commands that print results; these print a command's own output. */
    void noJson(String command) {
        if (json) {
            throw usage("-o json does not apply to " + command + ": what it prints is the command's own output"
                    + " (use -o json with sandbox get, list, logs, ...)");
        }
    }

    /** Anything left on the command line is a usage error, never silently ignored. */
    static void end(Deque<String> in) {
        if (!in.isEmpty()) {
            throw usage((in.peek().startsWith("-") ? "unknown option " : "unexpected argument ") + in.peek());
        }
    }

    private static CliException unknownSubcommand(String group, String sub) {
        return usage(sub.isEmpty() ? group + " needs a subcommand" : "unknown command '" + group + " " + sub + "'");
    }

    private void gateway(Deque<String> in) {
        String sub = in.isEmpty() ? "" : in.pop();
        switch (sub) {
            case "start" -> gatewayStart(in, false);
            case "status" -> {
                end(in);
                JsonObject endpoint = GatewayClient.endpoint(state);
                GatewayClient.Reply health = GatewayClient.connect(state).call("GET", "/healthz");
                if (health.status() != 200) {
                    throw new CliException(CliException.NO_GATEWAY, "the gateway at " + endpoint.getString("url")
                            + " is not healthy: " + health.body());
                }
                print(endpoint, () -> out.println("gateway running at " + endpoint.getString("url") + " (pid "
                        + endpoint.getJsonNumber("pid") + ")"));
            }
            case "stop" -> {
                end(in);
                gatewayStop();
            }
            default -> throw unknownSubcommand("gateway", sub);
        }
    }

    /**
     * @param forRun whether {@code run} starts it: then where it runs is progress (stderr), not the result
     */
    private void gatewayStart(Deque<String> in, boolean forRun) {
        boolean background = false;
        List<String> options = new ArrayList<>(List.of("--state", state.toString()));
        while (!in.isEmpty()) {
            String option = in.pop();
            switch (option) {
                case "--background" -> background = true;
                case "--port", "--host", "--driver", "--driver-setting", "--host-alias", "--upstream-resolver" -> {
                    options.add(option);
                    options.add(value(in, option));
                }
                case "--upstream-ca" -> {
                    options.add(option);
                    options.add(Path.of(value(in, option)).toAbsolutePath().toString());
                }
                default -> throw usage("unknown option for gateway start: " + option);
            }
        }
        if (!background) {
            noJson("gateway start in the foreground (its output is the gateway's log; -o json goes with --background)");
        }
        requirePrivate(state);
        Optional<JsonObject> running = runningGateway();
        if (running.isPresent()) {
            throw new CliException(CliException.FAILED, "a gateway already runs for " + state + " at "
                    + running.get().getString("url") + " (openshell gateway stop)");
        }
        List<String> command = new ArrayList<>(List.of(javaBinary(), "-p", modulePath(),
                "-m", "openshell.gateway/openshell.gateway.GatewayMain"));
        command.addAll(options);
        ProcessBuilder pb = new ProcessBuilder(command);
        try {
            if (!background) {
                Process p = pb.inheritIO().start();
                throw exitWith(p.waitFor());
            }
            privateDirectory(state);
            Path log = state.resolve("gateway.log");
            long logStart = Files.exists(log) ? Files.size(log) : 0;
            pb.redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
                    .redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile()));
            Process p = pb.start();
            Instant deadline = Instant.now().plus(START_TIMEOUT);
            Instant nextProgress = Instant.now().plusSeconds(1);
            while (true) {
                Optional<JsonObject> up = runningGateway().filter(e -> e.getJsonNumber("pid").longValue() == p.pid());
                if (up.isPresent()) {
                    String where = "gateway running at " + up.get().getString("url") + " (pid " + p.pid() + ", log " + log + ")";
                    if (forRun) {
                        message("openshell: started a " + where);
                    } else {
                        print(up.get(), () -> out.println(where));
                    }
                    return;
                }
                if (!p.isAlive()) {
                    throw new CliException(CliException.FAILED, "the gateway exited with " + p.exitValue()
                            + " before listening: " + GatewayStartLog.cause(log, logStart) + " (its whole log: " + log + ")");
                }
                if (Instant.now().isAfter(deadline)) {
                    p.destroy();
                    throw new CliException(CliException.FAILED, "the gateway did not listen within " + START_TIMEOUT
                            + "; its last words: " + GatewayStartLog.cause(log, logStart) + " (its whole log: " + log + ")");
                }
                if (Instant.now().isAfter(nextProgress)) {
                    message("waiting for the gateway to listen...");
                    nextProgress = Instant.now().plusSeconds(5);
                }
                Thread.sleep(50);
            }
        } catch (IOException e) {
            throw new CliException(CliException.FAILED, "cannot start the gateway: " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CliException(CliException.FAILED, "interrupted");
        }
    }

    private void gatewayStop() {
        JsonObject endpoint = GatewayClient.endpoint(state);
        long pid = endpoint.getJsonNumber("pid").longValue();
        ProcessHandle gateway = gatewayProcess(endpoint)
                .orElseThrow(() -> new CliException(CliException.NO_GATEWAY, "no gateway process " + pid
                        + " (a stale " + state.resolve("gateway.json") + "; delete it)"));
        gateway.destroy();
        try {
            gateway.onExit().get(STOP_TIMEOUT.toSeconds(), java.util.concurrent.TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new CliException(CliException.FAILED, "the gateway (pid " + pid + ") did not stop within "
                    + STOP_TIMEOUT);
        }
        print(Json.createObjectBuilder().add("stopped", pid).build(), () -> out.println("gateway stopped"));
    }

    private int sandbox(Deque<String> in) {
        String sub = in.isEmpty() ? "" : in.pop();
        switch (sub) {
            case "list" -> {
                end(in);
                JsonObject body = ok(GatewayClient.connect(state).call("GET", "/v1/sandboxes"));
                print(body, () -> {
                    List<JsonObject> items = body.getJsonArray("sandboxes").getValuesAs(JsonObject.class);
                    if (items.isEmpty()) {
                        out.println("no sandboxes");
                        return;
                    }
                    out.printf("%-24s %-12s %-12s %-10s %-22s %s%n", "NAME", "STATE", "OBSERVED", "DRIVER", "BACKEND",
                            "CREATED");
                    for (JsonObject s : items) {
                        out.printf("%-24s %-12s %-12s %-10s %-22s %s%n", s.getString("name"), s.getString("state"),
                                s.getString("observed", "-"), s.getString("driver"), s.getString("backend"),
                                s.getString("createdAt"));
                        // Why a sandbox failed, or what is seen of one that no longer runs as recorded.
                        if (s.containsKey("failureCause")) {
                            out.printf("  failed at %s: %s%n", s.getString("failedAt"), s.getString("failureCause"));
                        } else if (!s.getString("observed", "RUNNING").equals("RUNNING")) {
                            out.printf("  observed at %s: %s%n", s.getString("observedAt", "?"), s.getString("observedDetail", ""));
                        }
                    }
                });
            }
            case "get" -> {
                String name = value(in, "sandbox get NAME");
                end(in);
                JsonObject body = ok(GatewayClient.connect(state).call("GET", "/v1/sandboxes/" + name));
                print(body, () -> body.forEach((k, v) -> out.printf("%-18s %s%n", k + ":", plain(v))));
            }
            case "delete" -> {
                String name = value(in, "sandbox delete NAME");
                end(in);
                ok(GatewayClient.connect(state).call("DELETE", "/v1/sandboxes/" + name));
                print(Json.createObjectBuilder().add("deleted", name).build(),
                        () -> out.println("sandbox " + name + " deleted"));
            }
            case "create" -> SandboxCommands.create(this, in);
            case "exec" -> {
                noJson("sandbox exec");
                return SandboxCommands.exec(this, in);
            }
            case "connect" -> {
                noJson("sandbox connect");
                return SandboxCommands.connect(this, in);
            }
            case "forward" -> {
                return PortForward.run(this, in);
            }
            case "logs" -> SandboxCommands.logs(this, in);
            case "stop" -> SandboxCommands.stop(this, in);
            case "start" -> SandboxCommands.start(this, in);
            default -> throw unknownSubcommand("sandbox", sub);
        }
        return 0;
    }

    /**
     * {@code policy set NAME --policy FILE [--wait]}: without {@code --wait} the gateway answers as
     * soon as the revision is on its way to the supervisor; with it, the supervisor's LOADED or
     * FAILED (exit 1) is the answer.
     */
    private int policySet(Deque<String> in) {
        String name = value(in, "policy set NAME --policy FILE [--wait]");
        String file = null;
        boolean wait = false;
        while (!in.isEmpty()) {
            String option = in.pop();
            switch (option) {
                case "--policy" -> file = value(in, option);
                case "--wait" -> wait = true;
                default -> throw usage("unknown option for policy set: " + option + " (policy set NAME --policy FILE [--wait])");
            }
        }
        if (file == null) {
            throw usage("policy set needs --policy FILE");
        }
        String policy = SandboxCommands.readPolicy(file);
        GatewayClient.Reply reply = GatewayClient.connect(state).call("PUT", "/v1/sandboxes/" + name + "/policy"
                + (wait ? "" : "?wait=false"), Json.createObjectBuilder().add("policy", policy).build());
        if (reply.status() == 400 && reply.body().containsKey("problems")) {
            throw SandboxCommands.refusedPolicy(this, file, reply.body(), "nothing was changed");
        }
        if (reply.status() == 422) {
            print(reply.body(), () -> err.println("policy FAILED in sandbox " + name + " (generation "
                    + reply.body().getJsonNumber("generation") + "): " + reply.body().getString("message", "")
                    + "; the previous policy stays in force"));
            return CliException.FAILED;
        }
        JsonObject body = ok(reply);
        if (reply.status() == 202) {
            print(body, () -> out.println("policy generation " + body.getJsonNumber("generation") + " sent to sandbox "
                    + name + "; openshell sandbox get " + name + " shows policyGeneration "
                    + body.getJsonNumber("generation") + " once it is LOADED (--wait waits for LOADED or FAILED)"));
            return 0;
        }
        print(body, () -> out.println("policy LOADED in sandbox " + name + " (generation "
                + body.getJsonNumber("generation") + ")"));
        return 0;
    }

    PrintStream out() {
        return out;
    }

    PrintStream err() {
        return err;
    }

    Path state() {
        return state;
    }

    boolean json() {
        return json;
    }

    /**
     * Starts a background gateway for this state directory unless one runs; used by {@code run}.
     *
     * @param driver the compute driver it runs, if {@code run} named one (else the gateway's default)
     */
    void ensureGateway(Optional<String> driver) {
        if (runningGateway().isEmpty()) {
            List<String> options = new ArrayList<>(List.of("--background"));
            driver.ifPresent(d -> options.addAll(List.of("--driver", d)));
            gatewayStart(new ArrayDeque<>(options), true);
        }
    }

    /**
     * An existing state directory must be private to its user, as the gateway requires (it keeps the
     * API token and the signing key there): said here with the command that fixes it.
     */
    static void requirePrivate(Path dir) {
        if (!Files.isDirectory(dir)) {
            return;
        }
        try {
            String perms = java.nio.file.attribute.PosixFilePermissions.toString(Files.getPosixFilePermissions(dir));
            if (!perms.equals("rwx------")) {
                throw new CliException(CliException.FAILED, "the state directory " + dir + " has permissions " + perms
                        + ", but it holds the gateway's API token and signing key and must be private to its user"
                        + " (rwx------); fix it with: chmod 700 " + dir);
            }
        } catch (IOException e) {
            throw new CliException(CliException.FAILED, "cannot read the permissions of the state directory " + dir
                    + ": " + e.getMessage());
        }
    }

    /** Creates the state directory 0700 before anything is written into it; the gateway checks it too. */
    private static void privateDirectory(Path dir) throws IOException {
        if (!Files.isDirectory(dir)) {
            Files.createDirectories(dir.getParent());
            Files.createDirectory(dir, java.nio.file.attribute.PosixFilePermissions.asFileAttribute(
                    java.nio.file.attribute.PosixFilePermissions.fromString("rwx------")));
        }
    }

    private void provider(Deque<String> in) {
        String sub = in.isEmpty() ? "" : in.pop();
        switch (sub) {
            case "create" -> {
                String name = value(in, "provider create NAME");
                String env = null;
                String value = null;
                jakarta.json.JsonArrayBuilder hosts = Json.createArrayBuilder();
                int hostCount = 0;
                while (!in.isEmpty()) {
                    String option = in.pop();
                    switch (option) {
                        case "--env" -> env = value(in, option);
                        case "--host" -> {
                            hosts.add(value(in, option));
                            hostCount++;
                        }
                        // The value never comes from the command line: every local user can read argv.
                        case "--from-env" -> {
                            String var = value(in, option);
                            value = System.getenv(var);
                            if (value == null || value.isEmpty()) {
                                throw usage("environment variable " + var + " is not set");
                            }
                        }
                        case "--from-stdin" -> value = readStdin();
                        default -> throw usage("unknown option for provider create: " + option);
                    }
                }
                if (env == null || hostCount == 0 || value == null) {
                    throw usage("provider create needs --env VAR, at least one --host, and --from-env VAR or --from-stdin");
                }
                JsonObject body = ok(GatewayClient.connect(state).call("POST", "/v1/providers",
                        Json.createObjectBuilder().add("name", name).add("env", env).add("hosts", hosts)
                                .add("value", value).build()));
                print(body, () -> out.println("provider " + name + " created; the agent sees "
                        + body.getString("env") + "=" + body.getString("placeholder")));
            }
            case "list" -> {
                end(in);
                JsonObject body = ok(GatewayClient.connect(state).call("GET", "/v1/providers"));
                print(body, () -> {
                    List<JsonObject> items = body.getJsonArray("providers").getValuesAs(JsonObject.class);
                    if (items.isEmpty()) {
                        out.println("no providers");
                    }
                    for (JsonObject p : items) {
                        out.printf("%-20s %-20s %s%n", p.getString("name"), p.getString("env"),
                                String.join(",", p.getJsonArray("hosts").getValuesAs(jakarta.json.JsonString.class)
                                        .stream().map(jakarta.json.JsonString::getString).toList()));
                    }
                });
            }
            case "delete" -> {
                String name = value(in, "provider delete NAME");
                end(in);
                ok(GatewayClient.connect(state).call("DELETE", "/v1/providers/" + name));
                print(Json.createObjectBuilder().add("deleted", name).build(),
                        () -> out.println("provider " + name + " deleted"));
            }
            default -> throw unknownSubcommand("provider", sub);
        }
    }

    private static String readStdin() {
        try {
            byte[] bytes = System.in.readNBytes(64 * 1024);
            return new String(bytes, java.nio.charset.StandardCharsets.UTF_8).strip();
        } catch (IOException e) {
            throw new CliException(CliException.FAILED, "cannot read the value from stdin: " + e.getMessage());
        }
    }

    static JsonObject ok(GatewayClient.Reply reply) {
        if (reply.status() / 100 == 2) {
            return reply.body();
        }
        String message = reply.body().getString("message", "HTTP " + reply.status());
        int code = switch (reply.status()) {
            case 404 -> CliException.NOT_FOUND;
            case 401 -> CliException.NO_GATEWAY;
            default -> CliException.FAILED;
        };
        // The gateway's reason goes into the JSON error document; every error body of it has one.
        String reason = reply.body().get("error") instanceof jakarta.json.JsonString r ? r.getString()
                : CliException.reasonOf(code);
        throw CliException.fromGateway(code, reason, message, reply.body());
    }

    private Optional<JsonObject> runningGateway() {
        try {
            JsonObject endpoint = GatewayClient.endpoint(state);
            return gatewayProcess(endpoint).map(h -> endpoint);
        } catch (CliException e) {
            return Optional.empty();
        }
    }

    /**
     * The gateway process the endpoint file names: same pid and same start time (within
     * {@link #START_SLACK}), still alive.
     */
    private static Optional<ProcessHandle> gatewayProcess(JsonObject endpoint) {
        long started = endpoint.getJsonNumber("started").longValue();
        return ProcessHandle.of(endpoint.getJsonNumber("pid").longValue()).filter(ProcessHandle::isAlive)
                .filter(h -> sameStart(started, h.info().startInstant().map(Instant::toEpochMilli).orElse(-1L)));
    }

    /**
     * @param recorded the start the gateway wrote, in epoch milliseconds
     * @param now      the start read now
     * @return whether they are one process's start
     */
    static boolean sameStart(long recorded, long now) {
        return Math.abs(recorded - now) <= START_SLACK.toMillis();
    }

    void print(JsonObject body, Runnable human) {
        if (json) {
            out.println(write(body));
        } else {
            human.run();
        }
    }

    private static String plain(JsonValue v) {
        return v.getValueType() == JsonValue.ValueType.STRING ? ((jakarta.json.JsonString) v).getString() : v.toString();
    }

    static String write(JsonObject body) {
        StringWriter w = new StringWriter();
        // An empty configuration: Parsson treats the mere presence of PRETTY_PRINTING as "on".
        JsonWriterFactory factory = Json.createWriterFactory(Map.of());
        try (JsonWriter writer = factory.createWriter(w)) {
            writer.writeObject(body);
        }
        return w.toString();
    }

    private static CliException exitWith(int code) {
        return code == 0 ? new CliException(0, "gateway stopped") : new CliException(CliException.FAILED,
                "the gateway exited with " + code);
    }

    private static String javaBinary() {
        return ProcessHandle.current().info().command().orElse(Path.of(System.getProperty("java.home"), "bin", "java")
                .toString());
    }

    private static String modulePath() {
        String path = System.getProperty("jdk.module.path");
        if (path == null || path.isBlank()) {
            throw new CliException(CliException.FAILED, "openshell must run on the module path (use ./openshell)");
        }
        return path;
    }

    static Path defaultState() {
        String home = System.getenv("OPENSHELL_HOME");
        return home != null && !home.isBlank() ? Path.of(home).toAbsolutePath()
                : Path.of(System.getProperty("user.home"), ".openshell");
    }

    private static String version() {
        return Optional.ofNullable(Main.class.getModule().getDescriptor()).flatMap(d -> d.rawVersion())
                .orElse("development");
    }

    static String value(Deque<String> in, String option) {
        if (in.isEmpty()) {
            throw usage(option + " needs a value");
        }
        return in.pop();
    }

    static CliException usage(String message) {
        return CliException.usage(message);
    }
}
