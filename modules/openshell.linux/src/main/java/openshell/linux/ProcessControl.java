package openshell.linux;

/**
 * {@code prctl} switches. Most are per-thread: no_new_privs set here binds the calling thread and
 * what it {@code execve}s, not the JVM's other threads; the parent-death signal fires when the
 * <em>thread</em> that created the child exits. Subreaper and dumpable are per-process.
 */
public final class ProcessControl {
    static final int PR_SET_PDEATHSIG = 1;
    static final int PR_GET_PDEATHSIG = 2;
    static final int PR_GET_DUMPABLE = 3;
    static final int PR_SET_DUMPABLE = 4;
    static final int PR_SET_KEEPCAPS = 8;
    static final int PR_SET_CHILD_SUBREAPER = 36;
    static final int PR_GET_CHILD_SUBREAPER = 37;
    static final int PR_SET_NO_NEW_PRIVS = 38;
    static final int PR_GET_NO_NEW_PRIVS = 39;
    static final int P_ALL = 0;
    static final int WNOWAIT = 0x01000000;
    /** {@code si_pid} in a 64-bit {@code siginfo_t}. */
    static final int SIGINFO_PID_OFFSET = 16;

    private ProcessControl() {
    }

    static long prctl(int option, long a2, long a3, long a4, long a5, String call) {
        return LibC.check(LibC.syscall(LibC.SYS_PRCTL, option, a2, a3, a4, a5, 0), call);
    }

    /** Sets no_new_privs on the calling thread; it cannot be unset. */
    public static void setNoNewPrivileges() {
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, "prctl(PR_SET_NO_NEW_PRIVS)");
    }

    /** @return whether the calling thread has no_new_privs */
    public static boolean noNewPrivileges() {
        return prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0, "prctl(PR_GET_NO_NEW_PRIVS)") == 1;
    }

    /**
     * Sets the dumpable flag (0 keeps {@code /proc/<pid>} files root-owned and blocks ptrace by
     * same-uid processes).
     *
     * @param dumpable the value
     */
    public static void setDumpable(boolean dumpable) {
        prctl(PR_SET_DUMPABLE, dumpable ? 1 : 0, 0, 0, 0, "prctl(PR_SET_DUMPABLE)");
    }

    /** @return the dumpable flag */
    public static boolean dumpable() {
        return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0, "prctl(PR_GET_DUMPABLE)") != 0;
    }

    /**
     * Makes this process reap orphaned descendants (so the sandbox runtime sees every exit).
     *
     * @param subreaper the value
     */
    public static void setChildSubreaper(boolean subreaper) {
        prctl(PR_SET_CHILD_SUBREAPER, subreaper ? 1 : 0, 0, 0, 0, "prctl(PR_SET_CHILD_SUBREAPER)");
    }

    /**
     * Blocks until some child of this process has ended, and leaves it unreaped
     * ({@code waitid(P_ALL, WEXITED | WNOWAIT)}): the caller decides whose it is to reap. A
     * subreaper that waits here costs nothing while its children run, where listing them would
     * cost a {@code /proc} walk per look.
     *
     * @return the pid of an ended (zombie) child, or empty when this process has no children
     */
    public static java.util.OptionalInt awaitEndedChild() {
        try (com.sun.jna.Memory info = new com.sun.jna.Memory(128)) {
            while (true) {
                info.clear();
                if (LibC.waitid(P_ALL, 0, LibC.address(info), Pidfd.WEXITED | WNOWAIT) == 0) {
                    return java.util.OptionalInt.of(info.getInt(SIGINFO_PID_OFFSET));
                }
                int errno = LibC.errno();
                if (errno == Errno.ECHILD) {
                    return java.util.OptionalInt.empty();
                }
                if (errno != Errno.EINTR) {
                    throw LinuxException.of("waitid(P_ALL, WNOWAIT)", errno);
                }
            }
        }
    }

    /** @return whether this process is a child subreaper */
    public static boolean childSubreaper() {
        try (com.sun.jna.Memory value = new com.sun.jna.Memory(4)) {
            value.setInt(0, 0);
            prctl(PR_GET_CHILD_SUBREAPER, LibC.address(value), 0, 0, 0, "prctl(PR_GET_CHILD_SUBREAPER)");
            return value.getInt(0) != 0;
        }
    }

    /**
     * Sets the signal the calling thread gets when its parent thread exits (0 clears it).
     *
     * @param signal the signal number
     */
    public static void setParentDeathSignal(int signal) {
        prctl(PR_SET_PDEATHSIG, signal, 0, 0, 0, "prctl(PR_SET_PDEATHSIG)");
    }

    /** @return the parent-death signal of the calling thread, 0 if none */
    public static int parentDeathSignal() {
        try (com.sun.jna.Memory value = new com.sun.jna.Memory(4)) {
            value.setInt(0, 0);
            prctl(PR_GET_PDEATHSIG, LibC.address(value), 0, 0, 0, "prctl(PR_GET_PDEATHSIG)");
            return value.getInt(0);
        }
    }
}
