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
import jakarta.json.JsonValue;
import jakarta.json.JsonWriter;
import jakarta.json.JsonWriterFactory;

/**
 * {@code openshell [--state DIR] [--output human|json] COMMAND ...}. Human output by default,
 * {@code --output json} everywhere; errors say what to do; exit codes as in the module doc.
 */
public final class Main {
    static final String USAGE = """
            usage: openshell [--state DIR] [--output human|json] COMMAND

            commands:
              gateway start [--background] [--port N] [--host H] [--driver-setting K=V]...
                            [--host-alias NAME=ADDRESS]... [--upstream-ca FILE]...
                            [--upstream-resolver ADDRESS:PORT]
                                                                   run the gateway (foreground by default);
                                                                   aliases, upstream CAs and the resolver apply
                                                                   to every sandbox (operator configuration,
                                                                   never policy)
              gateway status                                       is the gateway up, and where
              gateway stop                                         stop a background gateway
              sandbox create --policy FILE [--name N] [--driver D] [--workspace DIR] [--provider P]... [--env K=V]...
                             [--no-wait] -- AGENT...               admit and launch; waits until it runs
              sandbox list                                         every sandbox
              sandbox get NAME                                     one sandbox (recorded and observed state)
              sandbox exec NAME [--tty] [--no-stdin] -- CMD...     run CMD in it with stdin streamed (EOF
                                                                   half-closes it); stdout/stderr separate,
                                                                   or merged on a PTY with --tty; exits with
                                                                   CMD's exit code; Ctrl-C ends CMD's tree
              sandbox connect NAME [-- CMD...]                     interactive shell (or CMD) on a PTY: raw
                                                                   terminal, window size follows yours
              sandbox forward NAME [LOCAL:]PORT                    relay 127.0.0.1:LOCAL on this host (default
                                                                   LOCAL = PORT, 0 = any) to PORT on the
                                                                   sandbox's own loopback, until Ctrl-C
              sandbox logs NAME                                    the supervisor's recent log lines
              sandbox stop NAME | sandbox start NAME [--no-wait]   stop every process / launch again
              sandbox delete NAME                                  kill everything of a sandbox and remove it
              run --policy FILE [--workspace DIR] [--provider P]... -- CMD...
                                                                   one shot: start a gateway if none runs,
                                                                   create a sandbox, run CMD, delete it,
                                                                   exit with CMD's exit code
              provider create NAME --env VAR --host H [--host H]... (--from-env VAR | --from-stdin)
                                                                   a named secret bound to hosts; the agent
                                                                   sees only a placeholder in VAR
              provider list | provider delete NAME
              policy set NAME --policy FILE [--wait]               replace a running sandbox's policy: sends it;
                                                                   with --wait prints LOADED, or FAILED (exit 1)
                                                                   and why
              policy check --policy FILE                           validate; problems with line numbers, then
                                                                   where this engine is stricter (DNS per binary)
              policy explain --policy FILE --binary PATH [--sha256 HEX] [--ancestor PATH[@sha256:HEX]]...
                             --host H [--address IP] --port P [--method M --path TARGET?QUERY]
                             [--workload-root DIR]                 the decision, its rule and block, as live
                                                                   (docs/policy.md)
              version

            state: --state, else $OPENSHELL_HOME, else ~/.openshell
            exit codes: 0 ok (explain: allowed), 1 failed (check: invalid), 2 usage, 3 no gateway,
                        4 no such sandbox, 5 explain: denied; exec and run: the command's own exit code
            """;
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

    private final PrintStream out;
    private final PrintStream err;
    private Path state;
    private boolean json;

    Main(PrintStream out, PrintStream err) {
        this.out = out;
        this.err = err;
    }

    /**
     * @param args command line
     */
    public static void main(String[] args) {
        System.exit(new Main(System.out, System.err).run(List.of(args)));
    }

