package openshell.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.helidon.common.tls.Tls;
import io.helidon.http.HeaderNames;
import io.helidon.http.Method;
import io.helidon.webclient.api.HttpClientRequest;
import io.helidon.webclient.api.HttpClientResponse;
import io.helidon.webclient.api.WebClient;
import io.helidon.webclient.grpc.GrpcClient;
import jakarta.json.Json;
import jakarta.json.JsonObject;
import jakarta.json.JsonReader;
import openshell.driver.ComputeDriver;
import openshell.driver.DialDirection;
import openshell.driver.DriverEnvironment;
import openshell.driver.DriverRegistry;
import openshell.driver.DriverStatus;
import openshell.driver.LaunchMaterial;
import openshell.driver.LaunchPlan;
import openshell.driver.Provisioned;
import openshell.driver.spi.ComputeDriverProvider;
import openshell.gateway.store.StoreConfig;
import openshell.isolation.BackendKey;
import openshell.isolation.SandboxId;
import openshell.isolation.TopologyDescriptor;
import openshell.protocol.TokenGrant;
import openshell.protocol.wire.GatewayMessage;
import openshell.protocol.wire.GatewaySessionGrpc;
import openshell.protocol.wire.LogLines;
import openshell.protocol.wire.PolicyOutcome;
import openshell.protocol.wire.RemoteExecEvent;
import openshell.protocol.wire.SessionHello;
import openshell.protocol.wire.SupervisorMessage;
import openshell.protocol.wire.TokenAck;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Admission, lifecycle and the supervisor session over real sockets: the REST API with Helidon's
 * HTTP client, the session with Helidon's gRPC client playing the supervisor, and real ES256 tokens
 * from the gateway's persisted key. The compute driver and the launch sealer are unit-test doubles
 * (the real process driver needs the supervisor and runtime mains: see tests/e2e).
 */
class SandboxSessionTest {
    static final Duration WAIT = Duration.ofSeconds(60);
    static final String POLICY = """
            version: 1
            network_policies:
              api:
                endpoints:
                  - host: api.example.test
                    port: 443
                    protocol: tcp
                binaries:
                  - path: /usr/bin/curl
            """;

    @TempDir
    Path tmp;

    /** A driver double that records every call; the real one is exercised end to end in tests/e2e. */
    static final class RecordingDriver implements ComputeDriver {
        final List<LaunchPlan> plans = new CopyOnWriteArrayList<>();
        final List<String> calls = new CopyOnWriteArrayList<>();

        @Override
        public String name() {
            return "recording";
        }

        @Override
        public Provisioned create(LaunchPlan plan) {
            plans.add(plan);
            calls.add("create " + plan.context().sandboxId());
            return provisioned(plan);
        }

        @Override
        public Provisioned start(SandboxId id, byte[] state, LaunchPlan plan) {
            plans.add(plan);
            calls.add("start " + id + " " + plan.runtimeGeneration());
            return provisioned(plan);
        }

        @Override
        public void stop(SandboxId id, byte[] state) {
            calls.add("stop " + id);
        }

        @Override
        public void delete(SandboxId id, byte[] state) {
            calls.add("delete " + id + " " + new String(state, StandardCharsets.UTF_8));
        }

        @Override
        public DriverStatus status(SandboxId id, byte[] state) {
            return new DriverStatus(DriverStatus.Phase.RUNNING, "recorded");
        }

        private static Provisioned provisioned(LaunchPlan plan) {
            return Provisioned.of(TopologyDescriptor.of(new BackendKey("openshell-sandbox", 1), new byte[] {7}),
                    DialDirection.RUNTIME_INITIATED, ("gen-" + plan.runtimeGeneration()).getBytes(StandardCharsets.UTF_8));
        }
    }

