package openshell.linux;

import com.sun.jna.Memory;
import java.nio.file.Path;

/**
 * Reading (and where the kernel allows, writing) another task's memory, for example the sockaddr a
 * blocked {@code connect()} points at. Two mechanisms: {@code process_vm_readv} (one syscall) and
 * {@code pread}/{@code pwrite} on {@code /proc/<tid>/mem} (works under Docker's default seccomp
 * profile, where {@code process_vm_readv} is EPERM). {@link #probe()} picks by trying, not by
 * guessing. One instance per thread: it owns a preallocated buffer of {@link #MAX_TRANSFER} bytes.
 */
public final class TaskMemory {
    /** Largest single read or write: a page, more than any sockaddr or path a handler needs. */
    public static final int MAX_TRANSFER = 4096;

    /** How the bytes are moved. */
    public enum Mechanism {
        /** {@code process_vm_readv}/{@code process_vm_writev}. */
        PROCESS_VM,
        /** {@code pread}/{@code pwrite} on {@code /proc/<tid>/mem}. */
        PROC_MEM
    }

    static final int O_RDONLY = 0;
    static final int O_RDWR = 2;
    static final int O_CLOEXEC = 0x80000;

    private final Mechanism mechanism;
    private final Memory buffer = new Memory(MAX_TRANSFER);
    private final long bufferAddress = LibC.address(buffer);
    private final Memory iov = new Memory(32);
    private final long iovAddress = LibC.address(iov);
    private final java.nio.ByteBuffer iovView = iov.getByteBuffer(0, 32).order(java.nio.ByteOrder.nativeOrder());

    private TaskMemory(Mechanism mechanism) {
        this.mechanism = mechanism;
    }

    /**
     * Picks the mechanism that works here: {@code process_vm_readv} on this process itself, and
     * {@code /proc/self/mem} if that is refused.
     *
     * @return a reader
     * @throws LinuxException if neither works
     */
    public static TaskMemory probe() {
        TaskMemory vm = new TaskMemory(Mechanism.PROCESS_VM);
        if (vm.works()) {
            return vm;
        }
        TaskMemory proc = new TaskMemory(Mechanism.PROC_MEM);
        if (proc.works()) {
            return proc;
        }
        throw new LinuxException("task memory probe", Errno.EPERM,
                "neither process_vm_readv nor /proc/<pid>/mem can read this process");
    }

    /**
     * A reader with a chosen mechanism (to test both).
     *
     * @param mechanism the mechanism
     * @return the reader
     */
    public static TaskMemory using(Mechanism mechanism) {
        return new TaskMemory(mechanism);
    }

    private boolean works() {
        try (Memory probe = new Memory(8)) {
            probe.setLong(0, 0x0123456789abcdefL);
            byte[] out = new byte[8];
            read(LibC.getpid(), LibC.address(probe), out, 8);
            return probe.getLong(0) == java.nio.ByteBuffer.wrap(out).order(java.nio.ByteOrder.nativeOrder()).getLong();
        } catch (LinuxException e) {
            return false;
        }
    }

    /** @return the mechanism in use */
    public Mechanism mechanism() {
        return mechanism;
    }

    /**
     * Reads bytes from a task.
     *
     * @param tid         the thread (or process) id
     * @param address     the address in its memory
     * @param destination where to copy
     * @param length      1..{@link #MAX_TRANSFER} and at most {@code destination.length}
     * @return bytes read (fewer than asked if the range crosses into unmapped memory)
     */
    public int read(int tid, long address, byte[] destination, int length) {
        checkLength(length, destination.length);
        long n;
        if (mechanism == Mechanism.PROCESS_VM) {
            iovView.putLong(0, bufferAddress).putLong(8, length).putLong(16, address).putLong(24, length);
            n = LibC.check(LibC.syscall(LibC.SYS_PROCESS_VM_READV, tid, iovAddress, 1, iovAddress + 16, 1, 0),
                    "process_vm_readv");
        } else {
            int fd = LibC.check(LibC.open(memPath(tid), O_RDONLY | O_CLOEXEC, 0), "open(/proc/<tid>/mem)");
            try {
                n = LibC.check(LibC.pread(fd, bufferAddress, length, address), "pread(/proc/<tid>/mem)");
            } finally {
                LibC.close(fd);
            }
        }
        buffer.read(0, destination, 0, (int) n);
        return (int) n;
    }

    /**
     * Writes bytes into a task. Uses {@code /proc/<tid>/mem} for both mechanisms: it needs the same
     * ptrace access as reading and is not refused by Docker's default profile.
     *
     * @param tid     the thread (or process) id
     * @param address the address in its memory
     * @param source  the bytes
     * @param length  1..{@link #MAX_TRANSFER}
     * @return bytes written
     */
    public int write(int tid, long address, byte[] source, int length) {
        checkLength(length, source.length);
        buffer.write(0, source, 0, length);
        int fd = LibC.check(LibC.open(memPath(tid), O_RDWR | O_CLOEXEC, 0), "open(/proc/<tid>/mem)");
        try {
            return (int) LibC.check(LibC.pwrite(fd, bufferAddress, length, address), "pwrite(/proc/<tid>/mem)");
        } finally {
            LibC.close(fd);
        }
    }

    /**
     * Writes bytes into a task blocked in a notified call as seccomp_unotify(2) prescribes: its
     * {@code /proc/<tid>/mem} is opened first, then the notification is checked, and only then
     * written. A tid reused after the caller died (by any task, the runtime's own threads included)
     * is never written to.
     *
     * @param tid     the blocked thread
     * @param address the address in its memory
     * @param source  the bytes
     * @param length  1..{@link #MAX_TRANSFER}
     * @param valid   whether the notification is still pending (SECCOMP_IOCTL_NOTIF_ID_VALID)
     * @return bytes written, or -1 if the notification was no longer valid once the file was open
     */
    public int writeIfValid(int tid, long address, byte[] source, int length, java.util.function.BooleanSupplier valid) {
        checkLength(length, source.length);
        buffer.write(0, source, 0, length);
        int fd = LibC.check(LibC.open(memPath(tid), O_RDWR | O_CLOEXEC, 0), "open(/proc/<tid>/mem)");
        try {
            if (!valid.getAsBoolean()) {
                return -1;
            }
            return (int) LibC.check(LibC.pwrite(fd, bufferAddress, length, address), "pwrite(/proc/<tid>/mem)");
        } finally {
            LibC.close(fd);
        }
    }

    private static void checkLength(int length, int available) {
        if (length <= 0 || length > MAX_TRANSFER || length > available) {
            throw new LinuxException("task memory", Errno.EINVAL,
                    "length " + length + " outside 1.." + Math.min(MAX_TRANSFER, available));
        }
    }

    private static String memPath(int tid) {
        return Path.of("/proc", Integer.toString(tid), "mem").toString();
    }
}
