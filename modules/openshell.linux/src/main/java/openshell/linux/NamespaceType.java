package openshell.linux;

/** The namespace kinds, with their {@code CLONE_NEW*} flag and {@code /proc/<pid>/ns} name. */
public enum NamespaceType {
    /** User namespace: cannot be entered or created by a multithreaded process (EINVAL), so never by a JVM. */
    USER(0x10000000, "user"),
    /**
     * Mount namespace: {@code unshare} works per thread (it unshares the thread's fs struct too),
     * but {@code setns} needs an fs struct no other thread shares, so a JVM cannot enter one (EINVAL).
     */
    MOUNT(0x00020000, "mnt"),
    /** PID namespace: {@code setns}/{@code unshare} only affect children created afterwards. */
    PID(0x20000000, "pid"),
    /** Network namespace: per thread, works from a JVM thread. */
    NET(0x40000000, "net"),
    /** IPC namespace: per thread. */
    IPC(0x08000000, "ipc"),
    /** UTS (host name) namespace: per thread. */
    UTS(0x04000000, "uts"),
    /** Cgroup namespace: per thread. */
    CGROUP(0x02000000, "cgroup");

    private final int cloneFlag;
    private final String procName;

    NamespaceType(int cloneFlag, String procName) {
        this.cloneFlag = cloneFlag;
        this.procName = procName;
    }

    /** @return the {@code CLONE_NEW*} flag */
    public int cloneFlag() {
        return cloneFlag;
    }

    /** @return the name under {@code /proc/<pid>/ns} */
    public String procName() {
        return procName;
    }
}
