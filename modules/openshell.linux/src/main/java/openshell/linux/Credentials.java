package openshell.linux;

/**
 * User, group and supplementary groups. These go through glibc, which applies each change to
 * every thread of the process, so a JVM never ends up with threads of mixed identity.
 */
public final class Credentials {
    /** Most supplementary groups accepted (the kernel's {@code NGROUPS_MAX}). */
    public static final int MAX_GROUPS = 65536;

    private Credentials() {
    }

    /**
     * Sets the supplementary groups (needs CAP_SETGID).
     *
     * @param groups the groups, possibly none
     */
    public static void setGroups(int... groups) {
        if (groups.length > MAX_GROUPS) {
            throw new LinuxException("setgroups", Errno.EINVAL, groups.length + " groups (at most " + MAX_GROUPS + ")");
        }
        LibC.check(LibC.setgroups(groups.length, groups), "setgroups");
    }

    /** @return the supplementary groups */
    public static int[] groups() {
        int n = LibC.check(LibC.getgroups(0, null), "getgroups");
        int[] groups = new int[n];
        int got = LibC.check(LibC.getgroups(n, groups), "getgroups");
        return java.util.Arrays.copyOf(groups, got);
    }

    /**
     * Sets real, effective and saved group id to one value.
     *
     * @param gid the group id
     */
    public static void setGid(int gid) {
        LibC.check(LibC.setresgid(gid, gid, gid), "setresgid(" + gid + ")");
    }

    /**
     * Sets real, effective and saved user id to one value. From root to non-root this empties the
     * permitted and effective capability sets.
     *
     * @param uid the user id
     */
    public static void setUid(int uid) {
        LibC.check(LibC.setresuid(uid, uid, uid), "setresuid(" + uid + ")");
    }
}
