package openshell.policy;

/** How an admitted connection is relayed. */
public enum Inspection {
    /** Bytes are relayed as they are: a {@code tcp} endpoint is never inspected at L7. */
    OPAQUE,
    /** Every HTTP request is decided by {@link PolicyGeneration#decideRequest}: a {@code rest} endpoint. */
    HTTP
}
