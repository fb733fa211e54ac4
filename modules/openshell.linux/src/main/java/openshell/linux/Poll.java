package openshell.linux;

import com.sun.jna.Memory;
import java.time.Duration;

/** Bounded waits on one descriptor with {@code poll(2)}; every blocking wait here has a timeout. */
final class Poll {
    static final short POLLIN = 1;

    private Poll() {
    }

    /**
     * Waits until {@code fd} is readable, hung up or in error.
     *
     * @return {@code false} on timeout
     */
    static boolean readable(int fd, Duration timeout, String call) {
        return events(fd, timeout, call) != 0;
    }

    static final short POLLHUP = 0x10;

    /**
     * Waits until {@code fd} is readable, hung up or in error.
     *
     * @return the returned events, 0 on timeout
     */
    static int events(int fd, Duration timeout, String call) {
        try (Memory pollfd = new Memory(8)) {
            return events(fd, timeout, call, pollfd);
        }
    }

    /** As {@link #events(int, Duration, String)} with a caller-owned 8-byte {@code struct pollfd}. */
    static int events(int fd, Duration timeout, String call, Memory pollfd) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            long remaining = Math.max(0, deadline - System.nanoTime());
            int millis = (int) Math.min(Integer.MAX_VALUE, (remaining + 999_999) / 1_000_000);
            pollfd.setInt(0, fd);
            pollfd.setShort(4, POLLIN);
            pollfd.setShort(6, (short) 0);
            int rc = LibC.poll(LibC.address(pollfd), 1, millis);
            if (rc > 0) {
                return pollfd.getShort(6) & 0xffff;
            }
            if (rc == 0) {
                if (System.nanoTime() - deadline >= 0) {
                    return 0;
                }
                continue;
            }
            int errno = LibC.errno();
            if (errno != Errno.EINTR) {
                throw LinuxException.of(call, errno);
            }
        }
    }
}
