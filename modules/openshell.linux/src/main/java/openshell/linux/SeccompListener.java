package openshell.linux;

import com.sun.jna.Memory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;

/**
 * The supervisor's end of a seccomp user-notification filter: receive a blocked call, inspect the
 * caller, then answer with an errno, a value, {@code CONTINUE}, or an injected descriptor. All
 * answers carry the notification id, and every answer method returns {@code false} instead of
 * throwing when the kernel says the id is no longer valid (the caller died or was interrupted),
 * because that is an ordinary outcome, not a fault.
 *
 * <p>Hot path: the ioctls go through JNA direct mapping on preallocated buffers; a receive or an
 * answer allocates nothing. Answers may come from several threads.
 */
public final class SeccompListener implements AutoCloseable {
    static final long IOCTL_RECV = 0xC0502100L;
    static final long IOCTL_SEND = 0xC0182101L;
    static final long IOCTL_ID_VALID = 0x40082102L;
    static final long IOCTL_ADDFD = 0x40182103L;
    static final long IOCTL_SET_FLAGS = 0x40082104L;
    static final int RESPONSE_FLAG_CONTINUE = 1;
    static final int ADDFD_FLAG_SETFD = 1;
    static final int ADDFD_FLAG_SEND = 2;
    static final int SET_FLAG_SYNC_WAKE_UP = 1;
    static final int O_CLOEXEC = 0x80000;

    private final OwnedFd fd;
    private final boolean waitKillable;
    private final int notificationSize;
    private final Memory response = new Memory(64);
    private final long responseAddress = LibC.address(response);
    private final ByteBuffer responseView = response.getByteBuffer(0, 64).order(ByteOrder.nativeOrder());
    private final Memory pollfd = new Memory(8);
    private final Memory scratch = new Memory(64);
    private final long scratchAddress = LibC.address(scratch);
    private final ByteBuffer scratchView = scratch.getByteBuffer(0, 64).order(ByteOrder.nativeOrder());

    SeccompListener(OwnedFd fd, boolean waitKillable) {
        this.fd = fd;
        this.waitKillable = waitKillable;
        this.notificationSize = Seccomp.notificationSizes().notification();
    }

    /**
     * Takes a listener descriptor received from elsewhere (for example from the launcher).
     *
     * @param fd           the listener
     * @param waitKillable what the installer reported about {@code WAIT_KILLABLE_RECV}
     * @return the listener
     */
    public static SeccompListener adopt(OwnedFd fd, boolean waitKillable) {
        return new SeccompListener(fd, waitKillable);
    }

    /** @return whether the filter was installed with {@code WAIT_KILLABLE_RECV} */
    public boolean waitKillable() {
        return waitKillable;
    }

    /** @return the descriptor (still owned by this listener) */
    public OwnedFd fd() {
        return fd;
    }

    /** @return a fresh buffer for {@link #receive}; allocate one per receiving thread */
    public SeccompNotification newNotification() {
        return new SeccompNotification(notificationSize);
    }

    /** What {@link #awaitPending} found. */
    public enum Pending {
        /** A notification is waiting: {@link #receive} will not block. */
        NOTIFICATION,
        /** Nothing arrived in time. */
        TIMEOUT,
        /** Every process using the filter has exited; nothing will ever arrive. */
        NO_USERS
    }

    /**
     * Waits until a notification is pending or the filter's last user has gone.
     *
     * @param timeout how long to wait
     * @return what happened
     */
    public Pending awaitPending(Duration timeout) {
        int events;
        synchronized (pollfd) {
            events = Poll.events(fd.value(), timeout, "poll(seccomp listener)", pollfd);
        }
        if ((events & Poll.POLLIN) != 0) {
            return Pending.NOTIFICATION;
        }
        return events == 0 ? Pending.TIMEOUT : Pending.NO_USERS;
    }

    /**
     * Blocks for the next notification.
     *
     * @param into the buffer to fill
     * @return {@code true} if filled; {@code false} if the caller went away before it was received
     * @throws LinuxException for other failures (for example EBADF after close)
     */
    public boolean receive(SeccompNotification into) {
        while (true) {
            into.clear();
            int rc = LibC.ioctl(fd.value(), IOCTL_RECV, into.address);
            if (rc == 0) {
                return true;
            }
            int errno = LibC.errno();
            if (errno == Errno.EINTR) {
                continue;
            }
            if (errno == Errno.ENOENT) {
                return false;
            }
            throw LinuxException.of("ioctl(SECCOMP_IOCTL_NOTIF_RECV)", errno);
        }
    }

    /**
     * Whether a notification is still pending ({@code SECCOMP_IOCTL_NOTIF_ID_VALID}). Check it
     * after reading the caller's memory or {@code /proc}: only then is what was read known to
     * belong to the blocked caller.
     *
     * @param id the notification id
     * @return whether the caller is still waiting for this answer
     */
    public boolean isValid(long id) {
        synchronized (scratch) {
            scratchView.putLong(0, id);
            if (LibC.ioctl(fd.value(), IOCTL_ID_VALID, scratchAddress) == 0) {
                return true;
            }
            int errno = LibC.errno();
            if (errno == Errno.ENOENT) {
                return false;
            }
            throw LinuxException.of("ioctl(SECCOMP_IOCTL_NOTIF_ID_VALID)", errno);
        }
    }

