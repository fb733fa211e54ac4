package openshell.protocol;

/**
 * Which side opens the socket, as the topology descriptor records it. It changes only who
 * listens: the runtime is always the TLS server and the supervisor always the caller with
 * the bearer token.
 */
public enum Initiator {
    /** The supervisor dials; the runtime listens (older descriptors). */
    SUPERVISOR,
    /** The runtime dials; the supervisor listens (new launches: no listener in the sandbox). */
    RUNTIME
}
