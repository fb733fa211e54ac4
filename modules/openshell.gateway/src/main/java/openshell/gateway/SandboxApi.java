package openshell.gateway;

import java.io.IOException;
import java.io.OutputStream;
import java.io.StringReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import io.helidon.http.HeaderNames;
import io.helidon.http.Status;
import io.helidon.webserver.http.HttpRouting;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import jakarta.json.Json;
import jakarta.json.JsonArrayBuilder;
import jakarta.json.JsonException;
import jakarta.json.JsonObject;
import jakarta.json.JsonObjectBuilder;
import jakarta.json.JsonReader;
import jakarta.json.JsonString;
import jakarta.json.JsonValue;
import openshell.driver.DriverStatus;
import openshell.gateway.store.SandboxFailure;
import openshell.gateway.store.SandboxRecord;
import openshell.gateway.store.SandboxState;
import openshell.gateway.store.SandboxStore;
import openshell.isolation.SandboxId;
import openshell.policy.PolicyProblem;
import openshell.protocol.wire.PolicyOutcome;
import openshell.protocol.wire.RemoteExec;
import openshell.protocol.wire.RemoteExecEvent;

/**
 * {@code /v1/sandboxes}: admission, lifecycle, exec, logs and policy. A sandbox is addressed by
 * its name or its id. Exec output is streamed as HTTP/1.1 chunked NDJSON, one JSON object per
 * line: {@code {"stdout": base64}}, {@code {"stderr": base64}}, and last {@code {"exit": N}} or
 * {@code {"error": "..."}}. This one-shot form takes its whole stdin in the request; the streamed,
 * interactive form is the {@code SandboxExec} gRPC stream ({@link ExecEndpoint}). A caller that
 * disconnects before the exit terminates the exec. Any replica answers: reads come from the shared
 * store, and a call that must run where the sandbox is managed is relayed there ({@link Forwarding}).
 */
final class SandboxApi {
    /** Largest standard input an exec request carries (base64-decoded). */
    static final int MAX_EXEC_STDIN_BYTES = 32 * 1024;
    /** How often a streaming exec checks that its session is still there while no output comes. */
    static final Duration EXEC_POLL = Duration.ofSeconds(1);
    /** An empty {@code {}} line after this much silence, so clients can tell a quiet command from a dead link. */
    static final Duration EXEC_HEARTBEAT = Duration.ofSeconds(10);
    private static final Status UNPROCESSABLE = Status.create(422, "Unprocessable Entity");

    private final SandboxStore store;
    private final SandboxLifecycle lifecycle;
    private final SessionHub sessions;
    private final SandboxObserver observer;
    private final Forwarding forwarding;

    SandboxApi(SandboxStore store, SandboxLifecycle lifecycle, SessionHub sessions, SandboxObserver observer) {
        this.forwarding = new Forwarding(lifecycle.replicas());
        this.store = store;
        this.lifecycle = lifecycle;
        this.sessions = sessions;
        this.observer = observer;
    }