    /**
     * Fails the call with an errno.
     *
     * @param id    the notification id
     * @param errno the errno the caller sees
     * @return {@code false} if the notification is no longer valid
     */
    public boolean respondErrno(long id, int errno) {
        if (errno <= 0) {
            throw new LinuxException("seccomp respond", Errno.EINVAL, "errno must be positive: " + errno);
        }
        return send(id, 0, -errno, 0);
    }

    /**
     * Completes the call with a return value, without running it.
     *
     * @param id    the notification id
     * @param value what the call returns
     * @return {@code false} if the notification is no longer valid
     */
    public boolean respondValue(long id, long value) {
        return send(id, value, 0, 0);
    }

    /**
     * Lets the kernel run the call as made ({@code SECCOMP_USER_NOTIF_FLAG_CONTINUE}). The kernel
     * re-reads the caller's memory, so never use this to allow a call based on pointed-to data the
     * caller could have changed.
     *
     * @param id the notification id
     * @return {@code false} if the notification is no longer valid
     */
    public boolean respondContinue(long id) {
        return send(id, 0, 0, RESPONSE_FLAG_CONTINUE);
    }

    private boolean send(long id, long value, int error, int flags) {
        synchronized (response) {
            responseView.putLong(0, id).putLong(8, value).putInt(16, error).putInt(20, flags);
            while (true) {
                if (LibC.ioctl(fd.value(), IOCTL_SEND, responseAddress) == 0) {
                    return true;
                }
                int errno = LibC.errno();
                if (errno == Errno.EINTR) {
                    continue;
                }
                if (errno == Errno.ENOENT) {
                    return false;
                }
                throw LinuxException.of("ioctl(SECCOMP_IOCTL_NOTIF_SEND)", errno);
            }
        }
    }

    /**
     * Installs one of our descriptors into the caller as a given number
     * ({@code SECCOMP_IOCTL_NOTIF_ADDFD} with {@code SETFD}), replacing what was there. Answer the
     * notification separately afterwards (for a {@code connect}, {@link #respondValue} 0): with the
     * {@code SEND} flag the kernel would return the fd number as the call's result.
     *
     * @param id           the notification id
     * @param sourceFd     our descriptor
     * @param targetFd     the number in the caller
     * @param closeOnExec  whether the caller's copy gets {@code O_CLOEXEC}
     * @return {@code false} if the notification is no longer valid
     */
    public boolean injectFd(long id, int sourceFd, int targetFd, boolean closeOnExec) {
        if (targetFd < 0) {
            throw new LinuxException("seccomp addfd", Errno.EBADF, "target fd " + targetFd);
        }
        synchronized (scratch) {
            scratchView.putLong(0, id).putInt(8, ADDFD_FLAG_SETFD).putInt(12, sourceFd)
                    .putInt(16, targetFd).putInt(20, closeOnExec ? O_CLOEXEC : 0);
            while (true) {
                int rc = LibC.ioctl(fd.value(), IOCTL_ADDFD, scratchAddress);
                if (rc >= 0) {
                    return true;
                }
                int errno = LibC.errno();
                if (errno == Errno.EINTR) {
                    continue;
                }
                if (errno == Errno.ENOENT) {
                    return false;
                }
                throw LinuxException.of("ioctl(SECCOMP_IOCTL_NOTIF_ADDFD)", errno);
            }
        }
    }

    /**
     * Installs one of our descriptors into the caller at its lowest free number and answers the
     * notification with that number in one step ({@code SECCOMP_IOCTL_NOTIF_ADDFD} with
     * {@code SEND}, Linux 5.14+): what a notified {@code socket()} returns when the supervisor made
     * the socket itself.
     *
     * @param id          the notification id
     * @param sourceFd    our descriptor
     * @param closeOnExec whether the caller's copy gets {@code O_CLOEXEC}
     * @return the number in the caller, or -1 if the notification is no longer valid
     */
    public int injectFdAsResult(long id, int sourceFd, boolean closeOnExec) {
        synchronized (scratch) {
            scratchView.putLong(0, id).putInt(8, ADDFD_FLAG_SEND).putInt(12, sourceFd)
                    .putInt(16, 0).putInt(20, closeOnExec ? O_CLOEXEC : 0);
            while (true) {
                int rc = LibC.ioctl(fd.value(), IOCTL_ADDFD, scratchAddress);
                if (rc >= 0) {
                    return rc;
                }
                int errno = LibC.errno();
                if (errno == Errno.EINTR) {
                    continue;
                }
                if (errno == Errno.ENOENT) {
                    return -1;
                }
                throw LinuxException.of("ioctl(SECCOMP_IOCTL_NOTIF_ADDFD)", errno);
            }
        }
    }

    /**
     * Asks the kernel to wake the supervisor and the caller on the same CPU
     * ({@code SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP}, Linux 6.6+): fewer migrations per round trip.
     *
     * @return {@code false} if the kernel lacks the flag
     */
    public boolean enableSyncWakeUp() {
        synchronized (scratch) {
            if (LibC.ioctl(fd.value(), IOCTL_SET_FLAGS, SET_FLAG_SYNC_WAKE_UP) == 0) {
                return true;
            }
            int errno = LibC.errno();
            if (errno == Errno.EINVAL || errno == Errno.ENOTTY) {
                return false;
            }
            throw LinuxException.of("ioctl(SECCOMP_IOCTL_NOTIF_SET_FLAGS)", errno);
        }
    }

    @Override
    public void close() {
        fd.close();
    }
}
