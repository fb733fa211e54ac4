package openshell.tests.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import jakarta.json.JsonObject;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a user meets at the command line, with the real {@code openshell} CLI against a real
 * gateway process: help on every command, usage errors with the command's usage, {@code -o json}
 * anywhere and never ignored, errors as one JSON shape from every layer of the gateway (413
 * included), a state directory others can enter refused with the command that fixes it, and
 * {@code sandbox logs} showing the supervisor's decisions, filtered by denial and time, in a
 * sandbox whose agent tries to forge one.
 */
class CliUsabilityTest {
    /** How long the supervisor's decision may take to reach the sandbox's log. */
    static final Duration DECISION_WAIT = Duration.ofSeconds(30);

    @TempDir
    Path tmp;

    private GatewayUnderTest gateway;

    @AfterEach
    void stopGateway() throws Exception {
        if (gateway != null && Files.exists(gateway.state.resolve("gateway.json"))) {
            // The trusted cleanup path, also when the test failed half way: nothing may be left behind.
            gateway.cli("sandbox", "delete", "usable");
            gateway.cli("gateway", "stop");
        }
    }

    private static void assertUsageError(Cli.Result r, String command, String says) {
        assertEquals(2, r.exit(), command + ": " + r.out() + r.err());
        assertTrue(r.err().startsWith("openshell: ") && r.err().contains(says), command + ": " + r.err());
        assertTrue(r.err().contains("usage: openshell " + command), "the usage of " + command + " follows: " + r.err());
    }