    void routing(HttpRouting.Builder r) {
        r.get("/v1/sandboxes", (req, res) -> GatewayServer.guarded(res, () -> {
            JsonArrayBuilder items = Json.createArrayBuilder();
            Map<String, SandboxFailure> failures = store.failures();
            // What the observer last saw beside what is recorded (no driver call per listed sandbox).
            store.list().forEach(s -> items.add(observed(JsonBodies.sandbox(s, Optional.ofNullable(failures.get(s.id().value()))
                    .filter(f -> s.state() == SandboxState.FAILED && f.runtimeGeneration() == s.runtimeGeneration())),
                    observer.latest(s.id()))));
            GatewayServer.send(res, Status.OK_200, Json.createObjectBuilder().add("sandboxes", items).build());
        }));
        r.post("/v1/sandboxes", (req, res) -> {
            String body = req.content().as(String.class);
            GatewayServer.guarded(res, () -> create(body, res));
        });
        // What the managing replica observes and does: relayed there when another one manages the sandbox.
        r.get("/v1/sandboxes/{ref}", (req, res) -> GatewayServer.guarded(res, () -> {
            SandboxRecord s = find(req);
            if (!forwarding.relayed(req, res, "", s, managedHere(s))) {
                GatewayServer.send(res, Status.OK_200, detailed(s));
            }
        }));
        r.delete("/v1/sandboxes/{ref}", (req, res) -> GatewayServer.guarded(res, () -> {
            SandboxRecord s = find(req);
            if (!forwarding.relayed(req, res, "", s, managedHere(s))) {
                lifecycle.delete(s);
                res.status(Status.NO_CONTENT_204).send();
            }
        }));
        r.post("/v1/sandboxes/{ref}/stop", (req, res) -> GatewayServer.guarded(res, () -> {
            SandboxRecord s = find(req);
            if (!forwarding.relayed(req, res, "", s, managedHere(s))) {
                GatewayServer.send(res, Status.OK_200, JsonBodies.sandbox(lifecycle.stop(s)));
            }
        }));
        r.post("/v1/sandboxes/{ref}/start", (req, res) -> GatewayServer.guarded(res, () -> {
            SandboxRecord s = find(req);
            if (!forwarding.relayed(req, res, "", s, managedHere(s))) {
                GatewayServer.send(res, Status.OK_200, JsonBodies.sandbox(lifecycle.start(s)));
            }
        }));
        r.get("/v1/sandboxes/{ref}/logs", (req, res) -> GatewayServer.guarded(res, () -> {
            LogQuery.Filter filter = LogQuery.Filter.of(req.query().first("denied").asOptional(),
                    req.query().first("since").asOptional());
            GatewayServer.send(res, Status.OK_200, LogQuery.answer(store.logLines(find(req).id()), filter));
        }));
        r.get("/v1/sandboxes/{ref}/policy", (req, res) -> GatewayServer.guarded(res, () -> {
            SandboxRecord s = find(req);
            GatewayServer.send(res, Status.OK_200, Json.createObjectBuilder().add("generation", s.policyGeneration())
                    .add("policy", s.policyDocument()).build());
        }));
        r.put("/v1/sandboxes/{ref}/policy", (req, res) -> {
            String body = req.content().as(String.class);
            boolean wait = !req.query().first("wait").map("false"::equals).orElse(false);
            GatewayServer.guarded(res, () -> {
                SandboxRecord s = find(req);
                if (!forwarding.relayed(req, res, body, s, sessions.connected(s.id()))) {
                    setPolicy(s, body, wait, res);
                }
            });
        });
        r.post("/v1/sandboxes/{ref}/exec", (req, res) -> {
            String body = req.content().as(String.class);
            GatewayServer.guarded(res, () -> {
                SandboxRecord s = find(req);
                if (!forwarding.relayed(req, res, body, s, sessions.connected(s.id()))) {
                    exec(s, body, res);
                }
            });
        });
    }

    private void create(String body, ServerResponse res) {
        JsonObject in = parse(body);
        String policy = string(in, "policy");
        if (rejected(policy, res)) {
            return;
        }
        LaunchSpec spec = LaunchSpec.from(in);
        String name = in.get("name") instanceof JsonString s ? s.getString() : "";
        if (in.containsKey("driver")) {
            lifecycle.requireDriver(in.get("driver") instanceof JsonString d ? d.getString() : String.valueOf(in.get("driver")));
        }
        GatewayServer.send(res, Status.CREATED_201, JsonBodies.sandbox(lifecycle.create(name, policy, spec)));
    }

    /**
     * {@code PUT .../policy}: waits for the supervisor's LOADED (200) or FAILED (422) by default;
     * with {@code ?wait=false} answers 202 SENT once the revision is on its way, and the verdict
     * lands in the record (LOADED only) and the sandbox's log.
     */
    private void setPolicy(SandboxRecord record, String body, boolean wait, ServerResponse res) {
        String policy = string(parse(body), "policy");
        if (rejected(policy, res)) {
            return;
        }
        if (!wait) {
            long generation = lifecycle.sendPolicy(record, policy);
            GatewayServer.send(res, Status.ACCEPTED_202, Json.createObjectBuilder().add("result", "SENT")
                    .add("generation", generation)
                    .add("message", "sent to the supervisor; the sandbox's policyGeneration becomes " + generation
                            + " once it is loaded").build());
            return;
        }
        PolicyOutcome outcome = lifecycle.setPolicy(record, policy);
        boolean loaded = outcome.getResult() == PolicyOutcome.Result.LOADED;
        GatewayServer.send(res, loaded ? Status.OK_200 : UNPROCESSABLE, Json.createObjectBuilder()
                .add("result", loaded ? "LOADED" : "FAILED")
                .add("generation", outcome.getGeneration())
                .add("message", outcome.getMessage()).build());
    }

