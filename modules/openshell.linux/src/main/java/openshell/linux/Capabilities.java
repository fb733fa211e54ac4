package openshell.linux;

import com.sun.jna.Memory;

/**
 * Capability sets of the calling thread ({@code capget}/{@code capset}, per-thread), the bounding
 * set ({@code PR_CAPBSET_*}) and the ambient set. {@link #clearAll()} empties all five and
 * {@link #requireNone()} proves it, failing if anything remains.
 */
public final class Capabilities {
    static final int VERSION_3 = 0x20080522;
    static final int PR_CAPBSET_READ = 23;
    static final int PR_CAPBSET_DROP = 24;
    static final int PR_CAP_AMBIENT = 47;
    static final int PR_CAP_AMBIENT_IS_SET = 1;
    static final int PR_CAP_AMBIENT_CLEAR_ALL = 4;
    /** {@code CAP_SETPCAP}: needed to drop from the bounding set. */
    public static final int CAP_SETPCAP = 8;
    /** {@code CAP_NET_ADMIN}. */
    public static final int CAP_NET_ADMIN = 12;
    /** {@code CAP_SYS_ADMIN}. */
    public static final int CAP_SYS_ADMIN = 21;

    private Capabilities() {
    }

    /**
     * The three per-thread sets.
     *
     * @param effective   in force now
     * @param permitted   may be made effective
     * @param inheritable preserved across execve for files that allow it
     */
    public record Sets(long effective, long permitted, long inheritable) {
        /** @return whether all three are empty */
        public boolean empty() {
            return effective == 0 && permitted == 0 && inheritable == 0;
        }
    }

    /**
     * The highest capability number this kernel knows, found by asking the kernel
     * ({@code PR_CAPBSET_READ} is EINVAL past it). Not read from {@code cap_last_cap}: a short read
     * of that file once made "40" look like "4" and left capabilities 5..40 in place.
     *
     * @return the number
     */
    public static int lastCapability() {
        for (int cap = 0; cap < 64; cap++) {
            if (LibC.syscall(LibC.SYS_PRCTL, PR_CAPBSET_READ, cap, 0, 0, 0, 0) < 0) {
                int errno = LibC.errno();
                if (errno == Errno.EINVAL && cap > 0) {
                    return cap - 1;
                }
                throw LinuxException.of("prctl(PR_CAPBSET_READ, " + cap + ")", errno);
            }
        }
        return 63;
    }

    /** @return the calling thread's sets */
    public static Sets current() {
        try (Memory header = new Memory(8); Memory data = new Memory(24)) {
            header.setInt(0, VERSION_3);
            header.setInt(4, 0);
            data.clear();
            LibC.check(LibC.syscall(LibC.SYS_CAPGET, LibC.address(header), LibC.address(data), 0, 0, 0, 0), "capget");
            return new Sets(combine(data, 0), combine(data, 4), combine(data, 8));
        }
    }

    private static long combine(Memory data, int offset) {
        return (data.getInt(offset) & 0xffffffffL) | ((long) data.getInt(offset + 12) << 32);
    }

    /**
     * Sets the calling thread's sets.
     *
     * @param sets the new sets (a subset of what is permitted, unless CAP_SETPCAP rules allow)
     */
    public static void set(Sets sets) {
        try (Memory header = new Memory(8); Memory data = new Memory(24)) {
            header.setInt(0, VERSION_3);
            header.setInt(4, 0);
            data.setInt(0, (int) sets.effective());
            data.setInt(4, (int) sets.permitted());
            data.setInt(8, (int) sets.inheritable());
            data.setInt(12, (int) (sets.effective() >>> 32));
            data.setInt(16, (int) (sets.permitted() >>> 32));
            data.setInt(20, (int) (sets.inheritable() >>> 32));
            LibC.check(LibC.syscall(LibC.SYS_CAPSET, LibC.address(header), LibC.address(data), 0, 0, 0, 0), "capset");
        }
    }

    /** @return the bounding set as a mask */
    public static long boundingSet() {
        long mask = 0;
        int last = lastCapability();
        for (int cap = 0; cap <= last; cap++) {
            if (ProcessControl.prctl(PR_CAPBSET_READ, cap, 0, 0, 0, "prctl(PR_CAPBSET_READ)") == 1) {
                mask |= 1L << cap;
            }
        }
        return mask;
    }

    /** Drops every capability from the bounding set (needs CAP_SETPCAP). */
    public static void dropBoundingSet() {
        int last = lastCapability();
        for (int cap = 0; cap <= last; cap++) {
            ProcessControl.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0, "prctl(PR_CAPBSET_DROP, " + cap + ")");
        }
    }

    /** @return the ambient set as a mask */
    public static long ambientSet() {
        long mask = 0;
        int last = lastCapability();
        for (int cap = 0; cap <= last; cap++) {
            if (ProcessControl.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0, "prctl(PR_CAP_AMBIENT_IS_SET)") == 1) {
                mask |= 1L << cap;
            }
        }
        return mask;
    }

    /** Clears the ambient set. */
    public static void clearAmbient() {
        ProcessControl.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, "prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
    }

    /** Empties the bounding, ambient, effective, permitted and inheritable sets of the calling thread. */
    public static void clearAll() {
        if (boundingSet() != 0) {
            dropBoundingSet();
        }
        clearAmbient();
        set(new Sets(0, 0, 0));
    }

    /**
     * Fails unless every set of the calling thread is empty.
     *
     * @throws LinuxException with EPERM naming what remains
     */
    public static void requireNone() {
        Sets sets = current();
        long bounding = boundingSet();
        long ambient = ambientSet();
        if (!sets.empty() || bounding != 0 || ambient != 0) {
            throw new LinuxException("capabilities check", Errno.EPERM, String.format(
                    "capabilities remain: effective %x permitted %x inheritable %x bounding %x ambient %x",
                    sets.effective(), sets.permitted(), sets.inheritable(), bounding, ambient));
        }
    }
}