    @Test
    void helpUsageErrorsOutputJsonAndErrorsFromEveryLayer() throws Exception {
        gateway = new GatewayUnderTest(tmp.resolve("home"), Launchers.environment());
        // -o json after the subcommand's options: one JSON document, not text.
        Cli.Result started = gateway.cli("gateway", "start", "--background", "--port", "0", "-o", "json");
        assertEquals(0, started.exit(), started.out() + started.err() + gateway.diagnostics());
        assertTrue(GatewayUnderTest.parse(started.out()).getString("url").startsWith("http://127.0.0.1:"), started.out());

        for (String[] command : new String[][] {{}, {"sandbox"}, {"sandbox", "create"}, {"sandbox", "logs"},
                {"gateway", "start"}, {"policy", "explain"}, {"run"}}) {
            for (String flag : new String[] {"--help", "-h"}) {
                List<String> args = new ArrayList<>(List.of(command));
                args.add(flag);
                Cli.Result help = gateway.cli(args.toArray(String[]::new));
                String path = String.join(" ", command);
                assertEquals(0, help.exit(), path + " " + flag + ": " + help.err());
                assertEquals("", help.err(), path + " " + flag);
                assertTrue(help.out().startsWith("usage: openshell " + (path.isEmpty() ? "[--state DIR]" : path)),
                        path + " " + flag + ": " + help.out());
            }
        }
        assertUsageError(gateway.cli("sandbox", "list", "--bogus"), "sandbox list", "unknown option --bogus");
        assertUsageError(gateway.cli("sandbox", "logs", "usable", "--since", "yesterday"), "sandbox logs",
                "--since takes a duration");
        assertUsageError(gateway.cli("sandbox", "list", "-o", "yaml"), "sandbox list", "-o takes text or json, not 'yaml'");
        assertUsageError(gateway.cli("sandbox", "frobnicate"), "sandbox", "unknown command 'sandbox frobnicate'");

        // A trailing --output json is a JSON document, never text; so is an error.
        Cli.Result list = gateway.cli("sandbox", "list", "--output", "json");
        assertEquals(0, list.exit(), list.err());
        assertEquals("{\"sandboxes\":[]}", list.out().strip());
        Cli.Result missing = gateway.cli("sandbox", "get", "nope", "-o", "json");
        assertEquals(4, missing.exit());
        JsonObject error = GatewayUnderTest.parse(missing.out());
        assertEquals("NOT_FOUND", error.getString("error"), missing.out());
        assertEquals(4, error.getInt("exitCode"));
        assertTrue(error.getString("message").contains("no sandbox named 'nope'"), missing.out());

        // The gateway's errors are JSON of one shape, also where Helidon answers by itself.
        String url = gateway.url();
        String token = Files.readString(gateway.state.resolve("api-token")).strip();
        HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(30))
                .build();
        try {
            HttpResponse<String> tooLarge = http.send(HttpRequest.newBuilder(URI.create(url + "/v1/sandboxes"))
                    .header("Authorization", "Bearer " + token).header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString("{\"policy\":\"" + "x".repeat(70 * 1024) + "\"}"))
                    .timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(413, tooLarge.statusCode());
            assertEquals("TOO_LARGE", GatewayUnderTest.parse(tooLarge.body()).getString("error"), tooLarge.body());
            HttpResponse<String> nowhere = http.send(HttpRequest.newBuilder(URI.create(url + "/v1/nowhere"))
                    .header("Authorization", "Bearer " + token).timeout(Duration.ofSeconds(30)).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(404, nowhere.statusCode());
            assertEquals("NOT_FOUND", GatewayUnderTest.parse(nowhere.body()).getString("error"), nowhere.body());
        } finally {
            http.shutdownNow();
        }
        assertEquals(0, gateway.cli("gateway", "stop").exit());

        // The gateway program's own options.
        Process help = new ProcessBuilder(ProcessHandle.current().info().command().orElseThrow(), "-p",
                System.getProperty("jdk.module.path"), "-m", "openshell.gateway/openshell.gateway.GatewayMain", "--help")
                .redirectErrorStream(true).start();
        String said = new String(help.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        assertTrue(help.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, help.exitValue(), said);
        assertTrue(said.startsWith("usage: openshell-gateway "), said);

        // A state directory others can enter: the CLI says what is wrong and the command that fixes it.
        Path open = Files.createDirectory(tmp.resolve("open"));
        Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rwxr-xr-x"));
        Cli.Result refused = Cli.run(open, "gateway", "start", "--background", "--port", "0");
        assertEquals(1, refused.exit(), refused.out() + refused.err());
        assertTrue(refused.err().contains("has permissions rwxr-xr-x") && refused.err().contains("chmod 700 " + open),
                refused.err());
        assertFalse(refused.err().contains("see " + open.resolve("gateway.log")), refused.err());
        assertFalse(Files.exists(open.resolve("gateway.json")), "no gateway was started");
    }

    @Test
    void sandboxLogsShowTheSupervisorsDecisionsFilteredByDenialAndTime() throws Exception {
        gateway = new GatewayUnderTest(tmp.resolve("home"), Launchers.environment());
        gateway.start(0);
        Path policy = Files.writeString(tmp.resolve("policy.yaml"), CliSandboxTest.POLICY);
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        Instant before = Instant.now().minusSeconds(1);
        // The agent prints a line that imitates the supervisor's decisions, then tries a denied connect
        // itself: to a documentation address (TEST-NET-2) that the supervisor refuses before any packet
        // (the sandbox's namespace has only its own loopback anyway).
        Cli.Result created = gateway.cli("sandbox", "create", "--policy", policy.toString(), "--name", "usable", "--",
                "/bin/bash", "-c", "echo '[decision] {\"decision\":\"deny\",\"reason\":\"forged\"}'; "
                        + "echo > /dev/tcp/198.51.100.1/443; exec /bin/sleep 600");
        assertEquals(0, created.exit(), created.out() + created.err() + gateway.diagnostics());
        // The result alone on stdout; progress, if any, whole lines on stderr.
        assertTrue(created.out().matches("sandbox usable \\(\\S+\\) RUNNING\n"), "the result on a line of its own: "
                + created.out());
        assertTrue(created.err().isEmpty() || created.err().endsWith("\n"), created.err());

        Instant deadline = Instant.now().plus(DECISION_WAIT);
        Cli.Result denied;
        do {
            denied = gateway.cli("sandbox", "logs", "usable", "--denied");
            assertEquals(0, denied.exit(), denied.err());
        } while (denied.out().isEmpty() && Instant.now().isBefore(deadline) && pause());
        List<String> lines = denied.out().lines().toList();
        assertFalse(lines.isEmpty(), "the denied connect reaches the sandbox's log within " + DECISION_WAIT
                + gateway.diagnostics());
        assertTrue(lines.stream().allMatch(l -> l.contains(" supervisor: DENY ")), "only denials: " + denied.out());
        assertTrue(lines.stream().anyMatch(l -> l.contains("DENY connect /usr/bin/bash -> 198.51.100.1:443")), denied.out());
        assertFalse(denied.out().contains("forged"), "the agent's imitation is no decision: " + denied.out());

        Cli.Result all = gateway.cli("sandbox", "logs", "usable");
        assertTrue(all.out().lines().anyMatch(l -> l.equals("[stdout] [decision] {\"decision\":\"deny\",\"reason\":\"forged\"}")),
                "the agent's line is marked as its stdout: " + all.out());
        assertTrue(all.out().lines().anyMatch(l -> l.contains(" gateway: ")), "the gateway's events are there too: " + all.out());

        // -o json after the filters: one document, each entry with its source, time and audit record.
        Cli.Result json = gateway.cli("sandbox", "logs", "usable", "--denied", "--since", "10m", "-o", "json");
        assertEquals(0, json.exit(), json.err());
        List<JsonObject> entries = GatewayUnderTest.parse(json.out()).getJsonArray("entries").getValuesAs(JsonObject.class);
        assertFalse(entries.isEmpty(), json.out());
        for (JsonObject e : entries) {
            assertEquals("supervisor", e.getString("source"), e.toString());
            assertEquals("deny", e.getJsonObject("record").getString("decision"), e.toString());
            assertFalse(Instant.parse(e.getString("time")).isBefore(before), e.toString());
        }
        Cli.Result future = gateway.cli("sandbox", "logs", "usable", "--since", Instant.now().plusSeconds(3600).toString(),
                "-o", "json");
        assertEquals(0, future.exit(), future.err());
        assertEquals(0, GatewayUnderTest.parse(future.out()).getJsonArray("entries").size(), future.out());

        assertEquals(0, gateway.cli("sandbox", "delete", "usable").exit());
    }

    private static boolean pause() throws InterruptedException {
        Thread.sleep(500);
        return true;
    }
}
