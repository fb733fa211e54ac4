package openshell.linux;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * A file descriptor this process owns and must close exactly once. Kernel handles (listeners,
 * pidfds, rulesets, namespace files) travel as this type so that none is leaked or closed twice;
 * a bare {@code int} appears only where the kernel's numbering is the point (a target fd number).
 */
public final class OwnedFd implements AutoCloseable {
    private final AtomicInteger fd;

    private OwnedFd(int fd) {
        this.fd = new AtomicInteger(fd);
    }

    /**
     * Takes ownership of a descriptor number.
     *
     * @param fd an open descriptor, not negative
     * @return the owner
     */
    public static OwnedFd adopt(int fd) {
        if (fd < 0) {
            throw new LinuxException("adopt", Errno.EBADF, "negative descriptor " + fd);
        }
        return new OwnedFd(fd);
    }

    /**
     * The descriptor number.
     *
     * @return the number
     * @throws LinuxException with EBADF if already closed
     */
    public int value() {
        int value = fd.get();
        if (value < 0) {
            throw new LinuxException("fd", Errno.EBADF, "descriptor already closed");
        }
        return value;
    }

    /** @return whether {@link #close()} has not been called */
    public boolean isOpen() {
        return fd.get() >= 0;
    }

    /**
     * Gives the number up without closing it (for example after handing it to a child).
     *
     * @return the number, which the caller now owns
     */
    public int release() {
        int value = fd.getAndSet(-1);
        if (value < 0) {
            throw new LinuxException("fd", Errno.EBADF, "descriptor already closed");
        }
        return value;
    }

    @Override
    public void close() {
        int value = fd.getAndSet(-1);
        if (value >= 0) {
            LibC.close(value);
        }
    }

    @Override
    public String toString() {
        return "fd " + fd.get();
    }
}
