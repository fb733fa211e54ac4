package openshell.isolation;

/** Starts further processes inside a running boundary, behind the same controls as the agent. */
public interface BoundaryExec {
    /**
     * Starts a process.
     *
     * @param spec what to run
     * @return the session with the process and its streams
     * @throws BackendException TERMINATED if the boundary ended; FAILED if it could not start;
     *                          UNAVAILABLE if not admitted within the spec's deadline
     */
    ExecSession exec(ExecSpec spec);
}
