package openshell.gateway.store;

/** Where a sandbox is in its life, as the gateway last recorded it. */
public enum SandboxState {
    /** Admitted; the driver is provisioning it. */
    PROVISIONING,
    /** The agent runs under confirmed controls. */
    RUNNING,
    /** Stopped on request; can be started again. */
    STOPPED,
    /** Provisioning or the agent failed; kept for inspection until deleted. */
    FAILED,
    /** Deletion started; cleanup may still be running. */
    DELETING
}