    /** Answers 400 with every problem of an invalid policy; nothing changes then. */
    private static boolean rejected(String policy, ServerResponse res) {
        List<PolicyProblem> problems = SandboxLifecycle.problems(policy);
        if (problems.isEmpty()) {
            return false;
        }
        JsonArrayBuilder items = Json.createArrayBuilder();
        problems.forEach(p -> items.add(Json.createObjectBuilder().add("path", p.path()).add("line", p.line())
                .add("column", p.column()).add("message", p.message())));
        GatewayServer.send(res, Status.BAD_REQUEST_400, Json.createObjectBuilder().add("error", "INVALID_POLICY")
                .add("message", "the policy has " + problems.size() + " problem(s); nothing was changed")
                .add("problems", items).build());
        return true;
    }

    private void exec(SandboxRecord record, String body, ServerResponse res) {
        JsonObject in = parse(body);
        LaunchSpec command = LaunchSpec.from(Json.createObjectBuilder().add("agent", in).build());
        byte[] stdin = new byte[0];
        if (in.get("stdin") instanceof JsonString s) {
            try {
                stdin = Base64.getDecoder().decode(s.getString());
            } catch (IllegalArgumentException e) {
                throw new GatewayException(GatewayException.Reason.INVALID, "'stdin' must be base64");
            }
        }
        if (stdin.length > MAX_EXEC_STDIN_BYTES) {
            throw new GatewayException(GatewayException.Reason.INVALID, "'stdin' is limited to " + MAX_EXEC_STDIN_BYTES
                    + " bytes");
        }
        RemoteExec.Builder exec = RemoteExec.newBuilder().addAllArgv(command.agent().argv())
                .putAllEnvironment(execEnvironment(record, command.agent().environment()))
                .setWorkingDirectory(command.agent().workingDirectory());
        SessionExec relay = sessions.exec(record.id(), exec);
        relay.stdin(stdin, true);
        res.status(Status.OK_200).header(HeaderNames.CONTENT_TYPE, "application/x-ndjson");
        try (OutputStream out = res.outputStream()) {
            long lastWrite = System.nanoTime();
            while (true) {
                Optional<RemoteExecEvent> next = relay.next(EXEC_POLL);
                if (next.isEmpty()) {
                    if (System.nanoTime() - lastWrite >= EXEC_HEARTBEAT.toNanos()) {
                        out.write("{}\n".getBytes(StandardCharsets.UTF_8));
                        out.flush();
                        lastWrite = System.nanoTime();
                    }
                    continue;
                }
                lastWrite = System.nanoTime();
                RemoteExecEvent e = next.get();
                JsonObjectBuilder line = Json.createObjectBuilder();
                switch (e.getKindCase()) {
                    case STDOUT -> line.add("stdout", Base64.getEncoder().encodeToString(e.getStdout().toByteArray()));
                    case STDERR -> line.add("stderr", Base64.getEncoder().encodeToString(e.getStderr().toByteArray()));
                    case EXIT_CODE -> line.add("exit", e.getExitCode());
                    case ERROR -> line.add("error", e.getError());
                    case STDIN_CREDIT, KIND_NOT_SET -> {
                        continue;
                    }
                }
                out.write((JsonBodies.write(line.build()) + "\n").getBytes(StandardCharsets.UTF_8));
                out.flush();
                // Written out: the supervisor may send as much again (back-pressure for a slow reader).
                switch (e.getKindCase()) {
                    case STDOUT -> relay.grantOutput(e.getStdout().size());
                    case STDERR -> relay.grantOutput(e.getStderr().size());
                    default -> { }
                }
                if (e.getKindCase() == RemoteExecEvent.KindCase.EXIT_CODE
                        || e.getKindCase() == RemoteExecEvent.KindCase.ERROR) {
                    return;
                }
            }
        } catch (IOException | UncheckedIOException e) {
            // The API caller went away: the exec has nobody left to serve.
            relay.terminate();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            relay.terminate();
        } finally {
            relay.done();
        }
    }

