package openshell.tests.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The CLI's gateway and sandbox commands against a real gateway process. */
class CliGatewayTest {
    @TempDir
    Path tmp;

    private Path state;

    private Cli.Result cli(String... args) throws Exception {
        return Cli.run(state, args);
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
        Cli.Result start = cli("gateway", "start", "--background", "--port", "0");
        assertEquals(0, start.exit(), start.err());
        assertTrue(start.out().startsWith("gateway running at http://127.0.0.1:"), start.out());
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(state)));

        Cli.Result status = cli("--output", "json", "gateway", "status");
        assertEquals(0, status.exit(), status.err());
        assertTrue(status.out().contains("\"url\":\"http://127.0.0.1:"), status.out());

        Cli.Result again = cli("gateway", "start", "--background", "--port", "0");
        assertEquals(1, again.exit());
        assertTrue(again.err().contains("already runs"), again.err());

        Cli.Result list = cli("--output", "json", "sandbox", "list");
        assertEquals(0, list.exit(), list.err());
        assertEquals("{\"sandboxes\":[]}", list.out().strip());

        Cli.Result missing = cli("sandbox", "get", "nope");
        assertEquals(4, missing.exit());
        assertTrue(missing.err().contains("no sandbox named 'nope'"), missing.err());

        Cli.Result provider = Cli.run(state, java.util.Map.of("MY_TOKEN", "ghp_fromTheEnvironment"),
                "provider", "create", "github", "--env", "GITHUB_TOKEN", "--host", "api.github.com", "--from-env", "MY_TOKEN");
        assertEquals(0, provider.exit(), provider.err());
        assertTrue(provider.out().contains("GITHUB_TOKEN=openshell-credential-github"), provider.out());
        Cli.Result providers = cli("provider", "list");
        assertTrue(providers.out().contains("github") && !providers.out().contains("ghp_fromTheEnvironment"),
                providers.out());
        Cli.Result noValue = cli("provider", "create", "x", "--env", "X", "--host", "a.com");
        assertEquals(2, noValue.exit(), "a value must come from the environment or stdin, never argv");
        assertEquals(0, cli("provider", "delete", "github").exit());
        assertEquals(4, cli("provider", "delete", "github").exit());

        Cli.Result usage = cli("sandbox", "frobnicate");
        assertEquals(2, usage.exit());

        Cli.Result stop = cli("gateway", "stop");
        assertEquals(0, stop.exit(), stop.err());
        assertFalse(Files.exists(state.resolve("gateway.json")), "the endpoint file goes with the gateway");

        Cli.Result down = cli("sandbox", "list");
        assertEquals(3, down.exit());
        assertTrue(down.err().contains("openshell gateway start"), "the error says what to do: " + down.err());
    }

    @Test
    void aWrongTokenIsRefusedAndTheTokenIsNeverPrinted() throws Exception {
        state = tmp.resolve("home");
        assertEquals(0, cli("gateway", "start", "--background", "--port", "0").exit());
        String token = Files.readString(state.resolve("api-token")).strip();
        Cli.Result ok = cli("--output", "json", "sandbox", "list");
        assertFalse(ok.out().contains(token) || ok.err().contains(token));
        Files.writeString(state.resolve("api-token"), "x".repeat(43));
        Cli.Result refused = cli("sandbox", "list");
        assertEquals(3, refused.exit(), refused.err());
        assertTrue(refused.err().contains("API token"), refused.err());
    }
}
