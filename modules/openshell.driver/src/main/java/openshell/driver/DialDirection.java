package openshell.driver;

/**
 * Which side opens the Sandbox Protocol connection. The driver records it with the descriptor,
 * new launches are runtime-initiated, and old records stay readable.
 */
public enum DialDirection {
    /** The sandbox runtime dials the supervisor. */
    RUNTIME_INITIATED,
    /** The supervisor dials the sandbox runtime. */
    SUPERVISOR_INITIATED
}
