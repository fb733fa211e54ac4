package openshell.supervisor;

import java.util.concurrent.atomic.AtomicBoolean;

import openshell.policy.Admission;

/**
 * One admitted connection while its bytes flow: what it was admitted as (so a new generation can
 * re-check it) and how to cut it. Closing is idempotent and closes both sides.
 */
final class LiveRelay implements AutoCloseable {
    private final Admission admission;
    private final long generation;
    private final AutoCloseable workload;
    private final AutoCloseable upstream;
    private final AtomicBoolean closed = new AtomicBoolean();
    private volatile String revokedBy;

    LiveRelay(Admission admission, long generation, AutoCloseable workload, AutoCloseable upstream) {
        this.admission = admission;
        this.generation = generation;
        this.workload = workload;
        this.upstream = upstream;
    }

    Admission admission() {
        return admission;
    }

    long generation() {
        return generation;
    }

    /** Closes the relay because policy no longer allows it. */
    void revoke(String reason) {
        revokedBy = reason;
        close();
    }

    /** @return why the relay was revoked, or null */
    String revokedBy() {
        return revokedBy;
    }

    boolean closed() {
        return closed.get();
    }

    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            closeQuietly(upstream);
            closeQuietly(workload);
        }
    }

    static void closeQuietly(AutoCloseable c) {
        try {
            c.close();
        } catch (Exception e) {
            // Closing is best effort: the relay is over either way.
        }
    }
}
