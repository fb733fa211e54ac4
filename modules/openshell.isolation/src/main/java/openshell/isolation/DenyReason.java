package openshell.isolation;

/** Why a mediated request was refused; each maps to a distinct errno inside the workload. */
public enum DenyReason {
    /** Policy does not allow it (EACCES). */
    POLICY,
    /** The caller's identity could not be resolved (EACCES). */
    IDENTITY_UNRESOLVED,
    /** A bound was reached (EAGAIN); never a reason to bypass mediation. */
    EXHAUSTED,
    /** The decision-maker is not reachable (ECANCELED). */
    MEDIATION_UNAVAILABLE,
    /** No decision in time (ETIMEDOUT). */
    TIMEOUT
}
