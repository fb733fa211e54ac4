package openshell.supervisor;

/**
 * A mediation source that can take its announcements over the descriptor lane
 * ({@link HandoffListener}) instead of a gRPC stream: the OpenShell runtime backend's. The
 * mediation offers the lane before it starts accepting, so the first announcement can use it.
 */
interface LaneSource {
    /**
     * Opens the lane for this source's announcements.
     *
     * @param lane    the descriptor lane's listener
     * @param metrics counts what comes on the lane
     * @throws SupervisorException when announcements already started without it
     */
    void useLane(HandoffListener lane, MediationMetrics metrics);
}
