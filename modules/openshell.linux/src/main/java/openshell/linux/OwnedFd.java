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

    /**
     * Reads what is available, waiting at most {@code timeout} for the first byte.
     *
     * @param buffer  where to put the bytes
     * @param timeout the longest wait
     * @return bytes read, 0 at end of stream, -1 on timeout
     */
    public int read(byte[] buffer, java.time.Duration timeout) {
        if (!Poll.readable(value(), timeout, "poll")) {
            return -1;
        }
        try (com.sun.jna.Memory memory = new com.sun.jna.Memory(Math.max(1, buffer.length))) {
            long n;
            while ((n = LibC.read(value(), LibC.address(memory), buffer.length)) < 0) {
                int errno = LibC.errno();
                if (errno != Errno.EINTR) {
                    throw LinuxException.of("read", errno);
                }
            }
            memory.read(0, buffer, 0, (int) n);
            return (int) n;
        }
    }

    /**
     * Reads until end of stream, at most {@code limit} bytes, within {@code timeout} in total.
     *
     * @param limit   most bytes kept
     * @param timeout the longest wait overall
     * @return the bytes
     * @throws LinuxException with ETIMEDOUT if the stream did not end in time
     */
    public byte[] readToEnd(int limit, java.time.Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        byte[] chunk = new byte[4096];
        while (true) {
            long left = deadline - System.nanoTime();
            int n = left <= 0 ? -1 : read(chunk, java.time.Duration.ofNanos(left));
            if (n < 0) {
                throw new LinuxException("read", Errno.ETIMEDOUT, "stream still open after " + timeout
                        + "; got: " + out.toString(java.nio.charset.StandardCharsets.UTF_8));
            }
            if (n == 0) {
                return out.toByteArray();
            }
            out.write(chunk, 0, Math.min(n, Math.max(0, limit - out.size())));
        }
    }

    /**
     * Writes all bytes.
     *
     * @param data the bytes
     */
    public void write(byte[] data) {
        try (com.sun.jna.Memory memory = new com.sun.jna.Memory(Math.max(1, data.length))) {
            memory.write(0, data, 0, data.length);
            long done = 0;
            while (done < data.length) {
                long n = LibC.write(value(), LibC.address(memory) + done, data.length - done);
                if (n < 0) {
                    int errno = LibC.errno();
                    if (errno == Errno.EINTR) {
                        continue;
                    }
                    throw LinuxException.of("write", errno);
                }
                done += n;
            }
        }
    }

    /**
     * A second descriptor of the same open file ({@code fcntl(F_DUPFD_CLOEXEC)}).
     *
     * @return the copy, owned by the caller
     */
    public OwnedFd duplicate() {
        return adopt(LibC.check(LibC.fcntl(value(), 1030 /* F_DUPFD_CLOEXEC */, 3), "fcntl(F_DUPFD_CLOEXEC)"));
    }

    /**
     * A socket ({@code socket(2)}) made by this process, for one it gives a notified caller.
     *
     * @param domain   AF_*
     * @param type     SOCK_* with its SOCK_NONBLOCK/SOCK_CLOEXEC flags
     * @param protocol the protocol
     * @return the socket
     * @throws LinuxException with the kernel's errno
     */
    public static OwnedFd socket(int domain, int type, int protocol) {
        return adopt(LibC.check(LibC.socket(domain, type | 0x80000 /* SOCK_CLOEXEC here */, protocol), "socket"));
    }

    /**
     * A pipe, both ends close-on-exec.
     *
     * @return read end, write end
     */
    public static java.util.List<OwnedFd> pipe() {
        int[] fds = new int[2];
        LibC.check(LibC.pipe2(fds, 0x80000), "pipe2");
        return java.util.List.of(adopt(fds[0]), adopt(fds[1]));
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
