package openshell.perf.sandbox;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A gateway started for the run (through the CLI, as a user would) and its REST API, called
 * directly so the lifecycle figures hold no CLI start-up. Every call has a timeout.
 */
final class Gateway {
    /** Longest wait for one REST reply (a create or delete on a loaded machine). */
    static final Duration CALL_TIMEOUT = Duration.ofSeconds(120);
    /** Longest wait for a sandbox to reach RUNNING with its session connected. */
    static final Duration RUNNING_TIMEOUT = Duration.ofSeconds(240);
    /** Poll interval while waiting for a state: small against the figures it bounds. */
    static final Duration POLL = Duration.ofMillis(10);

    private final Path state;
    private final List<String> cli;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
    private final URI base;
    private final String token;

    private Gateway(Path state, List<String> cli, URI base, String token) {
        this.state = state;
        this.cli = cli;
        this.base = base;
        this.token = token;
    }

    /**
     * Starts a background gateway with {@code openshell gateway start --background --port 0}.
     *
     * @param cli   the CLI command (java, module path, main)
     * @param state the OPENSHELL_HOME of this run
     * @param env   launcher variables for the gateway
     * @param spares the process driver's warm spares ({@code --driver-setting spares=N})
     * @param operator the operator's network options ({@code --host-alias}, {@code --upstream-resolver})
     */
    static Gateway start(List<String> cli, Path state, Map<String, String> env, int spares, List<String> operator)
            throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(cli);
        command.addAll(List.of("--state", state.toString(), "gateway", "start", "--background", "--port", "0",
                "--driver-setting", "spares=" + spares));
        command.addAll(operator);
        try {
            run(command, env, Duration.ofSeconds(120));
        } catch (IOException e) {
            Path log = state.resolve("gateway.log");
            List<String> lines = Files.exists(log) ? Files.readAllLines(log) : List.of();
            throw new IOException(e.getMessage() + "\n--- gateway.log (end)\n"
                    + String.join("\n", lines.subList(Math.max(0, lines.size() - 30), lines.size())), e);
        }
        Map<String, Object> endpoint = Json.object(Files.readString(state.resolve("gateway.json")));
        String token = Files.readString(state.resolve("api-token"), StandardCharsets.US_ASCII).strip();
        return new Gateway(state, cli, URI.create(endpoint.get("url").toString()), token);
    }

    private static String run(List<String> command, Map<String, String> env, Duration timeout) throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
        pb.environment().putAll(env);
        Process p = pb.start();
        p.getOutputStream().close();
        byte[][] out = new byte[1][];
        Thread reader = Thread.ofVirtual().start(() -> {
            try (InputStream in = p.getInputStream()) {
                out[0] = in.readAllBytes();
            } catch (IOException e) {
                out[0] = new byte[0];
            }
        });
        if (!p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
            p.destroyForcibly();
            throw new IOException("timed out after " + timeout + ": " + command);
        }
        reader.join(Duration.ofSeconds(10));
        String text = out[0] == null ? "" : new String(out[0], StandardCharsets.UTF_8);
        if (p.exitValue() != 0) {
            throw new IOException("exit " + p.exitValue() + " from " + command + ": " + text);
        }
        return text;
    }

    Path state() {
        return state;
    }

    Map<String, Object> call(String method, String path, String body) throws IOException, InterruptedException {
        HttpRequest.Builder b = HttpRequest.newBuilder(base.resolve(path)).timeout(CALL_TIMEOUT)
                .header("Authorization", "Bearer " + token);
        if (body != null) {
            b.header("Content-Type", "application/json").method(method, HttpRequest.BodyPublishers.ofString(body));
        } else {
            b.method(method, HttpRequest.BodyPublishers.noBody());
        }
        HttpResponse<String> r = http.send(b.build(), HttpResponse.BodyHandlers.ofString());
        Map<String, Object> reply = r.body().isBlank() ? new LinkedHashMap<>() : Json.object(r.body());
        reply.put("_status", (long) r.statusCode());
        if (r.statusCode() >= 300) {
            throw new IOException(method + " " + path + " -> HTTP " + r.statusCode() + ": " + r.body());
        }
        return reply;
    }

    /** Admits a sandbox and returns its id (no wait). */
    String create(String name, String policy, Path workspace, List<String> agent) throws IOException, InterruptedException {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("name", name);
        body.put("policy", policy);
        body.put("agent", Map.of("argv", agent, "env", Map.of()));
        body.put("providers", List.of());
        body.put("workspace", workspace.toString());
        return call("POST", "/v1/sandboxes", Json.write(body)).get("id").toString();
    }

    /** Polls until RUNNING with the supervisor's session connected; fails on FAILED, GONE or timeout. */
    void awaitRunning(String id) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + RUNNING_TIMEOUT.toNanos();
        while (true) {
            Map<String, Object> s = call("GET", "/v1/sandboxes/" + id, null);
            if ("RUNNING".equals(s.get("state")) && Boolean.TRUE.equals(s.get("sessionConnected"))) {
                return;
            }
            if ("FAILED".equals(s.get("state")) || "GONE".equals(s.get("observed"))) {
                throw new IOException("sandbox " + id + " did not start: " + s);
            }
            if (System.nanoTime() > deadline) {
                throw new IOException("sandbox " + id + " not running after " + RUNNING_TIMEOUT + ": " + s);
            }
            Thread.sleep(POLL);
        }
    }

    /** Polls until the recorded state is {@code want}; false on timeout. */
    boolean awaitState(String id, String want, Duration timeout) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            if (want.equals(call("GET", "/v1/sandboxes/" + id, null).get("state"))) {
                return true;
            }
            Thread.sleep(POLL);
        }
        return false;
    }

    void stop(String id) throws IOException, InterruptedException {
        call("POST", "/v1/sandboxes/" + id + "/stop", null);
    }

    void delete(String id) throws IOException, InterruptedException {
        call("DELETE", "/v1/sandboxes/" + id, null);
    }

    /**
     * Starts an exec and returns its output as lines, as osperf writes them: the gateway streams
     * NDJSON with base64 chunks of stdout, stderr and then the exit status.
     */
    ClientRun exec(String id, List<String> argv, Duration deadline) throws IOException, InterruptedException {
        HttpRequest request = HttpRequest.newBuilder(base.resolve("/v1/sandboxes/" + id + "/exec")).timeout(CALL_TIMEOUT)
                .header("Authorization", "Bearer " + token).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(Json.write(Map.of("argv", argv)))).build();
        ClientRun run = new ClientRun("sandbox " + id + ": " + String.join(" ", argv), deadline);
        long sent = System.nanoTime();
        Thread.ofVirtual().start(() -> {
            try {
                HttpResponse<InputStream> r = http.send(request, HttpResponse.BodyHandlers.ofInputStream());
                try (BufferedReader lines = new BufferedReader(new InputStreamReader(r.body(), StandardCharsets.UTF_8))) {
                    run.onClose(lines::close);
                    if (r.statusCode() != 200) {
                        run.fail("HTTP " + r.statusCode() + ": " + lines.readLine());
                        return;
                    }
                    String line;
                    while ((line = lines.readLine()) != null) {
                        if (line.isBlank()) {
                            continue;
                        }
                        Map<String, Object> m = Json.object(line);
                        if (m.containsKey("stdout")) {
                            run.stdout(Base64.getDecoder().decode(m.get("stdout").toString()), sent);
                        } else if (m.containsKey("stderr")) {
                            run.stderr(new String(Base64.getDecoder().decode(m.get("stderr").toString()), StandardCharsets.UTF_8));
                        } else if (m.containsKey("exit")) {
                            run.exit(((Number) m.get("exit")).intValue());
                            return;
                        } else if (m.containsKey("error")) {
                            run.fail(m.get("error").toString());
                            return;
                        }
                    }
                    run.fail("the exec stream ended without an exit status");
                }
            } catch (IOException | RuntimeException e) {
                run.fail(e.toString());
            } catch (InterruptedException e) {
                run.fail("interrupted");
            }
        });
        return run;
    }

    /** Stops the gateway with {@code openshell gateway stop}. */
    void close() throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(cli);
        command.addAll(List.of("--state", state.toString(), "gateway", "stop"));
        run(command, Map.of(), Duration.ofSeconds(60));
    }
}
