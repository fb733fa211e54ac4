package openshell.isolation.conformance;

import static openshell.isolation.conformance.Workbench.await;
import static openshell.isolation.conformance.Workbench.expect;
import static openshell.isolation.conformance.Workbench.finish;
import static openshell.isolation.conformance.Workbench.readAll;
import static openshell.isolation.conformance.Workbench.readLine;
import static openshell.isolation.conformance.Workbench.required;
import static openshell.isolation.conformance.Workbench.within;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Random;

import openshell.isolation.BackendException.Kind;
import openshell.isolation.BoundaryProcess;
import openshell.isolation.ByteChannel;
import openshell.isolation.ExecSession;
import openshell.isolation.ExecSpec;
import openshell.isolation.ExitStatus;
import openshell.isolation.LoopbackTarget;
import openshell.isolation.ProcessSignal;
import openshell.isolation.RunningBoundary;
import openshell.isolation.TerminalSize;

/** Processes, execs and port forwards: what the supervisor does with a running boundary. */
final class ProcessChecks {
    private static final long IDLE_SECONDS = IsolationConformance.WAIT.multipliedBy(10).toSeconds();

    private ProcessChecks() {
    }

    static List<Check> all() {
        return List.of(
                new Check("process.await-exit-stable", ProcessChecks::awaitStable),
                new Check("process.signal-after-exit-terminated", ProcessChecks::signalAfterExit),
                new Check("process.exit-code-and-signal-distinct", ProcessChecks::exitCodeVersusSignal),
                new Check("process.signal-delivered", ProcessChecks::signalDelivered),
                new Check("process.terminate-kills-tree", ProcessChecks::terminateKillsTree),
                new Check("exec.separate-stdout-stderr", ProcessChecks::separateStreams),
                new Check("exec.pty-merges-and-resizes", ProcessChecks::ptyMergesAndResizes),
                new Check("forward.non-loopback-rejected", ProcessChecks::nonLoopbackRejected),
                new Check("forward.carries-bytes", ProcessChecks::forwardCarriesBytes),
                new Check("forward.closed-port-failed", ProcessChecks::forwardClosedPort));
    }

    private static void awaitStable(Workbench bench) {
        RunningBoundary running = bench.start(bench.script("exit 7")).running();
        ExitStatus agent = await(running.agent(), "the agent");
        assertEquals(new ExitStatus.Exited(7), agent);
        stable(running.agent(), agent);

        RunningBoundary other = bench.startIdle().running();
        ExecSession session = bench.sh(other, "exit 5");
        ExitStatus exec = finish(session, "an exec");
        assertEquals(new ExitStatus.Exited(5), exec);
        stable(session.process(), exec);
    }

    private static void stable(BoundaryProcess process, ExitStatus first) {
        for (int i = 0; i < 3; i++) {
            assertEquals(first, process.awaitExit(), "awaitExit() must return the same status every time");
            assertEquals(first, process.awaitExit(Duration.ZERO).orElse(null), "awaitExit(0) must return the recorded status");
            assertEquals(first, process.awaitExit(IsolationConformance.WAIT).orElse(null),
                    "awaitExit(timeout) must return the recorded status");
        }
    }

    private static void signalAfterExit(Workbench bench) {
        RunningBoundary running = bench.startIdle().running();
        ExecSession session = bench.sh(running, "exit 0");
        ExitStatus status = finish(session, "an exec");
        for (ProcessSignal signal : List.of(ProcessSignal.TERM, ProcessSignal.KILL, ProcessSignal.HUP)) {
            expect(Kind.TERMINATED, () -> session.process().signal(signal), signal + " to an exec that has ended");
        }
        session.process().terminate();
        assertEquals(status, session.process().awaitExit(), "signals after exit must not change the status");
    }

    private static void exitCodeVersusSignal(Workbench bench) {
        RunningBoundary running = bench.startIdle().running();
        ExitStatus exited = finish(bench.sh(running, "exit 143"), "exit 143");
        ExitStatus terminated = finish(bench.sh(running, "kill -TERM $$"), "a shell killing itself with TERM");
        ExitStatus killed = finish(bench.sh(running, "kill -KILL $$"), "a shell killing itself with KILL");
        assertEquals(new ExitStatus.Exited(143), exited, "exit code 143 is an exit, not a signal");
        assertEquals(new ExitStatus.Signaled(ProcessSignal.TERM.number()), terminated, "death by TERM is a signal, not exit 143");
        assertEquals(new ExitStatus.Signaled(ProcessSignal.KILL.number()), killed, "death by KILL is a signal, not exit 137");
        assertNotEquals(exited, terminated);
    }

