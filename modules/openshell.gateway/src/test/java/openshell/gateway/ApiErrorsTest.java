package openshell.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.StringReader;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

import jakarta.json.Json;
import jakarta.json.JsonObject;
import jakarta.json.JsonReader;
import openshell.driver.DialDirection;
import openshell.driver.DriverRegistry;
import openshell.driver.Provisioned;
import openshell.gateway.store.SandboxRecord;
import openshell.gateway.store.SandboxState;
import openshell.gateway.store.SandboxStore;
import openshell.gateway.store.StoreConfig;
import openshell.isolation.BackendKey;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.TopologyDescriptor;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every error of the HTTP API is one JSON shape, {@code {"error": REASON, "message": ...}}, over a
 * real socket to a real gateway: the API's own errors and the ones Helidon answers by itself (a
 * request it cannot parse, a body over the bound, a path or method no route has). Raw sockets,
 * so that no client library shapes or hides what the gateway sent.
 */
class ApiErrorsTest {
    @TempDir
    Path tmp;

    private Path state;
    private GatewayConfig config;

    /** A status line, headers and the body as the gateway sent them. */
    record Raw(int status, Map<String, String> headers, String body) {
        JsonObject json() {
            assertEquals("application/json", headers.get("content-type"), "every error is JSON: " + this);
            try (JsonReader r = Json.createReader(new StringReader(body))) {
                return r.readObject();
            }
        }
    }

    @BeforeEach
    void paths() {
        state = tmp.resolve("state");
        config = new GatewayConfig(state, "127.0.0.1", 0, StoreConfig.embedded(state), "process");
    }

