package openshell.tests.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The CLI's gateway and sandbox commands against a real gateway process. */
class CliGatewayTest {
    @TempDir
    Path tmp;

    private Path state;

    record Result(int exit, String out, String err) {
    }

    private Result cli(String... args) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of(
                ProcessHandle.current().info().command().orElseThrow(),
                "-p", System.getProperty("jdk.module.path"),
                "-m", "openshell.cli/openshell.cli.Main", "--state", state.toString()));
        command.addAll(List.of(args));
        Process p = new ProcessBuilder(command).redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile()))
                .start();
        // Drain both streams before waiting so a chatty child can never block on a full pipe.
        var err = java.util.concurrent.CompletableFuture.supplyAsync(() -> read(p.getErrorStream()));
        String out = read(p.getInputStream());
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "openshell " + String.join(" ", args) + " did not finish");
        return new Result(p.exitValue(), out, err.join());
    }

    private static String read(java.io.InputStream in) {
        try {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            return e.toString();
        }
    }

    @AfterEach
    void stopGateway() throws Exception {
        if (state != null && Files.exists(state.resolve("gateway.json"))) {
            cli("gateway", "stop");
        }
    }

    @Test
    void gatewayLifecycleAndSandboxCommands() throws Exception {
        state = tmp.resolve("home");
        Result start = cli("gateway", "start", "--background", "--port", "0");
        assertEquals(0, start.exit(), start.err());
        assertTrue(start.out().startsWith("gateway running at http://127.0.0.1:"), start.out());
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(state)));

        Result status = cli("--output", "json", "gateway", "status");
        assertEquals(0, status.exit(), status.err());
        assertTrue(status.out().contains("\"url\":\"http://127.0.0.1:"), status.out());

        Result again = cli("gateway", "start", "--background", "--port", "0");
        assertEquals(1, again.exit());
        assertTrue(again.err().contains("already runs"), again.err());

        Result list = cli("--output", "json", "sandbox", "list");
        assertEquals(0, list.exit(), list.err());
        assertEquals("{\"sandboxes\":[]}", list.out().strip());

        Result missing = cli("sandbox", "get", "nope");
        assertEquals(4, missing.exit());
        assertTrue(missing.err().contains("no sandbox named 'nope'"), missing.err());

        Result usage = cli("sandbox", "frobnicate");
        assertEquals(2, usage.exit());

        Result stop = cli("gateway", "stop");
        assertEquals(0, stop.exit(), stop.err());
        assertFalse(Files.exists(state.resolve("gateway.json")), "the endpoint file goes with the gateway");

        Result down = cli("sandbox", "list");
        assertEquals(3, down.exit());
        assertTrue(down.err().contains("openshell gateway start"), "the error says what to do: " + down.err());
    }

    @Test
    void aWrongTokenIsRefusedAndTheTokenIsNeverPrinted() throws Exception {
        state = tmp.resolve("home");
        assertEquals(0, cli("gateway", "start", "--background", "--port", "0").exit());
        String token = Files.readString(state.resolve("api-token")).strip();
        Result ok = cli("--output", "json", "sandbox", "list");
        assertFalse(ok.out().contains(token) || ok.err().contains(token));
        Files.writeString(state.resolve("api-token"), "x".repeat(43));
        Result refused = cli("sandbox", "list");
        assertEquals(3, refused.exit(), refused.err());
        assertTrue(refused.err().contains("API token"), refused.err());
    }
}
