package openshell.isolation;

/**
 * A boundary whose agent has started. Any exit of the agent ends it: every remaining workload
 * process is terminated and further operations are refused with TERMINATED, except waiting on
 * processes, which keeps returning their recorded status.
 */
public interface RunningBoundary {
    /** @return the agent process */
    BoundaryProcess agent();

    /** @return starts further processes inside the boundary */
    BoundaryExec exec();

    /** @return opens connections to loopback services inside the boundary */
    BoundaryPortForward portForward();

    /** @return whether the boundary still runs */
    boolean running();

    /**
     * Terminates every process of the boundary and releases it. Idempotent.
     */
    void terminate();
}
