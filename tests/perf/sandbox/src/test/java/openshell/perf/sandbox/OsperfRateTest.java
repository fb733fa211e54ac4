package openshell.perf.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The real osperf (built by this module's compile phase) in its rate mode, on the host against
 * loopback: bounded by time however far the machine is from the target, in-flight connects
 * abandoned at the drain bound, and its lines read by the harness's own accounting.
 */
class OsperfRateTest {
    private static final Path OSPERF = Path.of("target", "osperf");
    /** Bounds the whole client run: far above what a bounded run may take. */
    private static final Duration RUN = Duration.ofSeconds(120);
    /** Scheduling slack on a loaded 2-core machine, added to the bounds osperf promises. */
    private static final long SLACK_NANOS = Duration.ofSeconds(3).toNanos();

    private static Path osperf() {
        assertTrue(Files.isExecutable(OSPERF), "no " + OSPERF.toAbsolutePath() + ": the compile phase builds it with gcc");
        return OSPERF;
    }

    @Test
    void aTargetFarAboveTheMachineStopsAtItsSecondsAndReportsTheRateAchieved() throws Exception {
        ClientRun server = ClientRun.host(List.of(osperf().toString(), "serve", "127.0.0.1"), RUN);
        try {
            Map<String, Object> ports = server.await("ready");
            int seconds = 2;
            double target = 10_000_000;
            ClientRun client = ClientRun.host(List.of(osperf().toString(), "rate", "127.0.0.1", ports.get("echo").toString(),
                    ports.get("denied").toString(), "10000000", Integer.toString(seconds), "4"), RUN);
            client.await("ready");
            long started = System.nanoTime();
            SoakTally.Agent agent = SoakTally.Agent.of("host", client.await("rate"));
            List<Long> samples = SoakTally.samples("host", client.await("result"));
            client.awaitExit();
            long took = System.nanoTime() - started;
            // Bounded by time: 20 million connects were asked for, the run ended after its seconds.
            assertTrue(took < Duration.ofSeconds(seconds + SandboxBenchmark.OSPERF_RATE_DRAIN_S).toNanos() + SLACK_NANOS, took + " ns");
            assertTrue(agent.elapsedNanos() >= Duration.ofSeconds(seconds).toNanos() - 1, "ended before its seconds: " + agent);
            assertTrue(agent.attempted() > 0 && agent.attempted() < target * seconds, agent.toString());
            assertEquals(target, agent.targetPerSecond());
            assertEquals(agent.attempted(), agent.ok() + agent.failedSlow() + agent.failedOther() + agent.deniedConnected()
                    + agent.deniedRefused() + agent.deniedSlow() + agent.deniedOther() + agent.aborted(), agent.toString());
            assertEquals(agent.ok() + agent.failedSlow() + agent.failedOther(), samples.size());
            SoakTally tally = new SoakTally();
            tally.add(agent, samples);
            assertTrue(tally.achievedPerSecond() < target, "achieved " + tally.achievedPerSecond());
            // The host does not mediate: the "denied" port answers, which the accounting must call out.
            assertTrue(agent.deniedConnected() > 0, agent.toString());
            assertTrue(tally.violations().getFirst().startsWith("soak: denied connections not all refused with EACCES: "
                    + agent.deniedConnected() + " connected"), tally.violations().toString());
        } finally {
            server.close();
        }
    }

    /** At the bound: connects that never end are abandoned RATE_DRAIN_S after the time is up, and reported as aborted. */
    @Test
    void connectsStillInFlightAreAbortedAtTheDrainBound() throws Exception {
        List<Socket> held = java.util.Collections.synchronizedList(new ArrayList<>());
        try (ServerSocket silent = new ServerSocket(0, 64, InetAddress.getLoopbackAddress())) {
            // Answers the warm-up connect only; later connections complete (the backlog) but never get their echo.
            Thread.ofVirtual().start(() -> {
                try {
                    Socket s = silent.accept();
                    held.add(s);
                    InputStream in = s.getInputStream();
                    OutputStream out = s.getOutputStream();
                    out.write(in.read());
                    out.flush();
                } catch (IOException e) {
                    // the test's assertions say what went wrong
                }
            });
            String port = Integer.toString(silent.getLocalPort());
            int threads = 3;
            ClientRun client = ClientRun.host(List.of(osperf().toString(), "rate", "127.0.0.1", port, port, "100", "1",
                    Integer.toString(threads)), RUN);
            client.await("ready");
            Map<String, Object> line = client.await("rate");
            SoakTally.Agent agent = SoakTally.Agent.of("host", line);
            client.await("result");
            client.awaitExit();
            assertEquals((long) SandboxBenchmark.OSPERF_RATE_DRAIN_S, ((Map<?, ?>) line.get("rate")).get("drain_s"));
            long bound = Duration.ofSeconds(1 + SandboxBenchmark.OSPERF_RATE_DRAIN_S).toNanos();
            assertTrue(agent.elapsedNanos() >= bound, "did not wait the drain: " + agent);
            assertTrue(agent.elapsedNanos() < bound + SLACK_NANOS, "drain not bounded: " + agent);
            // Each thread started one connect, blocked in its echo, and never started another.
            assertEquals(threads, agent.attempted(), agent.toString());
            assertEquals(threads, agent.aborted(), agent.toString());
            SoakTally tally = new SoakTally();
            tally.add(agent, List.of());
            assertTrue(tally.violations().stream().noneMatch(v -> v.contains("allowed")), tally.violations().toString());
        } finally {
            for (Socket s : held) {
                s.close();
            }
        }
    }
}
