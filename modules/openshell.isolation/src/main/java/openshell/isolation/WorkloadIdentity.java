package openshell.isolation;

import java.util.List;

/**
 * The unprivileged user the workload runs as. Root is refused here, at the type, so no backend
 * can be handed a root workload by mistake.
 *
 * @param uid    user id, positive
 * @param gid    primary group id, positive
 * @param groups supplementary groups (copied), each positive, at most {@link #MAX_GROUPS}
 */
public record WorkloadIdentity(int uid, int gid, List<Integer> groups) {
    /** Most supplementary groups accepted. */
    public static final int MAX_GROUPS = 64;

    /** Validates the ids. */
    public WorkloadIdentity {
        positive(uid, "uid");
        positive(gid, "gid");
        BackendException.require(groups, "groups");
        if (groups.size() > MAX_GROUPS) {
            throw BackendException.invalid("at most " + MAX_GROUPS + " supplementary groups, got " + groups.size());
        }
        for (Integer g : groups) {
            positive(BackendException.require(g, "group"), "supplementary group");
        }
        groups = List.copyOf(groups);
    }

    /**
     * @param uid user id
     * @param gid group id
     * @return an identity without supplementary groups
     */
    public static WorkloadIdentity of(int uid, int gid) {
        return new WorkloadIdentity(uid, gid, List.of());
    }

    private static void positive(int id, String what) {
        if (id <= 0) {
            throw BackendException.invalid("workload " + what + " must be positive (never root): " + id);
        }
    }
}
