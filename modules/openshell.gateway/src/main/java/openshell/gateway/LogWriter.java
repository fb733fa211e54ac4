package openshell.gateway;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;

import openshell.isolation.SandboxId;

/**
 * Writes the supervisors' log lines to the store on a thread of its own, so a session's inbound
 * thread never waits for the store. Why: that thread also takes the session's exec events, and
 * while it waits Helidon's connection reader stops at the stream's frame queue, so it reads no
 * WINDOW_UPDATE either; a store that waits out a row lock ({@link SandboxLogs#APPEND_ATTEMPTS}
 * times H2's lock timeout, or without end on PostgreSQL) would stall every exec of that sandbox
 * until the gateway's writes to the supervisor fail their flow-control wait. One writer keeps
 * each sandbox's lines in order. Nothing is dropped in silence: a batch past
 * {@link #MAX_PENDING_BATCHES} or {@link #MAX_PENDING_CHARS}, or still queued when
 * {@link #close()} has waited {@link #DRAIN_WAIT}, is counted as lost the way
 * {@link SandboxLogs} counts a refused one.
 */
final class LogWriter implements AutoCloseable {
    /** Batches waiting for the store; the next is counted as lost. */
    static final int MAX_PENDING_BATCHES = 1024;
    /**
     * Characters of log lines waiting for the store (each line counted up to
     * {@link SandboxLogs#MAX_LINE_CHARS}, what is kept of it); the next batch is counted as lost.
     */
    static final long MAX_PENDING_CHARS = 4L * 1024 * 1024;
    /** How long {@link #close()} lets the writer take what is queued. */
    static final Duration DRAIN_WAIT = Duration.ofSeconds(10);
    /** The writer thread's name. */
    static final String THREAD = "gateway-log-writer";

    private record Batch(SandboxId sandbox, List<String> lines, long chars) {
    }

    private static final Object STOP = new Object();

    private final SandboxLogs logs;
    private final int maxPending;
    private final long maxPendingChars;
    private final Duration drainWait;
    private final BlockingQueue<Object> pending;
    private final Thread thread;
    private boolean closed;
    private long pendingChars;

    LogWriter(SandboxLogs logs) {
        this(logs, MAX_PENDING_BATCHES, MAX_PENDING_CHARS, DRAIN_WAIT);
    }

    /** With other bounds: a test at the bound need not queue a thousand batches or wait ten seconds. */
    LogWriter(SandboxLogs logs, int maxPending, long maxPendingChars, Duration drainWait) {
        this.logs = logs;
        this.maxPending = maxPending;
        this.maxPendingChars = maxPendingChars;
        this.drainWait = drainWait;
        // One slot more for the stop marker, which close() adds behind whatever is queued.
        this.pending = new ArrayBlockingQueue<>(maxPending + 1);
        this.thread = Thread.ofPlatform().daemon().name(THREAD).start(this::run);
    }

    /**
     * Queues lines for the store; never blocks.
     *
     * @return whether they were queued (when not, they are counted as lost)
     */
    boolean offer(SandboxId sandbox, List<String> lines) {
        if (lines.isEmpty()) {
            return true;
        }
        long chars = 0;
        for (String line : lines) {
            chars += Math.min(line.length(), SandboxLogs.MAX_LINE_CHARS);
        }
        String refusal;
        synchronized (this) {
            if (closed) {
                refusal = "the gateway is stopping";
            } else if (pending.size() >= maxPending) {
                refusal = "the store is " + maxPending + " batches behind";
            } else if (pendingChars + chars > maxPendingChars) {
                refusal = "the store is behind by more than " + maxPendingChars + " characters of log lines";
            } else {
                pending.add(new Batch(sandbox, List.copyOf(lines), chars));
                pendingChars += chars;
                return true;
            }
        }
        logs.lose(sandbox, lines.size(), "not queued for the store", refusal);
        return false;
    }

    /** @return where the writer thread is now (for a test's failure message) */
    String writerState() {
        StringBuilder where = new StringBuilder(thread.getName()).append(' ').append(thread.getState());
        for (StackTraceElement frame : thread.getStackTrace()) {
            where.append("\n\tat ").append(frame);
        }
        return where.toString();
    }

    /** @return batches queued and not yet taken by the writer */
    int pendingBatches() {
        return (int) pending.stream().filter(Batch.class::isInstance).count();
    }

    private void run() {
        while (true) {
            Object next;
            try {
                next = pending.take();
            } catch (InterruptedException e) {
                return;
            }
            if (next == STOP) {
                return;
            }
            Batch batch = (Batch) next;
            synchronized (this) {
                pendingChars -= batch.chars();
            }
            logs.append(batch.sandbox(), batch.lines());
        }
    }

    /**
     * Lets the writer take what is queued, for at most {@link #DRAIN_WAIT}; what is left is counted
     * as lost. A writer still waiting for the store then is left to finish its batch and end (it
     * is not interrupted: an interrupt during H2's file I/O closes the database's file).
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            pending.add(STOP); // its slot is always free: offers stop at maxPending
        }
        try {
            thread.join(drainWait);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        // What the writer has not taken; the stop marker stays, so it ends after the batch it is on.
        for (Object next : pending) {
            if (next instanceof Batch batch && pending.remove(batch)) {
                logs.lose(batch.sandbox(), batch.lines().size(), "not written",
                        "the gateway stopped before the store took them (waited " + drainWait.toMillis() + " ms)");
            }
        }
    }
}
