package openshell.cli;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Base64;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import jakarta.json.Json;
import jakarta.json.JsonArrayBuilder;
import jakarta.json.JsonObject;
import jakarta.json.JsonObjectBuilder;
import jakarta.json.JsonString;

/**
 * {@code sandbox create|exec|logs|stop|start} and {@code run}: each one REST call (or a short
 * series) against the gateway; exec output is streamed as it arrives, stdout to stdout and stderr to
 * stderr, and the command's exit code becomes the CLI's.
 */
final class SandboxCommands {
    /** What {@code sandbox connect} runs without a CMD. */
    static final List<String> CONNECT_SHELL = List.of("/bin/sh");
    /**
     * How long an exec's command has to end after the CLI was interrupted (Ctrl-C on pipes,
     * SIGTERM, SIGHUP) and passed SIGINT on; after it the gateway terminates the command's tree.
     */
    static final java.time.Duration INTERRUPT_GRACE = java.time.Duration.ofSeconds(5);
    /** The CLI's exit code when an interrupted command had to be terminated (128 + SIGINT). */
    static final int INTERRUPTED_EXIT = 130;
    private static final int SIGINT = 2;
    /** Terminal size for {@code --tty} when the CLI has no terminal of its own: columns, rows. */
    static final int[] DEFAULT_TERMINAL = {80, 24};
    /** Largest policy file read. */
    static final int MAX_POLICY_BYTES = 1024 * 1024;
    /** The agent of an {@code openshell run} sandbox: it only keeps the sandbox alive for the exec. */
    static final List<String> IDLE_AGENT = List.of("/bin/sleep", "infinity");

    private SandboxCommands() {
    }

    static void create(Main main, Deque<String> in) {
        JsonObject created = submit(main, prepare(in, false));
        main.print(created, () -> main.out().println("sandbox " + created.getString("name") + " (" + created.getString("id")
                + ") " + created.getString("state")));
    }

    /** A create request as parsed, its policy read: nothing has been asked of the gateway yet. */
    private record Admission(String policyFile, JsonObject body, boolean waitForRunning, Optional<String> driver) {
    }

    /** Parses create's options and the agent after {@code --} (run: the idle agent) and reads the policy. */
    private static Admission prepare(Deque<String> in, boolean idleAgent) {
        String policyFile = null;
        String name = null;
        String workspace = null;
        String driver = null;
        String image = null;
        boolean wait = true;
        JsonArrayBuilder providers = Json.createArrayBuilder();
        JsonObjectBuilder env = Json.createObjectBuilder();
        while (!in.isEmpty() && !in.peek().equals("--")) {
            String option = in.pop();
            switch (option) {
                case "--policy" -> policyFile = Main.value(in, option);
                case "--name" -> name = Main.value(in, option);
                case "--workspace" -> workspace = Path.of(Main.value(in, option)).toAbsolutePath().normalize().toString();
                case "--provider" -> providers.add(Main.value(in, option));
                case "--driver" -> driver = Main.value(in, option);
                case "--image" -> image = Main.value(in, option);
                case "--env" -> {
                    String kv = Main.value(in, option);
                    int eq = kv.indexOf('=');
                    if (eq < 1) {
                        throw Main.usage("--env takes KEY=VALUE");
                    }
                    env.add(kv.substring(0, eq), kv.substring(eq + 1));
                }
                case "--no-wait" -> {
                    if (idleAgent) {
                        throw Main.usage("run always waits for its sandbox: --no-wait is for sandbox create");
                    }
                    wait = false;
                }
                default -> throw Main.usage("unknown option " + option);
            }
        }
        if (policyFile == null) {
            throw Main.usage("--policy FILE is required");
        }
        List<String> agent = idleAgent ? IDLE_AGENT : command(in, "AGENT");
        String policy = readPolicy(policyFile);
        JsonArrayBuilder argv = Json.createArrayBuilder();
        agent.forEach(argv::add);
        JsonObjectBuilder body = Json.createObjectBuilder().add("policy", policy)
                .add("agent", Json.createObjectBuilder().add("argv", argv).add("env", env))
                .add("providers", providers);
        if (name != null) {
            body.add("name", name);
        }
        if (workspace != null) {
            body.add("workspace", workspace);
        }
        if (driver != null) {
            // A request may only name the driver the gateway's own configuration runs; it never picks one.
            body.add("driver", driver);
        }
        if (image != null) {
            body.add("image", image);
        }
        return new Admission(policyFile, body.build(), wait, Optional.ofNullable(driver));
    }

