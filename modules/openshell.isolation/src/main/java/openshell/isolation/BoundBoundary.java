package openshell.isolation;

/**
 * An attached boundary whose controls are being put in force. The supervisor takes the mediation
 * source first, so no connection attempt can ever go unanswered, and only then confirms.
 */
public interface BoundBoundary {
    /**
     * The mediation source of this boundary; it can be taken once.
     *
     * @return the source
     * @throws BackendException INVALID if already taken or the handle is consumed
     */
    NetworkMediationSource mediation();

    /**
     * Confirms every control is in force. Consumes this handle on success.
     *
     * @return the ready boundary with its evidence
     * @throws BackendException INVALID if the mediation source was not taken; FAILED if a control
     *                          is not in force (the handle stays usable for {@link #abort()})
     */
    ReadyBoundary confirm();

    /** Tears the boundary down without running anything. Consumes this handle. */
    void abort();
}
