package openshell.isolation.conformance.selftest;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import openshell.isolation.conformance.IsolationConformance;

import org.junit.jupiter.api.Test;

/**
 * The kit's command-line runner on the module path, in a child JVM, against the plain backend
 * this test module registers as a {@code ConformanceTarget} service.
 */
class CommandLineTest {
    private static final Duration RUN_BOUND = Duration.ofMinutes(5);
    private static final String MAIN = "openshell.isolation.conformance/openshell.isolation.conformance.launcher.ConformanceMain";

    record Run(int exit, String out) {
    }

    static Run run(String... args) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-p", System.getProperty("jdk.module.path"), "-m", MAIN));
        command.addAll(List.of(args));
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        CompletableFuture<String> out = CompletableFuture.supplyAsync(() -> {
            try {
                return new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            } catch (IOException e) {
                return e.toString();
            }
        });
        if (!process.waitFor(RUN_BOUND.toMillis(), TimeUnit.MILLISECONDS)) {
            process.destroyForcibly();
            throw new AssertionError("the runner did not finish within " + RUN_BOUND);
        }
        return new Run(process.exitValue(), out.join());
    }

    @Test
    void runsEveryCheckAgainstTheNamedBackendAndFailsWhenAnyFails() throws Exception {
        Run run = run("--backend", "plain-test");
        assertEquals(1, run.exit(), run.out());
        assertTrue(run.out().contains("PASS lifecycle.start-twice-refused"), run.out());
        assertTrue(run.out().contains("PASS process.exit-code-and-signal-distinct"), run.out());
        assertTrue(run.out().contains("FAIL invariant1.egress-only-via-mediation: "), run.out());
        assertTrue(run.out().contains("conformance of plain-test: " + (IsolationConformance.checkNames().size() - KitBitesTest.NEEDS_ISOLATION.size())
                + " passed, " + KitBitesTest.NEEDS_ISOLATION.size() + " failed"), run.out());
    }

    @Test
    void unknownBackendIsAUsageErrorThatListsTheRegisteredOnes() throws Exception {
        Run run = run("--backend", "plain");
        assertEquals(2, run.exit(), run.out());
        assertTrue(run.out().contains("no conformance target for backend 'plain'; registered: [plain-test@1]"), run.out());
        assertEquals(2, run("--backend").exit());
        Run list = run("--list");
        assertEquals(0, list.exit(), list.out());
        assertEquals("plain-test@1", list.out().strip());
    }
}
