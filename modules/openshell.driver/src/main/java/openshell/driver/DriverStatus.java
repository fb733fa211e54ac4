package openshell.driver;

import java.util.Objects;

/**
 * What a driver observes of a sandbox's resources, independent of what the gateway last recorded.
 *
 * @param phase  the observed phase
 * @param detail a short human explanation
 */
public record DriverStatus(Phase phase, String detail) {
    /** The observed phase. */
    public enum Phase {
        /** The runtime (and supervisor) processes or containers run. */
        RUNNING,
        /** Resources exist but nothing runs; start can resume them. */
        STOPPED,
        /** Something runs or exists only in part; delete cleans it up. */
        DEGRADED,
        /** Nothing of the sandbox is left. */
        GONE
    }

    /** Rejects null. */
    public DriverStatus {
        Objects.requireNonNull(phase, "phase");
        Objects.requireNonNull(detail, "detail");
    }
}
