package openshell.policy;

import java.util.Objects;
import java.util.Optional;
import openshell.isolation.WorkloadIdentity;

/**
 * The static process section: which unprivileged user and group the launcher drops to. Either may
 * be absent, in which case the launcher uses its own configured default (never root).
 */
public final class ProcessPolicy {
    private static final ProcessPolicy NONE = new ProcessPolicy(null, null);

    private final AccountRef user;
    private final AccountRef group;

    private ProcessPolicy(AccountRef user, AccountRef group) {
        this.user = user;
        this.group = group;
    }

    /** @return a section with neither user nor group */
    public static ProcessPolicy none() {
        return NONE;
    }

    /**
     * @param user  the user
     * @param group the group
     * @return a section naming both
     */
    public static ProcessPolicy of(AccountRef user, AccountRef group) {
        return new ProcessPolicy(Objects.requireNonNull(user, "user"), Objects.requireNonNull(group, "group"));
    }

    static ProcessPolicy ofNullable(AccountRef user, AccountRef group) {
        return user == null && group == null ? NONE : new ProcessPolicy(user, group);
    }

    /** @return the user to run as, if the policy names one */
    public Optional<AccountRef> runAsUser() {
        return Optional.ofNullable(user);
    }

    /** @return the group to run as, if the policy names one */
    public Optional<AccountRef> runAsGroup() {
        return Optional.ofNullable(group);
    }

    /**
     * @return the workload identity, when both user and group are numeric ids (names need the
     *         image's account database, which only the launcher can read)
     */
    public Optional<WorkloadIdentity> workloadIdentity() {
        if (user instanceof AccountRef.Id(int uid) && group instanceof AccountRef.Id(int gid)) {
            return Optional.of(WorkloadIdentity.of(uid, gid));
        }
        return Optional.empty();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof ProcessPolicy p && Objects.equals(p.user, user) && Objects.equals(p.group, group);
    }

    @Override
    public int hashCode() {
        return Objects.hash(user, group);
    }

    @Override
    public String toString() {
        return "ProcessPolicy[user=" + user + ", group=" + group + "]";
    }
}
