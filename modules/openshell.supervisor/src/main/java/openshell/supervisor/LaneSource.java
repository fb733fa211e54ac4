package openshell.supervisor;

/**
 * A mediation source that can take its announcements over the descriptor lane
 * ({@link HandoffListener}) instead of a gRPC stream: the OpenShell runtime backend's. The
 * mediation offers the lane before it starts accepting, so the first announcement can use it.
 */
interface LaneSource {
    /**
     * Where connects and DNS queries that came on the lane go at once, on the lane's reader
     * thread, instead of waiting in the source's queues for an accept loop: each queue and loop
     * was one more thread hand-off on every connect's and query's way to its decision.
     * Implementations must not block, except to refuse an arrival themselves once
     * {@link SandboxMediation#MAX_REFUSING} refusals are under way: the flooding runtime's lane
     * then waits, not the supervisor's memory.
     */
    interface Arrivals {
        /** @param open a connect announced on the lane, to be decided */
        void tcp(openshell.isolation.PendingTcpOpen open);

        /** @param query a DNS query asked on the lane, to be answered */
        void dns(openshell.isolation.PendingDnsQuery query);
    }

    /**
     * Opens the lane for this source's announcements.
     *
     * @param lane     the descriptor lane's listener
     * @param metrics  counts what comes on the lane
     * @param arrivals where lane arrivals go; empty: to the source's queues, for its accept loops
     * @throws SupervisorException when announcements already started without it
     */
    void useLane(HandoffListener lane, MediationMetrics metrics, java.util.Optional<Arrivals> arrivals);
}
