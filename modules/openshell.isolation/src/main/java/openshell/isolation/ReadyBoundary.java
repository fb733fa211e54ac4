package openshell.isolation;

/** A boundary with every control confirmed, in which nothing untrusted has run yet. */
public interface ReadyBoundary {
    /** @return what the backend proved at confirmation */
    ConfirmationEvidence evidence();

    /**
     * Starts the agent. Consumes this handle on success.
     *
     * @return the running boundary
     * @throws BackendException INVALID if consumed; FAILED if the agent could not start
     */
    RunningBoundary startAgent();

    /** Tears the boundary down without running anything. Consumes this handle. */
    void abort();
}
