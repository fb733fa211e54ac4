package openshell.linux;

import com.sun.jna.Memory;

/**
 * A resource limit ({@code getrlimit}/{@code prlimit}); {@link #INFINITY} is {@code RLIM_INFINITY}.
 *
 * @param resource the {@code RLIMIT_*} number
 * @param soft     the soft limit
 * @param hard     the hard limit
 */
public record ResourceLimit(int resource, long soft, long hard) {
    /** {@code RLIM_INFINITY}. */
    public static final long INFINITY = -1L;
    /** {@code RLIMIT_CORE}. */
    public static final int CORE = 4;
    /** {@code RLIMIT_NPROC}. */
    public static final int NPROC = 6;
    /** {@code RLIMIT_NOFILE}. */
    public static final int NOFILE = 7;

    /** Validates the record. */
    public ResourceLimit {
        if (resource < 0 || resource > 15) {
            throw new LinuxException("rlimit", Errno.EINVAL, "resource " + resource + " outside 0..15");
        }
        if (hard != INFINITY && (soft == INFINITY || Long.compareUnsigned(soft, hard) > 0)) {
            throw new LinuxException("rlimit", Errno.EINVAL, "soft limit above hard limit");
        }
    }

    /**
     * Reads a limit of a process.
     *
     * @param pid      the process, 0 for this one
     * @param resource the {@code RLIMIT_*} number
     * @return the limit
     */
    public static ResourceLimit of(int pid, int resource) {
        try (Memory old = new Memory(16)) {
            LibC.check(LibC.prlimit(pid, resource, 0, LibC.address(old)), "prlimit(get)");
            return new ResourceLimit(resource, old.getLong(0), old.getLong(8));
        }
    }

    /**
     * Applies this limit to a process ({@code prlimit}; raising a hard limit needs CAP_SYS_RESOURCE).
     *
     * @param pid the process, 0 for this one
     */
    public void applyTo(int pid) {
        try (Memory limit = new Memory(16)) {
            limit.setLong(0, soft);
            limit.setLong(8, hard);
            LibC.check(LibC.prlimit(pid, resource, LibC.address(limit), 0), "prlimit(set)");
        }
    }
}