    /** The gateway under test with its driver double; the sealer's supervisor bundle is the gateway token. */
    record Gateway(GatewayServer server, RecordingDriver driver, String apiToken) implements AutoCloseable {
        static Gateway start(Path state, RecordingDriver driver) throws Exception {
            GatewayConfig config = new GatewayConfig(state, "127.0.0.1", 0, StoreConfig.embedded(state), "recording");
            ComputeDriverProvider provider = new ComputeDriverProvider() {
                @Override
                public String name() {
                    return "recording";
                }

                @Override
                public ComputeDriver create(DriverEnvironment environment) {
                    return driver;
                }
            };
            GatewayServer server = GatewayServer.start(config, DriverRegistry.of(List.of(provider)),
                    (issuer, url) -> (context, generation, epoch, credentials) -> {
                        var pair = issuer.mintPair(new TokenGrant(context.sandboxId().value(), generation,
                                context.sessionId().value(), SessionHub.COMPONENT, SessionHub.TOKEN_LIFETIME), epoch);
                        return LaunchMaterial.of(pair.gatewayToken().getBytes(StandardCharsets.US_ASCII),
                                pair.sandboxToken().getBytes(StandardCharsets.US_ASCII));
                    });
            return new Gateway(server, driver, Files.readString(state.resolve(ApiToken.FILE)).strip());
        }

        Reply call(String method, String path, JsonObject body) {
            WebClient client = WebClient.builder().baseUri("http://127.0.0.1:" + server.port())
                    .readTimeout(WAIT).build();
            HttpClientRequest request = client.method(Method.create(method)).path(path)
                    .header(HeaderNames.AUTHORIZATION, "Bearer " + apiToken);
            try (HttpClientResponse r = body == null ? request.request() : request.submit(body.toString())) {
                return new Reply(r.status().code(), r.entity().hasEntity() ? r.as(String.class) : "");
            }
        }

        @Override
        public void close() {
            server.close();
        }
    }

    record Reply(int status, String body) {
        JsonObject json() {
            try (JsonReader r = Json.createReader(new StringReader(body))) {
                return r.readObject();
            }
        }
    }

    /** Plays the supervisor over a real gRPC stream. */
    static final class FakeSupervisor implements AutoCloseable {
        final BlockingQueue<GatewayMessage> received = new LinkedBlockingQueue<>();
        final CompletableFuture<Status> ended = new CompletableFuture<>();
        final StreamObserver<SupervisorMessage> send;

        FakeSupervisor(int port) {
            GrpcClient client = GrpcClient.builder().baseUri("http://127.0.0.1:" + port)
                    .tls(Tls.builder().enabled(false).build()).build();
            send = GatewaySessionGrpc.newStub(client.channel()).open(new StreamObserver<>() {
                @Override
                public void onNext(GatewayMessage m) {
                    received.add(m);
                }

                @Override
                public void onError(Throwable t) {
                    ended.complete(Status.fromThrowable(t));
                }

                @Override
                public void onCompleted() {
                    ended.complete(Status.OK);
                }
            });
        }

        void hello(String sandbox, long generation, String token) {
            send.onNext(SupervisorMessage.newBuilder().setHello(SessionHello.newBuilder().setSandboxId(sandbox)
                    .setRuntimeGeneration(generation).setGatewayToken(token)).build());
        }

        GatewayMessage next() throws InterruptedException {
            GatewayMessage m = received.poll(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertNotNull(m, "nothing from the gateway within " + WAIT);
            return m;
        }

        /** Takes the refresh that follows every hello and acknowledges it. */
        long ackRefresh() throws InterruptedException {
            GatewayMessage m = next();
            assertTrue(m.hasTokens(), m.toString());
            send.onNext(SupervisorMessage.newBuilder().setTokenAck(TokenAck.newBuilder()
                    .setCredentialEpoch(m.getTokens().getCredentialEpoch())).build());
            return m.getTokens().getCredentialEpoch();
        }

        @Override
        public void close() {
            try {
                send.onCompleted();
            } catch (RuntimeException ignored) {
                // Already ended by the gateway.
            }
        }
    }

    static JsonObject createBody(String name, String policy) {
        return Json.createObjectBuilder().add("name", name).add("policy", policy)
                .add("agent", Json.createObjectBuilder().add("argv", Json.createArrayBuilder().add("/bin/sleep").add("1000"))
                        .add("env", Json.createObjectBuilder().add("MODE", "test")))
                .build();
    }

