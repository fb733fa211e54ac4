package openshell.supervisor;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * Hands the supervisor's audit lines (one JSON object per decision, and its events such as a
 * degraded confinement) to the gateway's sandbox log too, so {@code openshell sandbox logs} shows
 * why something was refused without a look into the driver's files. Each goes as
 * {@link #PREFIX} + the line; the gateway reads a line with that prefix as the supervisor's, and
 * {@link AgentLog} escapes an agent line that begins with it, so a workload cannot forge one.
 *
 * <p>{@link #record} is on the decision path and only queues; a thread of its own sends a batch
 * every {@link #FLUSH_INTERVAL} once a sink is attached (lines before that, made while the
 * session opens, wait in the queue). The gateway keeps {@code SandboxLogs.MAX_LINES} lines of a
 * sandbox, and a workload hammering a denied host must not push everything else out of it: at
 * most {@link #MAX_LINES_PER_SECOND} go a second, denials first; what is held back is counted and
 * said in one line (the supervisor's own audit output keeps every line).
 */
final class AuditForward implements AuditSink, AutoCloseable {
    /** What a forwarded audit line starts with in the sandbox's log (the gateway reads it so). */
    static final String PREFIX = "[decision] ";
    /** Lines queued while the batch is not yet sent; beyond it a line is counted as held back. */
    static final int MAX_QUEUED = 1000;
    /** Lines forwarded a second; more are counted as held back, denials go first. */
    static final int MAX_LINES_PER_SECOND = 50;
    /** How often a batch goes out. */
    static final Duration FLUSH_INTERVAL = Duration.ofMillis(200);
    private static final long SECOND_NANOS = 1_000_000_000L;

    private final ArrayBlockingQueue<String> queue = new ArrayBlockingQueue<>(MAX_QUEUED);
    private final AtomicLong heldBack = new AtomicLong();
    private final java.util.Optional<Thread> flusher;
    private final java.util.function.LongSupplier nanos;
    private volatile Consumer<List<String>> sink;
    private volatile boolean closed;
    // The flusher's rate window (guarded by this).
    private long windowStart;
    private int sentInWindow;

    AuditForward() {
        this(System::nanoTime, true);
    }

    /**
     * @param nanos    the clock of the rate window
     * @param flushing whether a thread flushes every {@link #FLUSH_INTERVAL} (tests flush themselves)
     */
    AuditForward(java.util.function.LongSupplier nanos, boolean flushing) {
        this.nanos = nanos;
        this.windowStart = nanos.getAsLong();
        this.flusher = flushing ? java.util.Optional.of(Thread.ofVirtual().name("audit-forward").start(this::run))
                : java.util.Optional.empty();
    }

    @Override
    public void record(String line) {
        if (!closed && !queue.offer(line)) {
            heldBack.incrementAndGet();
        }
    }

    /** @param to where batches go from now on: the gateway session's log */
    void attach(Consumer<List<String>> to) {
        sink = to;
    }

    private void run() {
        while (!closed) {
            try {
                Thread.sleep(FLUSH_INTERVAL);
            } catch (InterruptedException e) {
                return;
            }
            flush(false);
        }
    }

    /**
     * Sends what is queued, within this second's budget; a line says what was held back since the
     * last such line (within the budget too, except for the last flush).
     */
    synchronized void flush(boolean last) {
        Consumer<List<String>> to = sink;
        if (to == null) {
            return;
        }
        List<String> queued = new ArrayList<>();
        queue.drainTo(queued);
        long now = nanos.getAsLong();
        if (now - windowStart >= SECOND_NANOS) {
            windowStart = now;
            sentInWindow = 0;
        }
        List<String> batch = select(queued, Math.max(0, MAX_LINES_PER_SECOND - sentInWindow));
        sentInWindow += batch.size();
        long held = heldBack.addAndGet(queued.size() - batch.size());
        List<String> out = new ArrayList<>(batch.size() + 1);
        if (held > 0 && (last || sentInWindow < MAX_LINES_PER_SECOND)) {
            heldBack.addAndGet(-held);
            out.add("[openshell] " + held + " decisions were not forwarded to the gateway (more than "
                    + MAX_LINES_PER_SECOND + " a second, or " + MAX_QUEUED + " waiting); the supervisor's own audit"
                    + " output has every one");
            sentInWindow++;
        }
        batch.forEach(l -> out.add(PREFIX + l));
        if (!out.isEmpty()) {
            try {
                to.accept(List.copyOf(out));
            } catch (RuntimeException e) {
                // The session reconnects on its own; a lost batch must not end the forwarding.
            }
        }
    }

    /**
     * @param lines  the queued lines, in order
     * @param budget how many may go
     * @return at most {@code budget} of them, denials before the rest, each group in order
     */
    static List<String> select(List<String> lines, int budget) {
        if (lines.size() <= budget) {
            return lines;
        }
        boolean[] take = new boolean[lines.size()];
        int taken = 0;
        for (int i = 0; i < lines.size() && taken < budget; i++) {
            if (denial(lines.get(i))) {
                take[i] = true;
                taken++;
            }
        }
        for (int i = 0; i < lines.size() && taken < budget; i++) {
            if (!take[i]) {
                take[i] = true;
                taken++;
            }
        }
        List<String> out = new ArrayList<>(taken);
        for (int i = 0; i < lines.size(); i++) {
            if (take[i]) {
                out.add(lines.get(i));
            }
        }
        return out;
    }

    /** Quotes inside a JSON string are escaped, so the field's text cannot appear inside a value. */
    static boolean denial(String line) {
        return line.contains("\"decision\":\"deny\"");
    }

    /** Sends what is still queued (within the budget) and stops. */
    @Override
    public void close() {
        closed = true;
        flusher.ifPresent(Thread::interrupt);
        flush(true);
    }
}