    private static void signalDelivered(Workbench bench) {
        RunningBoundary running = bench.startIdle().running();
        ExecSession plain = bench.sh(running, "echo ready; exec sleep " + IDLE_SECONDS);
        assertEquals("ready", readLine(plain.stdout(), "stdout"));
        plain.process().signal(ProcessSignal.TERM);
        assertEquals(new ExitStatus.Signaled(ProcessSignal.TERM.number()), finish(plain, "an exec sent TERM"));

        ExecSession trapping = bench.sh(running, "trap 'exit 3' USR1; echo ready; while :; do sleep 1; done");
        assertEquals("ready", readLine(trapping.stdout(), "stdout"));
        trapping.process().signal(ProcessSignal.USR1);
        assertEquals(new ExitStatus.Exited(3), finish(trapping, "an exec trapping USR1"),
                "USR1 must reach the process itself");

        running.agent().signal(ProcessSignal.KILL);
        assertEquals(new ExitStatus.Signaled(ProcessSignal.KILL.number()), await(running.agent(), "the agent sent KILL"));
    }

    private static void terminateKillsTree(Workbench bench) throws InterruptedException {
        RunningBoundary running = bench.startIdle().running();
        ExecSession session = bench.sh(running, "sleep " + IDLE_SECONDS + " & echo $!; wait");
        String descendant = readLine(session.stdout(), "stdout");
        assertTrue(descendant.matches("[0-9]+"), "expected the pid of the background sleep, got '" + descendant + "'");
        session.process().terminate();
        finish(session, "a terminated exec");
        // Asked from inside the boundary, by pid: a stream closing is no proof, a runtime may close it early.
        long deadline = System.nanoTime() + IsolationConformance.TERMINATE_BOUND.toNanos();
        while (alive(bench, running, descendant)) {
            if (System.nanoTime() > deadline) {
                fail("a descendant (pid " + descendant + " inside the boundary) outlived terminate() by "
                        + IsolationConformance.TERMINATE_BOUND);
            }
            Thread.sleep(IsolationConformance.POLL);
        }
        session.process().terminate();
    }

    /** Whether a pid is a live (not zombie) process inside the boundary; unknown counts as alive. */
    private static boolean alive(Workbench bench, RunningBoundary running, String pid) {
        ExecSession probe = bench.sh(running, "kill -0 " + pid + " 2>/dev/null || exit 1; "
                + "s=$(cat /proc/" + pid + "/stat 2>/dev/null) || exit 0; case \"$s\" in *') Z '*) exit 1;; esac; exit 0");
        ExitStatus status = finish(probe, "a liveness probe");
        probe.close();
        return !status.equals(new ExitStatus.Exited(1));
    }

    private static void separateStreams(Workbench bench) throws IOException {
        RunningBoundary running = bench.startIdle().running();
        ExecSession session = bench.sh(running, "printf out; printf err >&2; cat");
        assertTrue(session.terminal().isEmpty(), "a piped exec has no terminal");
        session.stdin().write("in".getBytes(StandardCharsets.UTF_8));
        session.stdin().close();
        assertEquals("outin", readAll(session.stdout(), "stdout"), "stdout must carry stdout (and stdin echoed by cat) only");
        assertEquals("err", readAll(session.stderr(), "stderr"), "stderr must be separate from stdout");
        assertEquals(new ExitStatus.Exited(0), finish(session, "the exec"));
    }