    private static <T> T await(CompletableFuture<T> f) throws Exception {
        return f.get(WAIT.toSeconds(), TimeUnit.SECONDS);
    }

    @Test
    void invalidPolicyIsRefusedWholeWithEveryProblemAndNothingIsLaunched() throws Exception {
        try (Gateway g = Gateway.start(tmp.resolve("state"), new RecordingDriver())) {
            Reply r = g.call("POST", "/v1/sandboxes", createBody("bad", """
                    version: 1
                    network_policies:
                      a:
                        endpoints:
                          - host: ""
                            port: 70000
                    surprise: true
                    """));
            assertEquals(400, r.status(), r.body());
            assertEquals("INVALID_POLICY", r.json().getString("error"));
            assertTrue(r.json().getJsonArray("problems").size() >= 2, r.body());
            assertTrue(r.json().getJsonArray("problems").getJsonObject(0).getInt("line") > 0, r.body());
            assertTrue(g.driver().calls.isEmpty(), "the driver was never called");
            assertEquals("{\"sandboxes\":[]}", g.call("GET", "/v1/sandboxes", null).body());
            assertEquals(400, g.call("POST", "/v1/sandboxes", Json.createObjectBuilder().add("policy", POLICY).build())
                    .status(), "an agent is required");
        }
    }

    @Test
    void admissionPicksTheConfiguredDriverAndTheSessionRunsTheLifecycle() throws Exception {
        Path state = tmp.resolve("state");
        RecordingDriver driver = new RecordingDriver();
        String id;
        try (Gateway g = Gateway.start(state, driver)) {
            assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(
                    state.resolve(SigningKey.FILE))));
            assertEquals(201, g.call("POST", "/v1/providers", Json.createObjectBuilder().add("name", "github")
                    .add("env", "GITHUB_TOKEN").add("hosts", Json.createArrayBuilder().add("api.github.com"))
                    .add("value", "ghp_topSecret42").build()).status());
            // A request cannot choose the driver: it may name the one the gateway's configuration runs, no other.
            Reply refusedDriver = g.call("POST", "/v1/sandboxes", Json.createObjectBuilder(createBody("web", POLICY))
                    .add("driver", "docker").build());
            assertEquals(400, refusedDriver.status(), refusedDriver.body());
            assertTrue(refusedDriver.body().contains("runs sandboxes on the 'recording' driver, not 'docker'"),
                    refusedDriver.body());
            assertTrue(driver.plans.isEmpty(), "nothing was launched for the refused request");
            JsonObject body = Json.createObjectBuilder(createBody("web", POLICY)).add("driver", "recording")
                    .add("providers", Json.createArrayBuilder().add("github")).build();
            Reply created = g.call("POST", "/v1/sandboxes", body);
            assertEquals(201, created.status(), created.body());
            JsonObject sandbox = created.json();
            id = sandbox.getString("id");
            assertEquals("recording", sandbox.getString("driver"));
            assertEquals("PROVISIONING", sandbox.getString("state"));
            assertEquals(409, g.call("POST", "/v1/sandboxes", createBody("web", POLICY)).status(), "name taken");

            LaunchPlan plan = driver.plans.getFirst();
            assertEquals(List.of("/bin/sleep", "1000"), plan.context().agent().argv());
            assertEquals(Map.of("MODE", "test", "GITHUB_TOKEN", "openshell-credential-github"),
                    plan.context().agent().environment());
            assertEquals(1, plan.runtimeGeneration());
            assertTrue(plan.context().workload().uid() != 0);
            String token = new String(plan.material().supervisorBundle(), StandardCharsets.US_ASCII);