    /**
     * An exec's environment: the sandbox's credential placeholders (as its agent has them), then
     * what the caller asked for, which wins.
     *
     * @param record    the sandbox
     * @param requested the exec's own variables
     * @return the environment to send
     */
    Map<String, String> execEnvironment(SandboxRecord record, Map<String, String> requested) {
        Map<String, String> env = new LinkedHashMap<>(lifecycle.providerPlaceholders(record));
        env.putAll(requested);
        return env;
    }

    /** Whether this replica manages the sandbox (taking its lease now if nobody holds it). */
    private boolean managedHere(SandboxRecord record) {
        return lifecycle.replicas().manage(record.id()).isPresent();
    }

    private JsonObject detailed(SandboxRecord record) {
        // The session's state after the observation: a supervisor seen gone has its session ended.
        DriverStatus observed = observer.observeNow(record);
        JsonObjectBuilder b = Json.createObjectBuilder(JsonBodies.sandbox(record, store.failure(record)));
        b.add("observed", observed.phase().name()).add("observedDetail", observed.detail())
                .add("sessionConnected", sessions.connected(record.id()))
                .add("managedBy", lifecycle.replicas().grant(record.id()).map(g -> lifecycle.replicas().id())
                        .or(() -> lifecycle.replicas().manager(record.id()).map(Replicas.Manager::replica)).orElse(""));
        store.launchSpec(record.id()).map(LaunchSpec::fromJson).ifPresent(spec -> {
            JsonArrayBuilder argv = Json.createArrayBuilder();
            spec.agent().argv().forEach(argv::add);
            JsonArrayBuilder providers = Json.createArrayBuilder();
            spec.providers().forEach(providers::add);
            b.add("agent", argv).add("workspace", spec.workspace()).add("providers", providers);
        });
        return b.build();
    }

    private static JsonObject observed(JsonObject sandbox, Optional<SandboxObserver.Observation> seen) {
        if (seen.isEmpty()) {
            return sandbox;
        }
        return Json.createObjectBuilder(sandbox).add("observed", seen.get().status().phase().name())
                .add("observedDetail", seen.get().status().detail()).add("observedAt", seen.get().at().toString()).build();
    }

    private SandboxRecord find(ServerRequest req) {
        return find(req.path().pathParameters().get("ref"));
    }

    /**
     * @param ref a sandbox's name or id
     * @return its record
     * @throws GatewayException NOT_FOUND
     */
    SandboxRecord find(String ref) {
        Optional<SandboxRecord> byName = store.findByName(ref);
        if (byName.isPresent()) {
            return byName.get();
        }
        try {
            return store.find(new SandboxId(ref)).orElseThrow(() -> notFound(ref));
        } catch (RuntimeException e) {
            if (e instanceof GatewayException g) {
                throw g;
            }
            throw notFound(ref);
        }
    }

    private static GatewayException notFound(String ref) {
        return new GatewayException(GatewayException.Reason.NOT_FOUND, "no sandbox named '" + ref
                + "' and none with that id (openshell sandbox list)");
    }

    static JsonObject parse(String body) {
        try (JsonReader reader = Json.createReader(new StringReader(body))) {
            return reader.readObject();
        } catch (JsonException | IllegalStateException e) {
            throw new GatewayException(GatewayException.Reason.INVALID, "the body must be a JSON object");
        }
    }

    private static String string(JsonObject in, String key) {
        JsonValue v = in.get(key);
        if (!(v instanceof JsonString s)) {
            throw new GatewayException(GatewayException.Reason.INVALID, "'" + key + "' must be a string");
        }
        return s.getString();
    }
}