    private static void ptyMergesAndResizes(Workbench bench) throws IOException {
        RunningBoundary running = bench.startIdle().running();
        ExecSpec spec = ExecSpec.builder(List.of(bench.target().shell(), "-c", "stty size; echo err >&2; read line; stty size"))
                .pty(new TerminalSize(91, 33)).build();
        ExecSession session = bench.exec(running, spec);
        ExecSession.Terminal terminal = session.terminal()
                .orElseGet(() -> fail("an exec on a PTY must expose its terminal"));
        // Not a default size: the command's first look at its terminal must already see the one asked for.
        assertEquals("33 91", readLine(session.stdout(), "terminal output"), "the PTY must start at the requested size");
        assertEquals("err", readLine(session.stdout(), "terminal output"), "stderr must arrive merged on the terminal");
        terminal.resize(new TerminalSize(100, 30));
        session.stdin().write("go\n".getBytes(StandardCharsets.UTF_8));
        session.stdin().flush();
        String line;
        do {
            line = readLine(session.stdout(), "terminal output");
        } while (line.equals("go"));
        assertEquals("30 100", line, "the PTY must take the new size");
        assertEquals("", readAll(session.stderr(), "stderr of a PTY exec"), "a PTY exec has no separate stderr");
        assertEquals(new ExitStatus.Exited(0), finish(session, "the PTY exec"));
        expect(Kind.TERMINATED, () -> terminal.resize(new TerminalSize(80, 24)), "resizing the terminal of an ended exec");
    }

    private static void nonLoopbackRejected(Workbench bench) throws IOException {
        for (String address : List.of("10.0.0.1", "192.0.2.1", "0.0.0.0", "169.254.169.254", "::", "2001:db8::1")) {
            InetAddress inet = InetAddress.ofLiteral(address);
            expect(Kind.INVALID, () -> new LoopbackTarget(inet, 80), "a port forward to " + address);
        }
        expect(Kind.INVALID, () -> LoopbackTarget.of(0), "port 0");
        expect(Kind.INVALID, () -> LoopbackTarget.of(65536), "port 65536");
        assertEquals(65535, LoopbackTarget.of(65535).port());
        assertEquals(1, new LoopbackTarget(InetAddress.ofLiteral("::1"), 1).port());
    }

    private static void forwardCarriesBytes(Workbench bench) {
        RunningBoundary running = bench.startIdle().running();
        List<String> echo = required(bench.target().loopbackEchoProbe(), "loopback echo probe", "port forwarding");
        ExecSession server = bench.exec(running, echo);
        int port = listeningPort(server);
        byte[] payload = new byte[IsolationConformance.FORWARD_PAYLOAD];
        new Random(port).nextBytes(payload);
        try (ByteChannel channel = running.portForward().connect(LoopbackTarget.of(port))) {
            Thread writer = Thread.ofVirtual().name("conformance-forward-writer").start(() -> {
                try (OutputStream out = channel.output()) {
                    out.write(payload);
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            byte[] echoed = within(IsolationConformance.WAIT, "the echo through the forward", () -> readBytes(channel.input()));
            assertArrayEquals(payload, echoed, "the forward must carry every byte both ways");
            within(IsolationConformance.WAIT, "the forward writer", () -> writer.join(IsolationConformance.WAIT));
        }
        assertEquals(new ExitStatus.Exited(0), finish(server, "the echo service"));
    }

    private static void forwardClosedPort(Workbench bench) throws IOException {
        RunningBoundary running = bench.startIdle().running();
        List<String> echo = required(bench.target().loopbackEchoProbe(), "loopback echo probe", "port forwarding");
        ExecSession server = bench.exec(running, echo);
        int port = listeningPort(server);
        try (ByteChannel channel = running.portForward().connect(LoopbackTarget.of(port))) {
            channel.output().close();
            within(IsolationConformance.WAIT, "the echo service's end of stream", () -> readBytes(channel.input()));
        }
        finish(server, "the echo service");
        expect(Kind.FAILED, () -> bench.adopt(running.portForward().connect(LoopbackTarget.of(port))),
                "a forward to a loopback port where nothing listens");
    }

    private static int listeningPort(ExecSession server) {
        String line = readLine(server.stdout(), "the echo service's stdout");
        if (!line.startsWith("listening ")) {
            fail("the echo probe must print 'listening <port>' first, printed " + line.length() + " characters: '"
                    + line.substring(0, Math.min(line.length(), 40)) + "'");
        }
        return Integer.parseInt(line.substring("listening ".length()).trim());
    }

    private static byte[] readBytes(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        in.transferTo(out);
        return out.toByteArray();
    }
}
