package openshell.isolation;

import java.time.Duration;
import java.util.Optional;

/**
 * A workload process, addressed through the backend, never by PID (a PID can be reused; this
 * handle cannot).
 */
public interface BoundaryProcess {
    /**
     * Waits for the process to end. Every call returns the same status.
     *
     * @return how it ended
     * @throws BackendException FAILED if the status cannot be known (channel lost)
     */
    ExitStatus awaitExit();

    /**
     * Waits at most the given time.
     *
     * @param timeout how long to wait
     * @return how it ended, or empty if it still runs
     */
    Optional<ExitStatus> awaitExit(Duration timeout);

    /**
     * Sends a signal to the process.
     *
     * @param signal the signal
     * @throws BackendException TERMINATED if the process has already ended
     */
    void signal(ProcessSignal signal);

    /** Kills the process and everything it started (the whole tree). Idempotent. */
    void terminate();
}
