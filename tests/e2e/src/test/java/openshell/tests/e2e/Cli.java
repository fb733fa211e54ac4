package openshell.tests.e2e;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/** Runs the openshell CLI as a separate process on this test's module path, as a user would. */
final class Cli {
    /** How long one CLI command may take before the test fails with what it and the gateway were doing. */
    static final Duration COMMAND_WAIT = Duration.ofSeconds(120);
    /** How much of the gateway's log a hung command's failure shows (its end). */
    static final int LOG_TAIL_BYTES = 64 * 1024;

    record Result(int exit, String out, String err) {
    }

    private Cli() {
    }

    static Result run(Path state, String... args) throws IOException, InterruptedException {
        return run(state, Map.of(), args);
    }

    static Result run(Path state, Map<String, String> env, String... args) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of(
                ProcessHandle.current().info().command().orElseThrow(),
                "-p", System.getProperty("jdk.module.path"),
                "-m", "openshell.cli/openshell.cli.Main", "--state", state.toString()));
        command.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(command).redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile()));
        pb.environment().putAll(env);
        Process p = pb.start();
        // Both streams drain on their own threads so a chatty child never blocks on a full pipe, and
        // so that a command that never ends fails this test instead of hanging the build.
        Drain out = Drain.start(p.getInputStream());
        Drain err = Drain.start(p.getErrorStream());
        if (!p.waitFor(COMMAND_WAIT.toSeconds(), TimeUnit.SECONDS)) {
            String cliThreads = threads(p.pid());
            String gatewayThreads = gatewayPid(state).map(Cli::threads).orElse("no gateway.json");
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
            fail("openshell " + String.join(" ", args) + " did not finish within " + COMMAND_WAIT
                    + "\n--- its stdout ---\n" + out.text() + "\n--- its stderr ---\n" + err.text()
                    + "\n--- its threads ---\n" + cliThreads + "\n--- the gateway's threads ---\n" + gatewayThreads
                    + "\n--- the end of gateway.log ---\n" + tail(state.resolve("gateway.log")));
        }
        out.thread.join(TimeUnit.SECONDS.toMillis(10));
        err.thread.join(TimeUnit.SECONDS.toMillis(10));
        if (out.thread.isAlive() || err.thread.isAlive()) {
            fail("openshell " + String.join(" ", args) + " exited " + p.exitValue()
                    + " but something it started still holds its output open:\n" + out.text() + err.text());
        }
        return new Result(p.exitValue(), out.text(), err.text());
    }

    private static java.util.Optional<Long> gatewayPid(Path state) {
        try {
            Path endpoint = state.resolve("gateway.json");
            return Files.exists(endpoint)
                    ? java.util.Optional.of(GatewayUnderTest.parse(Files.readString(endpoint)).getJsonNumber("pid").longValue())
                    : java.util.Optional.empty();
        } catch (IOException | RuntimeException e) {
            return java.util.Optional.empty();
        }
    }

    /** The threads of a JVM, from the JDK's own jcmd; a hang's diagnosis, never an assertion. */
    private static String threads(long pid) {
        Path jcmd = Path.of(System.getProperty("java.home"), "bin", "jcmd");
        try {
            Process p = new ProcessBuilder(jcmd.toString(), Long.toString(pid), "Thread.print")
                    .redirectErrorStream(true).start();
            Drain text = Drain.start(p.getInputStream());
            if (!p.waitFor(30, TimeUnit.SECONDS)) {
                p.destroyForcibly();
            }
            text.thread.join(TimeUnit.SECONDS.toMillis(5));
            return text.text();
        } catch (IOException e) {
            return "jcmd: " + e;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "interrupted";
        }
    }

    private static String tail(Path log) {
        try {
            if (!Files.exists(log)) {
                return "none";
            }
            byte[] all = Files.readAllBytes(log);
            int from = Math.max(0, all.length - LOG_TAIL_BYTES);
            return new String(all, from, all.length - from, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return e.toString();
        }
    }

    /** One stream read to its end on a daemon thread; what it read so far is always available. */
    private record Drain(ByteArrayOutputStream bytes, Thread thread) {
        static Drain start(InputStream in) {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            Thread t = Thread.ofPlatform().daemon().name("cli-drain").start(() -> {
                byte[] buffer = new byte[8192];
                try (in) {
                    for (int n; (n = in.read(buffer)) >= 0; ) {
                        synchronized (bytes) {
                            bytes.write(buffer, 0, n);
                        }
                    }
                } catch (IOException e) {
                    // The process was killed or its stream closed; what was read stays.
                }
            });
            return new Drain(bytes, t);
        }

        String text() {
            synchronized (bytes) {
                return bytes.toString(StandardCharsets.UTF_8);
            }
        }
    }
}
