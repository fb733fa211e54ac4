package openshell.supervisor;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import openshell.protocol.CreditedStream;
import openshell.protocol.wire.ProcessInput;
import openshell.protocol.wire.ProcessOutput;
import openshell.protocol.wire.ResumeOutput;

/**
 * Follows the agent's output, which the runtime keeps in a bounded journal, and hands it on as
 * lines (to the gateway's sandbox log, {@code openshell sandbox logs}). It counts the bytes it
 * got of each stream, so when its attach stream fails while the link lives it attaches again
 * from exactly there: nothing is repeated, and what the runtime no longer kept is said in a
 * line of its own instead of silently missing.
 */
final class AgentLog implements AutoCloseable {
    /** Longest line handed on; a longer one is cut into lines of this many characters. */
    static final int MAX_LINE_BYTES = 4096;
    /** Wait before attaching again after the attach stream failed. */
    static final Duration REATTACH_WAIT = Duration.ofSeconds(1);
    /** Prefix of a line of the agent's stderr. */
    static final String STDERR = "[stderr] ";
    /** Prefix of a line of the agent's stdout that begins like a line of the supervisor's own. */
    static final String STDOUT = "[stdout] ";
    /**
     * How the sandbox's log marks lines that are not the agent's stdout: one of the agent's that
     * begins so gets {@link #STDOUT} in front, so a reader (and the gateway's filters) can tell
     * the supervisor's decisions and notices from the workload's imitations of them.
     */
    static final java.util.List<String> RESERVED = java.util.List.of(AuditForward.PREFIX, "[openshell] ", STDERR, STDOUT);
    /**
     * Most lines handed on per second; more are counted and said in one line when the next
     * second begins. The gateway keeps the last 1,000 lines of a sandbox's log, and its session
     * also carries policy and token traffic: a chatty agent must not crowd those out.
     */
    static final int MAX_LINES_PER_SECOND = 100;
    private static final long SECOND_NANOS = 1_000_000_000L;

    private final RemoteCalls calls;
    private final String processId;
    private final Consumer<List<String>> sink;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Line stdout = new Line("");
    private final Line stderr = new Line(STDERR);
    private final CompletableFuture<Void> ended = new CompletableFuture<>();
    private volatile CreditedStream<ProcessOutput, ProcessInput> current;
    // The follower thread's rate window.
    private long windowStart = System.nanoTime();
    private int handedInWindow;
    private long withheld;

    private AgentLog(RemoteCalls calls, String processId, Consumer<List<String>> sink) {
        this.calls = calls;
        this.processId = processId;
        this.sink = sink;
    }

    /**
     * Starts following.
     *
     * @param calls     the link's calls
     * @param processId the agent's process id
     * @param sink      receives each batch of lines (one received chunk's worth), in order
     * @return the follower; {@link #ended()} completes after the agent's exit line
     */
    static AgentLog follow(RemoteCalls calls, String processId, Consumer<List<String>> sink) {
        AgentLog log = new AgentLog(calls, processId, sink);
        Thread.ofVirtual().name("agent-log").start(log::run);
        return log;
    }

    /** @return completes when the agent's output ended (its exit was seen) or the follower stopped */
    CompletableFuture<Void> ended() {
        return ended;
    }

    private void run() {
        try {
            while (!closed.get() && calls.link().isOpen()) {
                Outcome outcome = attachOnce();
                if (outcome == Outcome.EXITED) {
                    return;
                }
                try {
                    Thread.sleep(REATTACH_WAIT);
                } catch (InterruptedException e) {
                    return;
                }
            }
        } finally {
            ended.complete(null);
        }
    }

    private enum Outcome { EXITED, FAILED }

