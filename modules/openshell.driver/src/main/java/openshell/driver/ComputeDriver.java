package openshell.driver;

import openshell.isolation.SandboxId;

/**
 * Provisions and cleans up one kind of topology. Every method may be called again after a
 * gateway restart with only what the gateway persisted ({@link Provisioned#state()}), so a driver
 * keeps nothing essential in memory.
 */
public interface ComputeDriver extends AutoCloseable {
    /** @return the driver's name, e.g. {@code process} */
    String name();

    /**
     * Provisions the topology for a new sandbox and launches it: the execution environment with its
     * fence, the channel, the sandbox runtime and the supervisor.
     *
     * @param plan the launch
     * @return what to persist
     * @throws DriverException UNAVAILABLE if the host lacks a feature (named in the message);
     *                         INVALID for bad options; FAILED otherwise (nothing left behind)
     */
    Provisioned create(LaunchPlan plan);

    /**
     * Launches a stopped sandbox again with a new generation.
     *
     * @param id    the sandbox
     * @param state what {@link #create} or an earlier start returned
     * @param plan  the new launch
     * @return what to persist now
     */
    Provisioned start(SandboxId id, byte[] state, LaunchPlan plan);

    /**
     * Stops every process of the sandbox, keeping what start needs (workspace, state).
     *
     * @param id    the sandbox
     * @param state the persisted state
     */
    void stop(SandboxId id, byte[] state);

    /**
     * The trusted cleanup path: kills everything of the sandbox and removes its resources, whether
     * or not the supervisor is alive. Idempotent: deleting a gone sandbox succeeds.
     *
     * @param id    the sandbox
     * @param state the persisted state
     */
    void delete(SandboxId id, byte[] state);

    /**
     * @param id    the sandbox
     * @param state the persisted state
     * @return what the driver observes now
     */
    DriverStatus status(SandboxId id, byte[] state);

    /**
     * Releases what the driver holds between calls, such as warm spares started ahead of the
     * sandboxes that will take them. Provisioned sandboxes are not touched: they outlive the
     * gateway. The gateway closes each driver it made when it stops.
     */
    @Override
    default void close() {
    }
}
