package openshell.gateway.store;

/** Which side of the Sandbox Protocol opens the connection; recorded so old sandboxes stay readable. */
public enum DialDirection {
    /** The sandbox runtime dials the supervisor (new launches). */
    RUNTIME_INITIATED,
    /** The supervisor dials the sandbox runtime. */
    SUPERVISOR_INITIATED
}
