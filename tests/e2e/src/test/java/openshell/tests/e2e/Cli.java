package openshell.tests.e2e;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/** Runs the openshell CLI as a separate process on this test's module path, as a user would. */
final class Cli {
    record Result(int exit, String out, String err) {
    }

    private Cli() {
    }

    static Result run(Path state, String... args) throws IOException, InterruptedException {
        return run(state, java.util.Map.of(), args);
    }

    static Result run(Path state, java.util.Map<String, String> env, String... args)
            throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of(
                ProcessHandle.current().info().command().orElseThrow(),
                "-p", System.getProperty("jdk.module.path"),
                "-m", "openshell.cli/openshell.cli.Main", "--state", state.toString()));
        command.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(command).redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile()));
        pb.environment().putAll(env);
        Process p = pb.start();
        // Drain both streams before waiting so a chatty child can never block on a full pipe.
        CompletableFuture<String> err = CompletableFuture.supplyAsync(() -> read(p.getErrorStream()));
        String out = read(p.getInputStream());
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "openshell " + String.join(" ", args) + " did not finish");
        return new Result(p.exitValue(), out, err.join());
    }

    private static String read(InputStream in) {
        try {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            return e.toString();
        }
    }
}