    private Outcome attachOnce() {
        LinkedBlockingQueue<Object> events = new LinkedBlockingQueue<>();
        CreditedStream<ProcessOutput, ProcessInput> stream = CreditedStream.create(CreditedStream.Kind.SUPERVISOR_PROCESS,
                new StreamObserver<>() {
                    @Override
                    public void onNext(ProcessOutput value) {
                        events.add(value);
                    }

                    @Override
                    public void onError(Throwable t) {
                        events.add(t);
                    }

                    @Override
                    public void onCompleted() {
                        events.add(Boolean.TRUE);
                    }
                }, Thread.ofVirtual().name("agent-log-output").factory());
        current = stream;
        try {
            stream.connect(calls.async().attachProcess(stream.inbound()));
            stream.send(ProcessInput.newBuilder().setResume(ResumeOutput.newBuilder().setProcessId(processId)
                    .setStdoutOffset(stdout.offset).setStderrOffset(stderr.offset)).build());
        } catch (RuntimeException e) {
            // ProtocolException included: the link is failing; the loop looks again
            return Outcome.FAILED;
        }
        while (!closed.get()) {
            Object event;
            try {
                event = events.poll(REATTACH_WAIT.toMillis(), TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                return Outcome.FAILED;
            }
            if (event == null) {
                if (!calls.link().isOpen()) {
                    return Outcome.FAILED;
                }
                continue;
            }
            if (!(event instanceof ProcessOutput output)) {
                return Outcome.FAILED;
            }
            List<String> lines = new ArrayList<>();
            switch (output.getKindCase()) {
            case STDOUT -> stdout.add(output.getStdout().toByteArray(), lines);
            case STDERR -> stderr.add(output.getStderr().toByteArray(), lines);
            case LOST -> (output.getLost().getStderr() ? stderr : stdout).lost(output.getLost().getBytes(), lines);
            case EXIT -> {
                stdout.flush(lines);
                stderr.flush(lines);
                hand(lines);
                List<String> last = new ArrayList<>();
                withheldNotice(last);
                last.add("[openshell] the agent ended: " + OpenShellRuntimeBackend.RemoteProcess.status(output.getExit()));
                sink.accept(List.copyOf(last));
                return Outcome.EXITED;
            }
            default -> {
                // grants are the stream's own
            }
            }
            hand(lines);
        }
        return Outcome.FAILED;
    }

    private void hand(List<String> lines) {
        long now = System.nanoTime();
        List<String> out = new ArrayList<>();
        if (now - windowStart >= SECOND_NANOS) {
            windowStart = now;
            handedInWindow = 0;
            withheldNotice(out);
        }
        int room = Math.max(0, MAX_LINES_PER_SECOND - handedInWindow);
        int taken = Math.min(room, lines.size());
        out.addAll(lines.subList(0, taken));
        handedInWindow += taken;
        withheld += lines.size() - taken;
        if (!out.isEmpty()) {
            sink.accept(List.copyOf(out));
        }
    }

    private void withheldNotice(List<String> out) {
        if (withheld > 0) {
            out.add("[openshell] " + withheld + " lines of the agent's output were not forwarded (more than "
                    + MAX_LINES_PER_SECOND + " a second)");
            withheld = 0;
        }
    }

    /** Stops following; the agent's output stays in the runtime's journal. */
    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            CreditedStream<ProcessOutput, ProcessInput> stream = current;
            if (stream != null && !stream.isEnded()) {
                stream.fail(Status.CANCELLED.withDescription("the agent log stopped"));
            }
        }
    }

    /** One stream's byte count and its unfinished line. */
    private static final class Line {
        private final String prefix;
        private final ByteArrayOutputStream partial = new ByteArrayOutputStream();
        private long offset;

        Line(String prefix) {
            this.prefix = prefix;
        }

        void add(byte[] bytes, List<String> lines) {
            offset += bytes.length;
            for (byte b : bytes) {
                if (b == '\n') {
                    flush(lines);
                } else {
                    partial.write(b);
                    if (partial.size() == MAX_LINE_BYTES) {
                        flush(lines);
                    }
                }
            }
        }

        void lost(long bytes, List<String> lines) {
            offset += bytes;
            flush(lines);
            lines.add("[openshell] " + bytes + " bytes of the agent's " + (prefix.isEmpty() ? "stdout" : "stderr")
                    + " were no longer kept by the runtime");
        }

        void flush(List<String> lines) {
            if (partial.size() > 0) {
                lines.add(line(prefix, partial.toString(StandardCharsets.UTF_8)));
                partial.reset();
            }
        }
    }

    /** @return the log line of one line of the agent's (stdout when {@code prefix} is empty) */
    static String line(String prefix, String text) {
        if (prefix.isEmpty() && RESERVED.stream().anyMatch(text::startsWith)) {
            return STDOUT + text;
        }
        return prefix + text;
    }
}