    /** Sends the bytes as they are, reads the answer to the connection's end (every request says close). */
    static Raw send(int port, byte[] request) throws IOException {
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
            s.setSoTimeout(30_000);
            OutputStream out = s.getOutputStream();
            try {
                out.write(request);
                out.flush();
            } catch (IOException refusedMidway) {
                // The gateway may answer and close before it read all of a too large body.
            }
            InputStream in = s.getInputStream();
            ByteArrayOutputStream head = new ByteArrayOutputStream();
            // The head, byte by byte up to its blank line; then the body by its Content-Length.
            while (!head.toString(StandardCharsets.ISO_8859_1).endsWith("\r\n\r\n")) {
                int b = in.read();
                assertTrue(b >= 0, "an HTTP answer, not an end after: " + head.toString(StandardCharsets.ISO_8859_1));
                head.write(b);
            }
            String[] lines = head.toString(StandardCharsets.ISO_8859_1).strip().split("\r\n");
            Map<String, String> headers = new java.util.LinkedHashMap<>();
            for (int i = 1; i < lines.length; i++) {
                int colon = lines[i].indexOf(':');
                headers.put(lines[i].substring(0, colon).strip().toLowerCase(java.util.Locale.ROOT),
                        lines[i].substring(colon + 1).strip());
            }
            byte[] body = headers.containsKey("content-length")
                    ? in.readNBytes(Integer.parseInt(headers.get("content-length"))) : new byte[0];
            return new Raw(Integer.parseInt(lines[0].split(" ")[1]), headers, new String(body, StandardCharsets.UTF_8));
        }
    }

    static byte[] request(String method, String path, String token, String body) {
        String head = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                + (token == null ? "" : "Authorization: Bearer " + token + "\r\n")
                + (body == null ? "" : "Content-Type: application/json\r\nContent-Length: "
                + body.getBytes(StandardCharsets.UTF_8).length + "\r\n") + "\r\n";
        return (head + (body == null ? "" : body)).getBytes(StandardCharsets.UTF_8);
    }

    private static void assertError(Raw raw, int status, String reason) {
        assertEquals(status, raw.status(), raw.toString());
        JsonObject body = raw.json();
        assertEquals(reason, body.getString("error"), raw.toString());
        assertFalse(body.getString("message").isBlank(), raw.toString());
    }

    @Test
    void whatHelidonAnswersByItselfIsJsonOfTheOneShape() throws Exception {
        try (GatewayServer server = GatewayServer.start(config, DriverRegistry.of(List.of()))) {
            String token = Files.readString(state.resolve(ApiToken.FILE)).strip();
            int port = server.port();

            // One byte over the bound: refused before it is read (413 had an empty body).
            String big = "{\"policy\":\"" + "x".repeat((int) GatewayServer.MAX_REQUEST_BYTES - 12) + "\"}";
            assertEquals(GatewayServer.MAX_REQUEST_BYTES + 1, big.getBytes(StandardCharsets.UTF_8).length);
            Raw tooLarge = send(port, request("POST", "/v1/sandboxes", token, big));
            assertError(tooLarge, 413, "TOO_LARGE");
            assertTrue(tooLarge.json().getString("message").contains(GatewayServer.MAX_REQUEST_BYTES + " bytes"),
                    tooLarge.toString());
            // At the bound the body is read and judged: an invalid policy, not a size.
            String atBound = "{\"policy\":\"" + "x".repeat((int) GatewayServer.MAX_REQUEST_BYTES - 13) + "\"}";
            Raw judged = send(port, request("POST", "/v1/sandboxes", token, atBound));
            assertEquals(400, judged.status(), judged.toString());
            assertEquals("INVALID_POLICY", judged.json().getString("error"));

            // A request line Helidon cannot parse.
            Raw garbled = send(port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header Line\r\nConnection: close\r\n\r\n"
                    .getBytes(StandardCharsets.US_ASCII));
            assertError(garbled, 400, "INVALID");

            assertError(send(port, request("GET", "/v1/nothing-here", token, null)), 404, "NOT_FOUND");
            assertTrue(send(port, request("GET", "/v1/nothing-here", token, null)).json().getString("message")
                    .contains("no such endpoint: GET /v1/nothing-here"));
            Raw wrongMethod = send(port, request("PUT", "/v1/sandboxes", token, "{}"));
            assertError(wrongMethod, 405, "METHOD_NOT_ALLOWED");
            assertEquals("GET, POST", wrongMethod.headers().get("allow"), wrongMethod.toString());
            Raw wrongOnTemplate = send(port, request("PATCH", "/v1/sandboxes/some-name/policy", token, "{}"));
            assertError(wrongOnTemplate, 405, "METHOD_NOT_ALLOWED");
            assertEquals("GET, PUT", wrongOnTemplate.headers().get("allow"));

            // The API's own errors have the same shape.
            assertError(send(port, request("GET", "/v1/sandboxes", null, null)), 401, "UNAUTHENTICATED");
            assertError(send(port, request("GET", "/v1/sandboxes/nope", token, null)), 404, "NOT_FOUND");
            assertError(send(port, request("POST", "/v1/sandboxes", token, "not json")), 400, "INVALID");
            // Unknown paths need the token like every other: nothing about the API leaks without it.
            assertError(send(port, request("GET", "/v1/nothing-here", null, null)), 401, "UNAUTHENTICATED");
        }
    }

    @Test
    void everyPathOfTheDescriptionIsRoutedWithItsMethods() throws Exception {
        assertEquals(Set.of("GET", "POST"), ApiErrors.allowed("/v1/sandboxes"));
        assertEquals(Set.of("GET", "DELETE"), ApiErrors.allowed("/v1/sandboxes/job"));
        assertEquals(Set.of(), ApiErrors.allowed("/v1/sandboxes/job/nothing"));
        try (GatewayServer server = GatewayServer.start(config, DriverRegistry.of(List.of()))) {
            String token = Files.readString(state.resolve(ApiToken.FILE)).strip();
            for (Map.Entry<Pattern, Set<String>> route : ApiErrors.ROUTES.entrySet()) {
                String path = route.getKey().pattern().replace("[^/]+", "nope").replace("\\Q", "").replace("\\E", "");
                for (String method : route.getValue()) {
                    Raw raw = send(server.port(), request(method, path, token,
                            method.equals("GET") || method.equals("DELETE") ? null : "{}"));
                    boolean unrouted = raw.status() == 405 || raw.status() == 404
                            && raw.json().getString("message").startsWith("no such endpoint");
                    assertFalse(unrouted, method + " " + path + " is described but not routed: " + raw);
                }
            }
        }
    }

    @Test
    void logsAreChosenByDenialAndTimeAndEachSaysWhereItCameFrom() throws Exception {
        // Records and lines written while no gateway runs (the embedded database allows one process at a time).
        GatewayServer.start(config, DriverRegistry.of(List.of())).close();
        Instant t0 = Instant.parse("2026-12-04T18:00:00Z");
        String deny = "[decision] {\"time\":\"2026-12-04T18:00:01Z\",\"kind\":\"connect\",\"decision\":\"deny\","
                + "\"cause\":\"NO_MATCHING_BLOCK\",\"reason\":\"no block names example.com\"}";
        String allow = "[decision] {\"time\":\"2026-12-04T18:00:02Z\",\"kind\":\"connect\",\"decision\":\"allow\"}";
        try (SandboxStore store = SandboxStore.open(config.store())) {
            store.create(stopped("job"));
            SandboxId id = new SandboxId("id-job");
            store.appendLogs(id, List.of("hello", "[stderr] complaint"), 100, t0);
            store.appendLogs(id, List.of(deny, allow), 100, t0.plusSeconds(60));
            store.appendLogs(id, List.of("2026-12-04T18:02:00Z gateway: sandbox stopped", "[openshell] the agent ended: exit 0",
                    "[stdout] [decision] {\"decision\":\"deny\"}", "[decision] {cut off"), 100, t0.plusSeconds(120));
        }
        try (GatewayServer server = GatewayServer.start(config, DriverRegistry.of(List.of()))) {
            String token = Files.readString(state.resolve(ApiToken.FILE)).strip();
            JsonObject all = send(server.port(), request("GET", "/v1/sandboxes/job/logs", token, null)).json();
            assertEquals(List.of("agent", "agent-stderr", "supervisor", "supervisor", "gateway", "supervisor", "agent",
                    "supervisor"), all.getJsonArray("entries").getValuesAs(JsonObject.class).stream()
                    .map(e -> e.getString("source")).toList(), all.toString());
            assertEquals(8, all.getJsonArray("lines").size());
            assertEquals(t0.toString(), all.getJsonArray("entries").getJsonObject(0).getString("time"));

            JsonObject denied = send(server.port(), request("GET", "/v1/sandboxes/job/logs?denied=true", token, null)).json();
            assertEquals(List.of(deny), denied.getJsonArray("lines").getValuesAs(jakarta.json.JsonString.class).stream()
                    .map(jakarta.json.JsonString::getString).toList(), "the agent's imitation is no denial: " + denied);
            assertEquals("NO_MATCHING_BLOCK", denied.getJsonArray("entries").getJsonObject(0).getJsonObject("record")
                    .getString("cause"));

            JsonObject since = send(server.port(), request("GET", "/v1/sandboxes/job/logs?since=2026-12-04T18%3A01%3A00Z", token,
                    null)).json();
            assertTrue(since.containsKey("lines"), since.toString());
            assertEquals(6, since.getJsonArray("lines").size(), "at or after the instant: " + since);
            JsonObject both = send(server.port(), request("GET",
                    "/v1/sandboxes/job/logs?denied=true&since=2026-12-04T18%3A01%3A00.001Z", token, null)).json();
            assertEquals(0, both.getJsonArray("lines").size(), both.toString());

            assertError(send(server.port(), request("GET", "/v1/sandboxes/job/logs?since=yesterday", token, null)), 400,
                    "INVALID");
            assertError(send(server.port(), request("GET", "/v1/sandboxes/job/logs?denied=maybe", token, null)), 400,
                    "INVALID");
        }
    }

    private static SandboxRecord stopped(String name) {
        Instant now = Instant.ofEpochMilli(Instant.now().toEpochMilli());
        return new SandboxRecord(new SandboxId("id-" + name), name, "process",
                Provisioned.of(TopologyDescriptor.of(new BackendKey("openshell-sandbox", 1), new byte[] {1}),
                        DialDirection.RUNTIME_INITIATED, new byte[] {1}),
                SandboxState.STOPPED, 1, 1, SandboxSessionId.fresh().value(), 1, "version: 1\n", 1, now, now);
    }
}
