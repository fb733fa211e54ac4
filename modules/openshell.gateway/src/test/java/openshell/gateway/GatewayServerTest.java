package openshell.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

import io.helidon.http.HeaderNames;
import io.helidon.http.Method;
import io.helidon.webclient.api.HttpClientResponse;
import io.helidon.webclient.api.HttpClientRequest;
import io.helidon.webclient.api.WebClient;
import openshell.driver.ComputeDriver;
import openshell.driver.DialDirection;
import openshell.driver.DriverEnvironment;
import openshell.driver.DriverRegistry;
import openshell.driver.DriverStatus;
import openshell.driver.LaunchPlan;
import openshell.driver.Provisioned;
import openshell.driver.spi.ComputeDriverProvider;
import openshell.gateway.store.SandboxRecord;
import openshell.gateway.store.SandboxState;
import openshell.gateway.store.SandboxStore;
import openshell.gateway.store.StoreConfig;
import openshell.isolation.BackendKey;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.TopologyDescriptor;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The API over a real socket: token file, authentication, records, and the delete cleanup path. */
class GatewayServerTest {

    @TempDir
    Path tmp;

    /** Records deletes; a unit-test double for the driver SPI, never registered. */
    static final class RecordingDriver implements ComputeDriver {
        final List<String> deleted = new ArrayList<>();

        @Override
        public String name() {
            return "recording";
        }

        @Override
        public Provisioned create(LaunchPlan plan) {
            throw new UnsupportedOperationException();
        }

        @Override
        public Provisioned start(SandboxId id, byte[] state, LaunchPlan plan) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void stop(SandboxId id, byte[] state) {
        }

        @Override
        public void delete(SandboxId id, byte[] state) {
            deleted.add(id.value() + ":" + new String(state));
        }

        @Override
        public DriverStatus status(SandboxId id, byte[] state) {
            // As recorded: the observer must not move these records while the tests read them.
            return new DriverStatus(DriverStatus.Phase.RUNNING, "");
        }
    }

    /** A status and body, read over a real socket with Helidon's client. */
    record Reply(int statusCode, String body) {
    }

    private static Reply call(String method, GatewayServer server, String path, String token) {
        return call(method, server, path, token, null);
    }

    private static Reply call(String method, GatewayServer server, String path, String token, String body) {
        WebClient client = WebClient.builder().baseUri("http://127.0.0.1:" + server.port())
                .readTimeout(Duration.ofSeconds(30)).build();
        HttpClientRequest request = client.method(Method.create(method)).path(path);
        if (token != null) {
            request.header(HeaderNames.AUTHORIZATION, "Bearer " + token);
        }
        try (HttpClientResponse r = body == null ? request.request() : request.submit(body)) {
            return new Reply(r.status().code(), r.entity().hasEntity() ? r.as(String.class) : "");
        }
    }

    private static SandboxRecord record(String name, String driver) {
        Instant now = Instant.ofEpochMilli(Instant.now().toEpochMilli());
        return new SandboxRecord(new SandboxId("id-" + name), name, driver,
                Provisioned.of(TopologyDescriptor.of(new BackendKey("openshell-sandbox", 1), new byte[] {1}),
                        DialDirection.RUNTIME_INITIATED, "state-of-".concat(name).getBytes()),
                SandboxState.RUNNING, 1, 1, SandboxSessionId.fresh().value(), 1, "version: 1\n", 1, now, now);
    }