    int run(List<String> args) {
        try {
            Deque<String> in = new ArrayDeque<>(args);
            state = defaultState();
            while (!in.isEmpty() && in.peek().startsWith("--")) {
                String option = in.pop();
                switch (option) {
                    case "--state" -> state = Path.of(value(in, option)).toAbsolutePath();
                    case "--output" -> json = switch (value(in, option)) {
                        case "json" -> true;
                        case "human" -> false;
                        default -> throw usage("--output is human or json");
                    };
                    case "--help" -> {
                        out.print(USAGE);
                        return 0;
                    }
                    default -> throw usage("unknown option " + option);
                }
            }
            String command = in.isEmpty() ? "help" : in.pop();
            if (command.equals("policy")) {
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
                    default -> throw usage("policy check|explain");
                };
            }
            switch (command) {
                case "gateway" -> gateway(in);
                case "sandbox" -> {
                    return sandbox(in);
                }
                case "provider" -> provider(in);
                case "run" -> {
                    return SandboxCommands.run(this, in);
                }
                case "version" -> print(Json.createObjectBuilder().add("version", version()).build(),
                        () -> out.println("openshell " + version()));
                case "help" -> out.print(USAGE);
                default -> throw usage("unknown command '" + command + "'");
            }
            return 0;
        } catch (CliException e) {
            if (json) {
                out.println(write(Json.createObjectBuilder().add("error", e.getMessage())
                        .add("exitCode", e.exitCode()).build()));
            } else {
                err.println("openshell: " + e.getMessage());
            }
            return e.exitCode();
        }
    }

    private void gateway(Deque<String> in) {
        String sub = in.isEmpty() ? "" : in.pop();
        switch (sub) {
            case "start" -> gatewayStart(in);
            case "status" -> {
                JsonObject endpoint = GatewayClient.endpoint(state);
                GatewayClient.Reply health = GatewayClient.connect(state).call("GET", "/healthz");
                if (health.status() != 200) {
                    throw new CliException(CliException.NO_GATEWAY, "the gateway at " + endpoint.getString("url")
                            + " is not healthy: " + health.body());
                }
                print(endpoint, () -> out.println("gateway running at " + endpoint.getString("url") + " (pid "
                        + endpoint.getJsonNumber("pid") + ")"));
            }
            case "stop" -> gatewayStop();
            default -> throw usage("gateway start|status|stop");
        }
    }

    private void gatewayStart(Deque<String> in) {
        boolean background = false;
        List<String> options = new ArrayList<>(List.of("--state", state.toString()));
        while (!in.isEmpty()) {
            String option = in.pop();
            switch (option) {
                case "--background" -> background = true;
                case "--port", "--host", "--driver-setting", "--host-alias", "--upstream-resolver" -> {
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
            pb.redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
                    .redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile()));
            Process p = pb.start();
            Instant deadline = Instant.now().plus(START_TIMEOUT);
            Instant nextProgress = Instant.now().plusSeconds(1);
            while (true) {
                Optional<JsonObject> up = runningGateway().filter(e -> e.getJsonNumber("pid").longValue() == p.pid());
                if (up.isPresent()) {
                    print(up.get(), () -> out.println("gateway running at " + up.get().getString("url")
                            + " (pid " + p.pid() + ", log " + log + ")"));
                    return;
                }
                if (!p.isAlive()) {
                    throw new CliException(CliException.FAILED, "the gateway exited with " + p.exitValue()
                            + " before listening; see " + log);
                }
                if (Instant.now().isAfter(deadline)) {
                    p.destroy();
                    throw new CliException(CliException.FAILED, "the gateway did not listen within " + START_TIMEOUT
                            + "; see " + log);
                }
                if (!json && Instant.now().isAfter(nextProgress)) {
                    err.println("waiting for the gateway to listen…");
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
                JsonObject body = ok(GatewayClient.connect(state).call("GET", "/v1/sandboxes/" + name));
                print(body, () -> body.forEach((k, v) -> out.printf("%-18s %s%n", k + ":", plain(v))));
            }
            case "delete" -> {
                String name = value(in, "sandbox delete NAME");
                ok(GatewayClient.connect(state).call("DELETE", "/v1/sandboxes/" + name));
                print(Json.createObjectBuilder().add("deleted", name).build(),
                        () -> out.println("sandbox " + name + " deleted"));
            }
            case "create" -> SandboxCommands.create(this, in);
            case "exec" -> {
                return SandboxCommands.exec(this, in);
            }
            case "connect" -> {
                return SandboxCommands.connect(this, in);
            }
            case "forward" -> {
                return PortForward.run(this, in);
            }
            case "logs" -> SandboxCommands.logs(this, in);
            case "stop" -> SandboxCommands.stop(this, in);
            case "start" -> SandboxCommands.start(this, in);
            default -> throw usage("sandbox create|list|get|exec|connect|forward|logs|stop|start|delete");
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
            SandboxCommands.printProblems(this, file, reply.body());
            return CliException.FAILED;
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

    /** Starts a background gateway for this state directory unless one runs; used by {@code run}. */
    void ensureGateway() {
        if (runningGateway().isEmpty()) {
            gatewayStart(new ArrayDeque<>(List.of("--background")));
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
                ok(GatewayClient.connect(state).call("DELETE", "/v1/providers/" + name));
                print(Json.createObjectBuilder().add("deleted", name).build(),
                        () -> out.println("provider " + name + " deleted"));
            }
            default -> throw usage("provider create|list|delete");
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
        throw new CliException(code, message);
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
        return new CliException(CliException.USAGE, message + "\n" + USAGE);
    }
}
