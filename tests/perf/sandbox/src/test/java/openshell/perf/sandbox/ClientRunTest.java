package openshell.perf.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Reading an agent's output file: a client cut off ends the wait with an error naming its sandbox, never a hang. */
class ClientRunTest {
    /** Generous against a loaded machine, and far below DEADLINE: the wait ended on the output, not on the clock. */
    private static final Duration PROMPTLY = Duration.ofSeconds(20);
    private static final Duration DEADLINE = Duration.ofSeconds(120);

    @TempDir
    Path dir;

    private static void append(Path file, String text) throws IOException {
        Files.writeString(file, text, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    }

    @Test
    void aClientKilledMidLineEndsTheWaitAtOnceNamingItsSandbox() throws Exception {
        Path out = dir.resolve("agent.jsonl");
        append(out, "{\"ready\":\"rate\"}\n{\"rate\":{\"target_per_s\":50.000,\"seconds\":60,\"attem");
        ClientRun run = ClientRun.agentFile("soak agent sb-cut", out, DEADLINE);
        run.await("ready");
        // What the agent's shell appends once osperf is gone (SandboxBenchmark.startAgent): SIGKILL = 128 + 9.
        append(out, "\n{\"" + ClientRun.AGENT_EXIT + "\":137}\n");
        long t = System.nanoTime();
        IOException e = assertThrows(IOException.class, () -> run.await("rate"));
        assertTrue(System.nanoTime() - t < PROMPTLY.toNanos(), "waited for the deadline instead of the exit line");
        assertTrue(e.getMessage().startsWith("soak agent sb-cut: an output line is not JSON"), e.getMessage());
        // The harness goes on with awaitExit in some paths: it must fail with the status, not wait.
        IOException exit = assertThrows(IOException.class, run::awaitExit);
        assertTrue(exit.getMessage().contains("exit 137"), exit.getMessage());
    }

    @Test
    void aClientThatExitedBeforeItsResultEndsTheWaitWithItsStatus() throws Exception {
        Path out = dir.resolve("agent.jsonl");
        append(out, "{\"ready\":\"rate\"}\n\n{\"" + ClientRun.AGENT_EXIT + "\":1}\n");
        ClientRun run = ClientRun.agentFile("soak agent sb-gone", out, DEADLINE);
        run.await("ready");
        long t = System.nanoTime();
        IOException e = assertThrows(IOException.class, () -> run.await("result"));
        assertTrue(System.nanoTime() - t < PROMPTLY.toNanos(), "waited for the deadline instead of the exit line");
        assertEquals("soak agent sb-gone: osperf ended (status 1) before the expected line; stderr: ", e.getMessage());
    }

    @Test
    void aSilentClientEndsAtTheDeadlineNamingItsSandbox() throws Exception {
        Path out = dir.resolve("agent.jsonl");
        append(out, "{\"ready\":\"rate\"}\n");
        ClientRun run = ClientRun.agentFile("soak agent sb-silent", out, Duration.ofSeconds(1));
        run.await("ready");
        IOException e = assertThrows(IOException.class, () -> run.await("result"));
        assertTrue(e.getMessage().startsWith("soak agent sb-silent: "), e.getMessage());
    }

    @Test
    void rearmBoundsTheNextPhaseFromNow() throws Exception {
        Path out = dir.resolve("agent.jsonl");
        append(out, "{\"ready\":\"rate\"}\n");
        ClientRun run = ClientRun.agentFile("soak agent sb-rearm", out, Duration.ofSeconds(1));
        run.await("ready");
        run.rearm(DEADLINE);
        // Past the first deadline (not synchronization): re-armed, the run still takes a later result.
        Thread.sleep(1_500);
        append(out, "{\"result\":\"rate\",\"ops\":1,\"errors\":0,\"elapsed_ns\":5,\"bytes\":0,\"samples_ns\":[7]}\n");
        assertEquals(java.util.List.of(7L), SoakTally.samples("sb-rearm", run.await("result")));
        run.awaitExit();
    }

    @Test
    void textLinesFromStderrAreKeptAsStderrAndSkipped() throws Exception {
        Path out = dir.resolve("agent.jsonl");
        append(out, "{\"ready\":\"connect\"}\nfirst error: Connection timed out\n"
                + "{\"result\":\"connect\",\"ops\":1,\"errors\":1,\"elapsed_ns\":5,\"bytes\":0,\"samples_ns\":[9]}\n");
        ClientRun run = ClientRun.agentFile("agent sb-text", out, DEADLINE);
        run.await("ready");
        assertEquals(1L, run.await("result").get("errors"));
        run.awaitExit();
    }
}