            try (FakeSupervisor sup = new FakeSupervisor(g.server().port())) {
                sup.hello(id, 1, token);
                GatewayMessage config = sup.next();
                assertTrue(config.hasConfig(), config.toString());
                assertEquals(POLICY, config.getConfig().getPolicyDocument().toStringUtf8());
                assertEquals(2, sup.ackRefresh(), "the token that opened the session is superseded at once");
                JsonObject running = g.call("GET", "/v1/sandboxes/web", null).json();
                assertEquals("RUNNING", running.getString("state"));
                assertTrue(running.getBoolean("sessionConnected"));
                assertEquals("RUNNING", running.getString("observed"));
                awaitEpoch(g, "web", 2);

                // The superseded token cannot open a session, even while the first one lives.
                try (FakeSupervisor thief = new FakeSupervisor(g.server().port())) {
                    thief.hello(id, 1, token);
                    // Helidon 4.1.7's gRPC server cannot send a status other than its own, so the
                    // refusal shows as the stream ending without a single message.
                    await(thief.ended);
                    assertTrue(thief.received.isEmpty());
                }
                assertTrue(g.call("GET", "/v1/sandboxes/web", null).json().getBoolean("sessionConnected"),
                        "the refused hello did not displace the live session");

                // Policy set: validated, pushed, LOADED recorded; FAILED changes nothing.
                String revoked = POLICY.replace("/usr/bin/curl", "/usr/bin/wget");
                CompletableFuture<Reply> set = CompletableFuture.supplyAsync(() -> g.call("PUT",
                        "/v1/sandboxes/web/policy", Json.createObjectBuilder().add("policy", revoked).build()));
                GatewayMessage revision = sup.next();
                assertEquals(2, revision.getPolicy().getGeneration());
                assertEquals(revoked, revision.getPolicy().getDocument().toStringUtf8());
                sup.send.onNext(SupervisorMessage.newBuilder().setPolicyOutcome(PolicyOutcome.newBuilder()
                        .setRevisionId(revision.getPolicy().getRevisionId()).setGeneration(2)
                        .setResult(PolicyOutcome.Result.LOADED)).build());
                Reply loaded = await(set);
                assertEquals(200, loaded.status(), loaded.body());
                assertEquals("LOADED", loaded.json().getString("result"));
                JsonObject policy = g.call("GET", "/v1/sandboxes/web/policy", null).json();
                assertEquals(2, policy.getInt("generation"));
                assertEquals(revoked, policy.getString("policy"));

                CompletableFuture<Reply> failing = CompletableFuture.supplyAsync(() -> g.call("PUT",
                        "/v1/sandboxes/web/policy", Json.createObjectBuilder().add("policy", POLICY).build()));
                GatewayMessage second = sup.next();
                sup.send.onNext(SupervisorMessage.newBuilder().setPolicyOutcome(PolicyOutcome.newBuilder()
                        .setRevisionId(second.getPolicy().getRevisionId()).setGeneration(3)
                        .setResult(PolicyOutcome.Result.FAILED).setMessage("landlock section changed")).build());
                Reply failed = await(failing);
                assertEquals(422, failed.status(), failed.body());
                assertEquals("FAILED", failed.json().getString("result"));
                assertEquals(2, g.call("GET", "/v1/sandboxes/web/policy", null).json().getInt("generation"));
                assertEquals(400, g.call("PUT", "/v1/sandboxes/web/policy", Json.createObjectBuilder()
                        .add("policy", "version: 1\nbogus: 1\n").build()).status(), "invalid never reaches the supervisor");
                assertTrue(sup.received.isEmpty(), "nothing was pushed for the invalid policy");

                // Two policy sets at once: distinct generations, sent in their order; the verdicts may
                // come back in any order and the record keeps the highest LOADED (what the supervisor enforces).
                String earlier = POLICY.replace("/usr/bin/curl", "/usr/bin/first");
                String later = POLICY.replace("/usr/bin/curl", "/usr/bin/second");
                // Each on its own thread: the common pool may have a single worker on a 2-core machine.
                java.util.concurrent.ExecutorService callers = java.util.concurrent.Executors.newVirtualThreadPerTaskExecutor();
                CompletableFuture<Reply> setFirst = CompletableFuture.supplyAsync(() -> g.call("PUT",
                        "/v1/sandboxes/web/policy", Json.createObjectBuilder().add("policy", earlier).build()), callers);
                CompletableFuture<Reply> setSecond = CompletableFuture.supplyAsync(() -> g.call("PUT",
                        "/v1/sandboxes/web/policy", Json.createObjectBuilder().add("policy", later).build()), callers);
                GatewayMessage a = sup.next();
                GatewayMessage b = sup.next();
                assertEquals(List.of(4L, 5L), List.of(a.getPolicy().getGeneration(), b.getPolicy().getGeneration()),
                        "after the FAILED generation 3: 4 and 5, in the order sent");
                // The later generation's verdict first, then the earlier one's.
                for (GatewayMessage m : List.of(b, a)) {
                    sup.send.onNext(SupervisorMessage.newBuilder().setPolicyOutcome(PolicyOutcome.newBuilder()
                            .setRevisionId(m.getPolicy().getRevisionId()).setGeneration(m.getPolicy().getGeneration())
                            .setResult(PolicyOutcome.Result.LOADED)).build());
                    Reply reply = await(m.getPolicy().getDocument().toStringUtf8().equals(earlier) ? setFirst : setSecond);
                    assertEquals(200, reply.status(), reply.body());
                }
                JsonObject kept = g.call("GET", "/v1/sandboxes/web/policy", null).json();
                assertEquals(5, kept.getInt("generation"));
                assertEquals(b.getPolicy().getDocument().toStringUtf8(), kept.getString("policy"),
                        "the record holds the document of the last revision sent");

                // Exec: relayed over the session, streamed back as NDJSON with separate streams and the exit code.
                CompletableFuture<Reply> exec = CompletableFuture.supplyAsync(() -> g.call("POST",
                        "/v1/sandboxes/web/exec", Json.createObjectBuilder()
                                .add("argv", Json.createArrayBuilder().add("/bin/cat"))
                                .add("stdin", Base64.getEncoder().encodeToString("in".getBytes(StandardCharsets.UTF_8)))
                                .build()));
                GatewayMessage start = sup.next();
                assertEquals(List.of("/bin/cat"), start.getExec().getArgvList());
                // An exec sees the sandbox's credential placeholders as its agent does, never a value.
                assertEquals(Map.of("GITHUB_TOKEN", "openshell-credential-github"), start.getExec().getEnvironmentMap());
                GatewayMessage input = sup.next();
                assertEquals("in", input.getExecInput().getData().toStringUtf8());
                assertTrue(input.getExecInput().getClose());
                String execId = start.getExec().getExecId();
                sup.send.onNext(event(RemoteExecEvent.newBuilder().setExecId(execId).setStdout(ByteString.copyFromUtf8("out"))));
                sup.send.onNext(event(RemoteExecEvent.newBuilder().setExecId(execId).setStderr(ByteString.copyFromUtf8("err"))));
                sup.send.onNext(event(RemoteExecEvent.newBuilder().setExecId(execId).setExitCode(3)));
                Reply streamed = await(exec);
                assertEquals(200, streamed.status());
                List<String> lines = streamed.body().lines().toList();
                assertEquals(List.of("{\"stdout\":\"" + b64("out") + "\"}", "{\"stderr\":\"" + b64("err") + "\"}",
                        "{\"exit\":3}"), lines);

                sup.send.onNext(SupervisorMessage.newBuilder().setLogs(LogLines.newBuilder().addLines("agent started")
                        .addLines("x".repeat(SandboxLogs.MAX_LINE_CHARS + 10))).build());
                List<String> logs = awaitLogs(g, "web", 2);
                assertEquals("agent started", logs.get(0));
                assertEquals(SandboxLogs.MAX_LINE_CHARS, logs.get(1).length(), "cut at the bound");

                // Stop ends the session and keeps the record; start relaunches with a new lineage.
                JsonObject stopped = g.call("POST", "/v1/sandboxes/web/stop", null).json();
                assertEquals("STOPPED", stopped.getString("state"));
                await(sup.ended);
            }
            assertEquals(503, g.call("POST", "/v1/sandboxes/web/exec", Json.createObjectBuilder()
                    .add("argv", Json.createArrayBuilder().add("/bin/true")).build()).status(), "no session, no exec");
            JsonObject started = g.call("POST", "/v1/sandboxes/web/start", null).json();
            assertEquals(2, started.getInt("runtimeGeneration"));
            assertEquals("PROVISIONING", started.getString("state"));
            LaunchPlan relaunch = driver.plans.getLast();
            assertEquals(2, relaunch.runtimeGeneration());
            assertEquals(5, relaunch.context().policy().generation(), "the relaunch enforces the recorded policy");
            assertFalse(relaunch.context().sessionId().equals(plan.context().sessionId()));
            // The first launch's token is bound to generation 1: useless for generation 2.
            try (FakeSupervisor old = new FakeSupervisor(g.server().port())) {
                old.hello(id, 2, token);
                await(old.ended);
                assertTrue(old.received.isEmpty());
            }
        }

