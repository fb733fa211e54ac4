package openshell.tests.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.StringReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.stream.Stream;

import jakarta.json.Json;
import jakarta.json.JsonObject;
import jakarta.json.JsonReader;

/**
 * A gateway started by the CLI ({@code gateway start --background}) on its own state directory,
 * with the process driver's launchers in the CLI's environment, and the CLI to drive it.
 */
final class GatewayUnderTest {
    /** How long a gateway may take to exit after a signal. */
    static final Duration EXIT_TIMEOUT = Duration.ofSeconds(60);
    /** How often a wait for a sandbox's state asks again. */
    static final Duration POLL = Duration.ofMillis(500);

    final Path state;
    private final Map<String, String> env;

    GatewayUnderTest(Path state, Map<String, String> env) {
        this.state = state;
        this.env = env;
    }

    Cli.Result cli(String... args) throws Exception {
        return Cli.run(state, env, args);
    }

    /** Runs a CLI command with {@code --output json} that must succeed, and parses its output. */
    JsonObject json(String... args) throws Exception {
        List<String> all = new ArrayList<>(List.of("--output", "json"));
        all.addAll(List.of(args));
        Cli.Result r = cli(all.toArray(String[]::new));
        assertEquals(0, r.exit(), String.join(" ", args) + ": " + r.out() + r.err() + diagnostics());
        return parse(r.out());
    }

    static JsonObject parse(String json) {
        try (JsonReader reader = Json.createReader(new StringReader(json))) {
            return reader.readObject();
        }
    }

    /** Starts the gateway in the background; port 0 picks a free one. */
    void start(int port) throws Exception {
        Cli.Result r = cli("gateway", "start", "--background", "--port", Integer.toString(port));
        assertEquals(0, r.exit(), "gateway start: " + r.out() + r.err() + diagnostics());
    }

    JsonObject endpoint() throws Exception {
        return parse(Files.readString(state.resolve("gateway.json")));
    }

    String url() throws Exception {
        return endpoint().getString("url");
    }

    int port() throws Exception {
        String url = url();
        return Integer.parseInt(url.substring(url.lastIndexOf(':') + 1));
    }

    /**
     * Sends a signal to the gateway process and waits until it is gone.
     *
     * @param signal {@code TERM} or {@code KILL}
     */
    void kill(String signal) throws Exception {
        long pid = endpoint().getJsonNumber("pid").longValue();
        ProcessHandle gateway = ProcessHandle.of(pid).orElseThrow(() -> new AssertionError("no gateway process " + pid));
        Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(pid)).inheritIO().start();
        assertTrue(kill.waitFor(30, TimeUnit.SECONDS) && kill.exitValue() == 0, "kill -" + signal + " " + pid);
        gateway.onExit().get(EXIT_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
    }

    /**
     * Asks for the sandbox until it matches, or fails after the timeout with what it was.
     *
     * @return the matching {@code sandbox get} body
     */
    JsonObject await(String name, String what, Predicate<JsonObject> condition, Duration timeout) throws Exception {
        Instant deadline = Instant.now().plus(timeout);
        JsonObject last = null;
        while (Instant.now().isBefore(deadline)) {
            Cli.Result r = cli("--output", "json", "sandbox", "get", name);
            if (r.exit() == 0) {
                last = parse(r.out());
                if (condition.test(last)) {
                    return last;
                }
            }
            Thread.sleep(POLL);
        }
        throw new AssertionError("sandbox " + name + " not " + what + " within " + timeout + "; last: " + last
                + diagnostics());
    }

    /** The gateway's and every sandbox's logs, for failure messages. */
    String diagnostics() {
        StringBuilder b = new StringBuilder();
        try {
            Path log = state.resolve("gateway.log");
            b.append("\n--- gateway.log ---\n").append(Files.exists(log) ? tail(Files.readString(log)) : "none");
            Path sandboxes = state.resolve("drivers/process/sandboxes");
            if (Files.isDirectory(sandboxes)) {
                try (Stream<Path> dirs = Files.list(sandboxes)) {
                    for (Path d : dirs.toList()) {
                        for (String f : new String[] {"supervisor.log", "runtime.log"}) {
                            if (Files.exists(d.resolve(f))) {
                                b.append("\n--- ").append(d.getFileName()).append('/').append(f).append(" ---\n")
                                        .append(tail(Files.readString(d.resolve(f))));
                            }
                        }
                    }
                }
            }
        } catch (Exception e) {
            b.append("\n(diagnostics failed: ").append(e).append(')');
        }
        return b.toString();
    }

    private static String tail(String s) {
        return s.length() <= 6000 ? s : "…" + s.substring(s.length() - 6000);
    }

    /** Stops a gateway that still runs (a test that failed half way); never fails itself. */
    void stopQuietly() {
        try {
            if (Files.exists(state.resolve("gateway.json"))) {
                cli("gateway", "stop");
            }
        } catch (Exception ignored) {
            // Best effort after a failure; the failure itself is what the report shows.
        }
    }
}