    @Test
    void tokenIsCreatedPrivateAndRequiredEverywhereButHealth() throws Exception {
        Path state = tmp.resolve("state");
        GatewayConfig config = new GatewayConfig(state, "127.0.0.1", 0, StoreConfig.embedded(state), "process");
        try (GatewayServer server = GatewayServer.start(config, DriverRegistry.of(List.of()))) {
            assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(state)));
            Path tokenFile = state.resolve(ApiToken.FILE);
            assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(tokenFile)));
            String token = Files.readString(tokenFile).strip();

            assertEquals(200, call("GET", server, "/healthz", null).statusCode());
            assertEquals(200, call("GET", server, "/readyz", null).statusCode());
            for (String path : List.of("/v1/sandboxes", "/v1/sandboxes/x", "/openapi.yaml")) {
                Reply none = call("GET", server, path, null);
                assertEquals(401, none.statusCode(), path);
                assertTrue(none.body().contains("UNAUTHENTICATED"), none.body());
                assertEquals(401, call("GET", server, path, token + "x").statusCode(), path);
                assertEquals(401, call("GET", server, path, token.substring(1)).statusCode(), path);
            }
            assertEquals(401, call("DELETE", server, "/v1/sandboxes/x", "wrong").statusCode());
            Reply list = call("GET", server, "/v1/sandboxes", token);
            assertEquals(200, list.statusCode());
            assertEquals("{\"sandboxes\":[]}", list.body());
            Reply api = call("GET", server, "/openapi.yaml", token);
            assertEquals(200, api.statusCode());
            assertTrue(api.body().startsWith("openapi: 3"), api.body());
            assertEquals(404, call("GET", server, "/v1/sandboxes/none", token).statusCode());
        }
        // A restart keeps the token.
        String before = Files.readString(state.resolve(ApiToken.FILE));
        try (GatewayServer server = GatewayServer.start(config, DriverRegistry.of(List.of()))) {
            assertEquals(before, Files.readString(state.resolve(ApiToken.FILE)));
            assertEquals(200, call("GET", server, "/v1/sandboxes", before.strip()).statusCode());
        }
    }

    @Test
    void aTokenFileOthersCanReadIsRefused() throws Exception {
        Path state = Files.createDirectory(tmp.resolve("state"), PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwx------")));
        Files.writeString(state.resolve(ApiToken.FILE), "x".repeat(43));
        Files.setPosixFilePermissions(state.resolve(ApiToken.FILE), PosixFilePermissions.fromString("rw-r--r--"));
        GatewayConfig config = new GatewayConfig(state, "127.0.0.1", 0, StoreConfig.embedded(state), "process");
        GatewayException e = assertThrows(GatewayException.class,
                () -> GatewayServer.start(config, DriverRegistry.of(List.of())));
        assertEquals(GatewayException.Reason.INVALID, e.reason());
        assertFalse(e.getMessage().contains("xxxx"), "the token itself is never in a message");
    }

    @Test
    void aStateDirectoryOthersCanEnterIsRefused() throws Exception {
        Path state = Files.createDirectory(tmp.resolve("open"));
        Files.setPosixFilePermissions(state, PosixFilePermissions.fromString("rwxr-xr-x"));
        GatewayConfig config = new GatewayConfig(state, "127.0.0.1", 0, StoreConfig.embedded(state), "process");
        assertEquals(GatewayException.Reason.INVALID, assertThrows(GatewayException.class,
                () -> GatewayServer.start(config, DriverRegistry.of(List.of()))).reason());
    }

    @Test
    void recordsAreListedAndDeleteGoesThroughTheDriverFirst() throws Exception {
        Path state = tmp.resolve("state");
        GatewayConfig config = new GatewayConfig(state, "127.0.0.1", 0, StoreConfig.embedded(state), "process");
        RecordingDriver driver = new RecordingDriver();
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
        // Records written while no gateway runs (the embedded database allows one process at a time).
        GatewayServer.start(config, DriverRegistry.of(List.of(provider))).close();
        try (SandboxStore store = SandboxStore.open(config.store())) {
            store.create(record("alpha", "recording"));
            store.create(record("orphan", "gone-driver"));
        }
        try (GatewayServer server = GatewayServer.start(config, DriverRegistry.of(List.of(provider)))) {
            String token = Files.readString(state.resolve(ApiToken.FILE)).strip();
            Reply one = call("GET", server, "/v1/sandboxes/alpha", token);
            assertEquals(200, one.statusCode());
            assertTrue(one.body().contains("\"backend\":\"openshell-sandbox@1\""), one.body());
            assertTrue(one.body().contains("\"state\":\"RUNNING\""), one.body());

            assertEquals(204, call("DELETE", server, "/v1/sandboxes/alpha", token).statusCode());
            assertEquals(List.of("id-alpha:state-of-alpha"), driver.deleted);
            assertEquals(404, call("GET", server, "/v1/sandboxes/alpha", token).statusCode());

            // A sandbox whose driver is not available here is kept: nothing is deleted half-way.
            Reply kept = call("DELETE", server, "/v1/sandboxes/orphan", token);
            assertEquals(503, kept.statusCode(), kept.body());
            assertEquals(200, call("GET", server, "/v1/sandboxes/orphan", token).statusCode());
        }
    }

    @Test
    void providersTakeAValueOnceAndNeverShowIt() throws Exception {
        Path state = tmp.resolve("state");
        GatewayConfig config = new GatewayConfig(state, "127.0.0.1", 0, StoreConfig.embedded(state), "process");
        try (GatewayServer server = GatewayServer.start(config, DriverRegistry.of(List.of()))) {
            String token = Files.readString(state.resolve(ApiToken.FILE)).strip();
            String create = "{\"name\":\"github\",\"env\":\"GITHUB_TOKEN\",\"hosts\":[\"api.github.com\"],"
                    + "\"value\":\"ghp_topSecret42\"}";
            Reply created = call("POST", server, "/v1/providers", token, create);
            assertEquals(201, created.statusCode(), created.body());
            assertFalse(created.body().contains("ghp_topSecret42"), created.body());
            assertTrue(created.body().contains("\"placeholder\":\"openshell-credential-github\""), created.body());
            assertEquals(409, call("POST", server, "/v1/providers", token, create).statusCode());
            assertEquals(401, call("POST", server, "/v1/providers", null, create).statusCode());
            assertEquals(400, call("POST", server, "/v1/providers", token, "{\"name\":\"x\"}").statusCode());
            assertEquals(400, call("POST", server, "/v1/providers", token, "not json").statusCode());
            String tooBig = "{\"name\":\"big\",\"env\":\"X\",\"hosts\":[\"a.com\"],\"value\":\""
                    + "v".repeat((int) GatewayServer.MAX_REQUEST_BYTES) + "\"}";
            assertEquals(413, call("POST", server, "/v1/providers", token, tooBig).statusCode());

            Reply list = call("GET", server, "/v1/providers", token);
            assertEquals(200, list.statusCode());
            assertTrue(list.body().contains("\"name\":\"github\""), list.body());
            assertFalse(list.body().contains("ghp_topSecret42"), list.body());
            assertEquals(204, call("DELETE", server, "/v1/providers/github", token).statusCode());
            assertEquals(404, call("DELETE", server, "/v1/providers/github", token).statusCode());
        }
        try (var files = Files.walk(state)) {
            for (Path f : files.filter(Files::isRegularFile).toList()) {
                assertFalse(new String(Files.readAllBytes(f), java.nio.charset.StandardCharsets.ISO_8859_1)
                        .contains("ghp_topSecret42"), "the value is in plain text in " + f);
            }
        }
    }

    /** Raw HTTP/1.1 over a socket, exactly as written: no client normalizes the path first. */
    private static int rawStatus(int port, String target) throws Exception {
        try (java.net.Socket socket = new java.net.Socket("127.0.0.1", port)) {
            socket.setSoTimeout(30_000);
            socket.getOutputStream().write(("GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                    .getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            String status = new java.io.BufferedReader(new java.io.InputStreamReader(socket.getInputStream(),
                    java.nio.charset.StandardCharsets.US_ASCII)).readLine();
            return status == null ? -1 : Integer.parseInt(status.split(" ")[1]);
        }
    }

    @Test
    void pathTricksAroundTheHealthExemptionNeverReachTheApi() throws Exception {
        Path state = tmp.resolve("state");
        GatewayConfig config = new GatewayConfig(state, "127.0.0.1", 0, StoreConfig.embedded(state), "process");
        try (GatewayServer server = GatewayServer.start(config, DriverRegistry.of(List.of()))) {
            for (String target : List.of("/healthz/../v1/sandboxes", "/healthz/%2e%2e/v1/sandboxes",
                    "/healthz/%2E%2E/v1/providers", "//v1/sandboxes", "/./v1/sandboxes", "/healthz;/../v1/sandboxes",
                    "/readyz/..%2fv1/sandboxes", "/HEALTHZ/../v1/sandboxes", "/v1/sandboxes?/healthz",
                    "/v1/sandboxes#/healthz", "http://127.0.0.1/v1/sandboxes")) {
                int status = rawStatus(server.port(), target);
                assertTrue(status == 401 || status == 400 || status == 404, target + " answered " + status);
            }
            assertEquals(200, rawStatus(server.port(), "/healthz"));
        }
    }
}
