package openshell.linux;

import com.sun.jna.Memory;

/**
 * Installing seccomp filters on the calling thread. A filter binds the thread that installs it
 * (and what that thread later {@code execve}s or clones); other threads of the JVM are unaffected.
 * That is what lets a JVM launcher filter only the thread that will become the workload.
 */
public final class Seccomp {
    /** Kill the whole process. */
    public static final int RET_KILL_PROCESS = 0x80000000;
    /** Fail the call with the errno in the low 16 bits. */
    public static final int RET_ERRNO = 0x00050000;
    /** Hand the call to the user-space listener. */
    public static final int RET_USER_NOTIF = 0x7fc00000;
    /** Let the call run. */
    public static final int RET_ALLOW = 0x7fff0000;
    /** {@code AUDIT_ARCH_X86_64}. */
    public static final int AUDIT_ARCH_X86_64 = 0xC000003E;
    /** {@code AUDIT_ARCH_I386}: the 32-bit ABI reachable from a 64-bit process with {@code int 0x80}. */
    public static final int AUDIT_ARCH_I386 = 0x40000003;
    /** Set in the number of every x32-ABI system call. */
    public static final int X32_SYSCALL_BIT = 0x40000000;

    static final int SET_MODE_FILTER = 1;
    static final int GET_ACTION_AVAIL = 2;
    static final int GET_NOTIF_SIZES = 3;
    static final int FLAG_NEW_LISTENER = 1 << 3;
    static final int FLAG_WAIT_KILLABLE_RECV = 1 << 5;
    static final int PR_SET_NO_NEW_PRIVS = 38;

    private Seccomp() {
    }

    /**
     * {@code SECCOMP_RET_ERRNO} for an errno.
     *
     * @param errno 1..4095
     * @return the action
     */
    public static int errno(int errno) {
        if (errno <= 0 || errno > 4095) {
            throw new LinuxException("seccomp errno action", Errno.EINVAL, "errno " + errno + " outside 1..4095");
        }
        return RET_ERRNO | errno;
    }

    /**
     * The kernel's structure sizes ({@code SECCOMP_GET_NOTIF_SIZES}).
     *
     * @return the sizes
     */
    public static NotificationSizes notificationSizes() {
        try (Memory sizes = new Memory(8)) {
            sizes.clear();
            LibC.check(LibC.syscall(LibC.SYS_SECCOMP, GET_NOTIF_SIZES, 0, LibC.address(sizes), 0, 0, 0),
                    "seccomp(GET_NOTIF_SIZES)");
            return new NotificationSizes(sizes.getShort(0) & 0xffff, sizes.getShort(2) & 0xffff,
                    sizes.getShort(4) & 0xffff);
        }
    }

    /**
     * Whether the kernel knows an action ({@code SECCOMP_GET_ACTION_AVAIL}).
     *
     * @param action a {@code RET_*} value (data bits ignored)
     * @return whether it is available
     */
    public static boolean actionAvailable(int action) {
        try (Memory value = new Memory(4)) {
            value.setInt(0, action & 0xffff0000);
            long rc = LibC.syscall(LibC.SYS_SECCOMP, GET_ACTION_AVAIL, 0, LibC.address(value), 0, 0, 0);
            if (rc == 0) {
                return true;
            }
            int errno = LibC.errno();
            if (errno == Errno.EOPNOTSUPP) {
                return false;
            }
            throw LinuxException.of("seccomp(GET_ACTION_AVAIL)", errno);
        }
    }

    /**
     * Installs a filter without a listener on the calling thread. The thread needs
     * no_new_privs or CAP_SYS_ADMIN.
     *
     * @param program the filter
     */
    public static void install(BpfProgram program) {
        try (Memory prog = fprog(program)) {
            LibC.check(LibC.syscall(LibC.SYS_SECCOMP, SET_MODE_FILTER, 0, LibC.address(prog), 0, 0, 0),
                    "seccomp(SET_MODE_FILTER)");
        }
    }

    /**
     * Installs a filter with a user-notification listener on the calling thread, with
     * {@code WAIT_KILLABLE_RECV} where the kernel has it (a received notification then waits
     * only for fatal signals, so a restarted syscall is not replayed) and without it otherwise;
     * {@link SeccompListener#waitKillable()} says which.
     *
     * @param program a filter that returns {@link #RET_USER_NOTIF} for some calls
     * @return the listener; the caller owns it
     */
    public static SeccompListener installWithListener(BpfProgram program) {
        try (Memory prog = fprog(program)) {
            long rc = LibC.syscall(LibC.SYS_SECCOMP, SET_MODE_FILTER,
                    FLAG_NEW_LISTENER | FLAG_WAIT_KILLABLE_RECV, LibC.address(prog), 0, 0, 0);
            boolean killable = true;
            if (rc < 0 && LibC.errno() == Errno.EINVAL) {
                // Kernels before 5.19 reject the flag; a bad program fails again below.
                killable = false;
                rc = LibC.syscall(LibC.SYS_SECCOMP, SET_MODE_FILTER, FLAG_NEW_LISTENER, LibC.address(prog), 0, 0, 0);
            }
            int fd = (int) LibC.check(rc, "seccomp(SET_MODE_FILTER, NEW_LISTENER)");
            return new SeccompListener(OwnedFd.adopt(fd), killable);
        }
    }

    private static Memory fprog(BpfProgram program) {
        byte[] code = program.encodedView();
        Memory filter = new Memory(code.length);
        filter.write(0, code, 0, code.length);
        Memory prog = new FprogMemory(filter);
        prog.clear();
        prog.setShort(0, (short) program.length());
        prog.setPointer(8, filter);
        return prog;
    }

    /** Keeps the instruction array reachable for as long as the {@code sock_fprog} is. */
    private static final class FprogMemory extends Memory {
        private final Memory filter;

        FprogMemory(Memory filter) {
            super(16);
            this.filter = filter;
        }

        @Override
        public void close() {
            super.close();
            filter.close();
        }
    }

    /**
     * The kernel's notification structure sizes; buffers are at least this large.
     *
     * @param notification {@code struct seccomp_notif}
     * @param response     {@code struct seccomp_notif_resp}
     * @param data         {@code struct seccomp_data}
     */
    public record NotificationSizes(int notification, int response, int data) {
    }
}