    /** Admits, and waits for RUNNING unless told not to. */
    private static JsonObject submit(Main main, Admission admission) {
        GatewayClient gateway = GatewayClient.connect(main.state());
        GatewayClient.Reply reply = gateway.call("POST", "/v1/sandboxes", admission.body());
        if (reply.status() == 400 && reply.body().containsKey("problems")) {
            throw refusedPolicy(main, admission.policyFile(), reply.body(), "nothing was created");
        }
        JsonObject created = Main.ok(reply);
        return admission.waitForRunning() ? awaitRunning(main, gateway, created.getString("id")) : created;
    }

    /**
     * {@code sandbox exec NAME [--tty] [--no-stdin] -- CMD...}: CMD with the CLI's stdin streamed
     * to it (end of input half-closes it), stdout and stderr apart, or on a PTY with {@code --tty}.
     */
    static int exec(Main main, Deque<String> in) {
        String name = Main.value(in, "sandbox exec NAME -- CMD...");
        boolean tty = false;
        boolean stdin = true;
        while (!in.isEmpty() && !in.peek().equals("--")) {
            String option = in.pop();
            switch (option) {
                case "--tty", "-t" -> tty = true;
                case "--no-stdin" -> stdin = false;
                // Stdin is always streamed now; kept so older scripts keep working.
                case "--stdin" -> stdin = true;
                default -> throw Main.usage("unknown option " + option);
            }
        }
        List<String> cmd = command(in, "CMD");
        return interactive(main, name, cmd, tty, stdin);
    }

    /** {@code sandbox connect NAME [-- CMD...]}: an interactive shell (or CMD) on a PTY. */
    static int connect(Main main, Deque<String> in) {
        String name = Main.value(in, "sandbox connect NAME");
        List<String> cmd = in.isEmpty() ? CONNECT_SHELL : command(in, "CMD");
        return interactive(main, name, cmd, true, true);
    }

    private static int interactive(Main main, String name, List<String> cmd, boolean tty, boolean stdin) {
        GatewayClient gateway = GatewayClient.connect(main.state());
        Map<String, String> env = new java.util.LinkedHashMap<>();
        Optional<int[]> size = Optional.empty();
        if (tty) {
            size = Optional.of(LocalTerminal.size().orElse(DEFAULT_TERMINAL));
            env.put("TERM", Optional.ofNullable(System.getenv("TERM")).filter(t -> !t.isBlank()).orElse("xterm"));
        }
        // Ctrl-C: on a PTY it is a key the remote terminal turns into SIGINT. On pipes it is a
        // signal to the CLI: the JVM runs its shutdown hooks, and this one passes SIGINT on, gives
        // the command INTERRUPT_GRACE to end (its output and exit code still come through), and
        // only then ends the stream, so the gateway terminates the tree. The JDK has no supported
        // signal API without jdk.unsupported (see module-info), hence a hook, which SIGTERM and
        // SIGHUP run as well. It is installed before the exec starts: the command's first output
        // can arrive before gateway.exec returns, and a signal after it must reach the command.
        java.util.concurrent.atomic.AtomicBoolean finished = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.CompletableFuture<ExecStream> started = new java.util.concurrent.CompletableFuture<>();
        java.util.concurrent.atomic.AtomicReference<Optional<LocalTerminal>> raw =
                new java.util.concurrent.atomic.AtomicReference<>(Optional.empty());
        Thread interrupt = new Thread(() -> {
            if (finished.get()) {
                return;
            }
            ExecStream interrupted;
            try {
                // A signal while the exec is being started: wait for it, then pass the signal on.
                interrupted = started.get(INTERRUPT_GRACE.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
            } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException
                     | InterruptedException e) {
                return;
            }
            raw.get().ifPresent(LocalTerminal::close);
            interrupted.signal(SIGINT);
            int code = INTERRUPTED_EXIT;
            try {
                Optional<ExecStream.Outcome> ended = interrupted.await(INTERRUPT_GRACE);
                if (ended.isPresent() && ended.get().exitCode().isPresent()) {
                    code = ended.get().exitCode().get();
                } else {
                    interrupted.cancel();
                    main.message("openshell: interrupted; " + String.join(" ", cmd) + " did not end within "
                            + INTERRUPT_GRACE.toSeconds() + " s of SIGINT and was terminated");
                }
            } catch (InterruptedException e) {
                interrupted.cancel();
            }
            main.out().flush();
            main.err().flush();
            Runtime.getRuntime().halt(code);
        }, "exec-interrupt");
        Runtime.getRuntime().addShutdownHook(interrupt);
        ExecStream stream;
        try {
            stream = gateway.exec(name, cmd, env, size, main.out(), main.err());
        } catch (RuntimeException e) {
            started.completeExceptionally(e);
            finished.set(true);
            removeHook(interrupt);
            throw e;
        }
        Optional<LocalTerminal> terminal = tty ? LocalTerminal.raw() : Optional.empty();
        raw.set(terminal);
        started.complete(stream);
        try {
            int[] first = size.orElse(DEFAULT_TERMINAL);
            terminal.ifPresent(t -> t.onResize(first, stream::resize));
            if (stdin) {
                Thread pump = new Thread(() -> stream.pumpStdin(System.in), "exec-stdin");
                // The exit may come while the pump still waits on the local stdin.
                pump.setDaemon(true);
                pump.start();
            } else {
                stream.pumpStdin(java.io.InputStream.nullInputStream());
            }
            ExecStream.Outcome outcome = stream.await();
            main.out().flush();
            if (outcome.error().isPresent()) {
                String error = outcome.error().get();
                int code = error.startsWith("NOT_FOUND") ? CliException.NOT_FOUND : CliException.FAILED;
                throw new CliException(code, "exec in " + name + " failed: " + error);
            }
            return outcome.exitCode().orElseThrow();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            stream.cancel();
            throw new CliException(CliException.FAILED, "interrupted");
        } finally {
            finished.set(true);
            removeHook(interrupt);
            terminal.ifPresent(LocalTerminal::close);
        }
    }