        // A restarted gateway lists the sandbox, accepts the current launch's supervisor, and can delete it.
        try (Gateway g = Gateway.start(state, driver)) {
            JsonObject listed = g.call("GET", "/v1/sandboxes", null).json().getJsonArray("sandboxes").getJsonObject(0);
            assertEquals(id, listed.getString("id"));
            String current = new String(driver.plans.getLast().material().supervisorBundle(), StandardCharsets.US_ASCII);
            try (FakeSupervisor sup = new FakeSupervisor(g.server().port())) {
                sup.hello(id, 2, current);
                assertTrue(sup.next().hasConfig());
                assertEquals(2, sup.ackRefresh());
                // A scheduled refresh, run now: the next epoch, recorded once acknowledged.
                CompletableFuture<Long> refreshed = CompletableFuture.supplyAsync(() ->
                        g.server().sessions().refresh(new SandboxId(id)));
                assertEquals(3, sup.ackRefresh());
                assertEquals(3, await(refreshed));
                awaitEpoch(g, id, 3);
            }
            assertEquals(204, g.call("DELETE", "/v1/sandboxes/" + id, null).status());
            assertEquals("delete " + id + " gen-2", driver.calls.getLast());
            assertEquals("{\"sandboxes\":[]}", g.call("GET", "/v1/sandboxes", null).body());
        }
    }

    private static SupervisorMessage event(RemoteExecEvent.Builder e) {
        return SupervisorMessage.newBuilder().setExecEvent(e).build();
    }

    private static String b64(String s) {
        return Base64.getEncoder().encodeToString(s.getBytes(StandardCharsets.UTF_8));
    }

    private static void awaitEpoch(Gateway g, String name, long epoch) throws InterruptedException {
        Instant deadline = Instant.now().plus(WAIT);
        while (g.call("GET", "/v1/sandboxes/" + name, null).json().getInt("credentialEpoch") != epoch) {
            assertTrue(Instant.now().isBefore(deadline), "epoch " + epoch + " not recorded within " + WAIT);
            Thread.sleep(20);
        }
    }

    private static List<String> awaitLogs(Gateway g, String name, int count) throws InterruptedException {
        Instant deadline = Instant.now().plus(WAIT);
        while (true) {
            List<String> all = g.call("GET", "/v1/sandboxes/" + name + "/logs", null).json().getJsonArray("lines")
                    .getValuesAs(jakarta.json.JsonString.class).stream().map(jakarta.json.JsonString::getString).toList();
            // The gateway's own events about the sandbox share its log; only the supervisor's lines count here.
            List<String> lines = new ArrayList<>(all.stream().filter(l -> !l.contains(" gateway: ")).toList());
            if (lines.size() >= count) {
                return lines;
            }
            // All of it, the gateway's lines too: one of them says when lines were lost, and why.
            assertTrue(Instant.now().isBefore(deadline), "logs not kept within " + WAIT + "; the log holds " + all);
            Thread.sleep(20);
        }
    }
}
