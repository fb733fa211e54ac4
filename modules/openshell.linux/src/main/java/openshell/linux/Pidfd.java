package openshell.linux;

import com.sun.jna.Memory;
import java.time.Duration;
import java.util.Optional;

/**
 * A process handle that cannot be confused with a recycled PID ({@code pidfd_open}): signal it,
 * take descriptors from it, and wait for it (when it is our child) with a bounded wait.
 */
public final class Pidfd implements AutoCloseable {
    static final int P_PIDFD = 3;
    static final int WEXITED = 4;
    static final int WNOHANG = 1;
    static final int CLD_EXITED = 1;

    private final OwnedFd fd;
    private final int pid;

    private Pidfd(OwnedFd fd, int pid) {
        this.fd = fd;
        this.pid = pid;
    }

    /**
     * Opens a handle on a live process.
     *
     * @param pid the process id (a thread-group leader)
     * @return the handle
     */
    public static Pidfd open(int pid) {
        int fd = (int) LibC.check(LibC.syscall(LibC.SYS_PIDFD_OPEN, pid, 0, 0, 0, 0, 0), "pidfd_open");
        return new Pidfd(OwnedFd.adopt(fd), pid);
    }

    /** @return the process id this handle was opened for */
    public int pid() {
        return pid;
    }

    /** @return the pidfd itself */
    public OwnedFd fd() {
        return fd;
    }

    /**
     * Duplicates one of the process's descriptors into this process ({@code pidfd_getfd}; needs
     * ptrace access, and is EPERM under Docker's default seccomp profile).
     *
     * @param targetFd the descriptor number in the process
     * @return our copy (close-on-exec)
     */
    public OwnedFd takeFd(int targetFd) {
        int copy = (int) LibC.check(LibC.syscall(LibC.SYS_PIDFD_GETFD, fd.value(), targetFd, 0, 0, 0, 0),
                "pidfd_getfd");
        return OwnedFd.adopt(copy);
    }

    /**
     * Sends a signal ({@code pidfd_send_signal}).
     *
     * @param signal the signal number
     * @return {@code false} if the process has already exited
     */
    public boolean signal(int signal) {
        if (LibC.syscall(LibC.SYS_PIDFD_SEND_SIGNAL, fd.value(), signal, 0, 0, 0, 0) == 0) {
            return true;
        }
        int errno = LibC.errno();
        if (errno == Errno.ESRCH) {
            return false;
        }
        throw LinuxException.of("pidfd_send_signal", errno);
    }

    /**
     * Waits until the process has exited, without reaping it (works for any process, not only
     * our children).
     *
     * @param timeout the longest wait
     * @return whether it has exited
     */
    public boolean awaitTermination(Duration timeout) {
        return Poll.readable(fd.value(), timeout, "poll(pidfd)");
    }

    /**
     * Waits for our child to exit and reaps it ({@code waitid(P_PIDFD, WEXITED)}).
     *
     * @param timeout the longest wait
     * @return the exit, or empty on timeout (the child is then still running and unreaped)
     */
    public Optional<ChildExit> awaitExit(Duration timeout) {
        if (!Poll.readable(fd.value(), timeout, "poll(pidfd)")) {
            return Optional.empty();
        }
        try (Memory info = new Memory(128)) {
            info.clear();
            while (LibC.waitid(P_PIDFD, fd.value(), LibC.address(info), WEXITED) < 0) {
                int errno = LibC.errno();
                if (errno != Errno.EINTR) {
                    throw LinuxException.of("waitid(P_PIDFD)", errno);
                }
            }
            int code = info.getInt(8);
            int status = info.getInt(24);
            return Optional.of(code == CLD_EXITED ? new ChildExit(status, 0) : new ChildExit(-1, status));
        }
    }

    @Override
    public void close() {
        fd.close();
    }
}
