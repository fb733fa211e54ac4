package openshell.driver;

import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * What a driver observes of a sandbox's resources, independent of what the gateway last recorded.
 *
 * @param phase  the observed phase
 * @param detail a short human explanation
 * @param parts  what the driver saw of each part, where it can tell them apart (empty otherwise):
 *               the gateway needs to know whether the workload still runs once its supervisor is gone
 */
public record DriverStatus(Phase phase, String detail, List<Part> parts) {
    /** The supervisor process or container. */
    public static final String SUPERVISOR = "supervisor";
    /** The sandbox runtime. */
    public static final String RUNTIME = "runtime";
    /** What holds the workload's namespaces (the process driver's holder, a pod's sandbox). */
    public static final String NAMESPACES = "namespaces";
    /** The agent and every process it started. */
    public static final String WORKLOAD = "workload";

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

    /**
     * One part as observed.
     *
     * @param name   {@link #SUPERVISOR}, {@link #RUNTIME}, {@link #NAMESPACES} or {@link #WORKLOAD}
     * @param alive  whether it runs
     * @param detail what was seen (for a part that ended: how, where the driver can tell)
     */
    public record Part(String name, boolean alive, String detail) {
        /** Rejects null. */
        public Part {
            Objects.requireNonNull(name, "name");
            Objects.requireNonNull(detail, "detail");
        }
    }

    /** Rejects null. */
    public DriverStatus {
        Objects.requireNonNull(phase, "phase");
        Objects.requireNonNull(detail, "detail");
        parts = List.copyOf(parts);
    }

    /**
     * A status without parts, for drivers that cannot tell them apart.
     *
     * @param phase  the observed phase
     * @param detail a short human explanation
     */
    public DriverStatus(Phase phase, String detail) {
        this(phase, detail, List.of());
    }

    /**
     * @param name a part's name
     * @return what was observed of it, if the driver reported it
     */
    public Optional<Part> part(String name) {
        return parts.stream().filter(p -> p.name().equals(name)).findFirst();
    }
}