    private static void removeHook(Thread hook) {
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException shuttingDown) {
            // The hook runs (or ran) and decides the exit code.
        }
    }

    /** The one-shot NDJSON exec of {@code openshell run} (no stdin). */
    private static int execIn(Main main, GatewayClient gateway, String name, List<String> cmd, byte[] input) {
        JsonArrayBuilder argv = Json.createArrayBuilder();
        cmd.forEach(argv::add);
        JsonObjectBuilder body = Json.createObjectBuilder().add("argv", argv);
        if (input.length > 0) {
            body.add("stdin", Base64.getEncoder().encodeToString(input));
        }
        AtomicInteger exit = new AtomicInteger(-1);
        AtomicReference<String> error = new AtomicReference<>();
        GatewayClient.Reply reply = gateway.stream("/v1/sandboxes/" + name + "/exec", body.build(), line -> {
            try {
                if (line.containsKey("stdout")) {
                    main.out().write(Base64.getDecoder().decode(line.getString("stdout")));
                    main.out().flush();
                } else if (line.containsKey("stderr")) {
                    main.err().write(Base64.getDecoder().decode(line.getString("stderr")));
                    main.err().flush();
                } else if (line.containsKey("exit")) {
                    exit.set(line.getInt("exit"));
                } else if (line.containsKey("error")) {
                    error.set(line.getString("error"));
                }
            } catch (IOException e) {
                throw new CliException(CliException.FAILED, "cannot write output: " + e.getMessage());
            }
        });
        if (reply.status() != 200) {
            Main.ok(reply);
        }
        if (error.get() != null) {
            throw new CliException(CliException.FAILED, "exec in " + name + " failed: " + error.get());
        }
        if (exit.get() < 0) {
            throw new CliException(CliException.FAILED, "the exec stream ended without an exit status");
        }
        return exit.get();
    }

    /**
     * {@code sandbox logs NAME [--denied] [--since DURATION|TIMESTAMP]}: the kept lines, the
     * supervisor's decisions among them in words ({@link SandboxLogView}); with {@code -o json} the
     * gateway's answer as it is, entries with their source, time and audit record.
     */
    static void logs(Main main, Deque<String> in) {
        String name = Main.value(in, "sandbox logs NAME");
        StringBuilder query = new StringBuilder();
        while (!in.isEmpty()) {
            String option = in.pop();
            switch (option) {
                case "--denied" -> query.append(query.isEmpty() ? "?" : "&").append("denied=true");
                case "--since" -> query.append(query.isEmpty() ? "?" : "&").append("since=")
                        .append(SandboxLogView.since(Main.value(in, option), Instant.now()));
                default -> throw Main.usage("unknown option " + option);
            }
        }
        JsonObject body = Main.ok(GatewayClient.connect(main.state()).call("GET", "/v1/sandboxes/" + name + "/logs" + query));
        main.print(body, () -> SandboxLogView.lines(body).forEach(main.out()::println));
    }

    static void stop(Main main, Deque<String> in) {
        String name = Main.value(in, "sandbox stop NAME");
        Main.end(in);
        JsonObject body = Main.ok(GatewayClient.connect(main.state()).call("POST", "/v1/sandboxes/" + name + "/stop"));
        main.print(body, () -> main.out().println("sandbox " + name + " " + body.getString("state")));
    }

    static void start(Main main, Deque<String> in) {
        String name = Main.value(in, "sandbox start NAME");
        boolean wait = true;
        while (!in.isEmpty()) {
            String option = in.pop();
            if (!option.equals("--no-wait")) {
                throw Main.usage("unknown option " + option);
            }
            wait = false;
        }
        GatewayClient gateway = GatewayClient.connect(main.state());
        JsonObject started = Main.ok(gateway.call("POST", "/v1/sandboxes/" + name + "/start"));
        JsonObject body = wait ? awaitRunning(main, gateway, started.getString("id")) : started;
        main.print(body, () -> main.out().println("sandbox " + name + " " + body.getString("state") + " (generation "
                + body.getJsonNumber("runtimeGeneration") + ")"));
    }

    /**
     * {@code run --policy FILE [--driver D] [--image IMAGE] [--workspace DIR] [--provider P]... -- CMD...}: a gateway if none
     * runs, a sandbox, CMD in it with output streamed, the sandbox deleted, CMD's exit code.
     */
    static int run(Main main, Deque<String> in) {
        List<String> before = new java.util.ArrayList<>();
        while (!in.isEmpty() && !in.peek().equals("--")) {
            before.add(in.pop());
        }
        // Every option is checked before anything starts: a usage error leaves no gateway behind.
        Admission admission = prepare(new java.util.ArrayDeque<>(before), true);
        List<String> cmd = command(in, "CMD");
        // The gateway run starts runs the driver run names (a running gateway keeps its own, and refuses another).
        main.ensureGateway(admission.driver());
        JsonObject sandbox = submit(main, admission);
        String id = sandbox.getString("id");
        GatewayClient gateway = GatewayClient.connect(main.state());
        try {
            return execIn(main, gateway, id, cmd, new byte[0]);
        } finally {
            GatewayClient.Reply deleted = gateway.call("DELETE", "/v1/sandboxes/" + id);
            if (deleted.status() != 204) {
                main.message("openshell: could not delete sandbox " + id + ": "
                        + deleted.body().getString("message", "HTTP " + deleted.status())
                        + " (openshell sandbox delete " + id + ")");
            }
        }
    }

    private static JsonObject awaitRunning(Main main, GatewayClient gateway, String id) {
        Instant deadline = Instant.now().plus(Main.RUNNING_TIMEOUT);
        Instant nextProgress = Instant.now().plusSeconds(1);
        while (true) {
            JsonObject s = Main.ok(gateway.call("GET", "/v1/sandboxes/" + id));
            String state = s.getString("state");
            if (state.equals("RUNNING") && s.getBoolean("sessionConnected", false)) {
                return s;
            }
            if (state.equals("FAILED") || s.getString("observed", "").equals("GONE")) {
                throw new CliException(CliException.FAILED, "sandbox " + id + " did not start: " + state + ", "
                        + s.getString("failureCause", s.getString("observedDetail", "")) + " (openshell sandbox logs " + id + ")");
            }
            if (Instant.now().isAfter(deadline)) {
                throw new CliException(CliException.FAILED, "sandbox " + id + " is still " + state + " after "
                        + Main.RUNNING_TIMEOUT + "; observed: " + s.getString("observed", "?") + " "
                        + s.getString("observedDetail", "") + " (openshell sandbox get " + id + ")");
            }
            if (Instant.now().isAfter(nextProgress)) {
                // Progress on stderr, a line of its own; the result goes to stdout once it runs.
                main.message("waiting for sandbox " + id + " to run (" + state + ", "
                        + s.getString("observed", "?") + ")...");
                nextProgress = Instant.now().plusSeconds(5);
            }
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CliException(CliException.FAILED, "interrupted");
            }
        }
    }

    private static List<String> command(Deque<String> in, String what) {
        if (in.isEmpty() || !in.pop().equals("--") || in.isEmpty()) {
            throw Main.usage("give the " + what + " after --, e.g. -- /bin/sh -c 'echo hi'");
        }
        List<String> cmd = List.copyOf(in);
        in.clear();
        return cmd;
    }

    static String readPolicy(String file) {
        Path path = Path.of(file);
        try {
            if (Files.size(path) > MAX_POLICY_BYTES) {
                throw new CliException(CliException.USAGE, file + " is larger than " + MAX_POLICY_BYTES + " bytes");
            }
            return Files.readString(path, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new CliException(CliException.USAGE, "cannot read the policy " + file + ": " + e.getMessage());
        }
    }

    /**
     * A policy the gateway refused: its problems on stderr with line numbers (as text), and the
     * error to throw, whose JSON document carries the problems.
     */
    static CliException refusedPolicy(Main main, String file, JsonObject body, String outcome) {
        List<JsonObject> problems = body.getJsonArray("problems").getValuesAs(JsonObject.class);
        if (!main.json()) {
            main.message("openshell: the policy " + file + " was refused (" + problems.size() + " problem(s)):");
            for (JsonObject p : problems) {
                main.err().println("  " + file + ":" + p.getInt("line") + ":" + p.getInt("column") + ": "
                        + p.getString("path") + ": " + p.getString("message"));
            }
        }
        return CliException.fromGateway(CliException.FAILED, body.getString("error", "INVALID_POLICY"),
                "the policy " + file + " was refused; " + outcome + " (openshell policy check --policy " + file + ")", body);
    }
}
