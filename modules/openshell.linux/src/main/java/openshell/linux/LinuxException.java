package openshell.linux;

import java.util.Objects;

/**
 * The one unchecked exception of this module: a kernel or C library call failed. It names the
 * call and the errno so a log line alone says what the kernel refused, and callers can branch on
 * {@link #errno()} (for example {@code ENOENT} from a notification whose caller has died).
 */
public final class LinuxException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String call;
    private final int errno;

    /**
     * A failed call.
     *
     * @param call  the call that failed, for example {@code "seccomp(SET_MODE_FILTER)"}
     * @param errno the errno it returned, or 0 if the failure is not an errno (then see the message)
     * @param detail what was being done, for a human; may be empty
     */
    public LinuxException(String call, int errno, String detail) {
        super(message(call, errno, detail));
        this.call = Objects.requireNonNull(call, "call");
        this.errno = errno;
    }

    static LinuxException of(String call, int errno) {
        return new LinuxException(call, errno, "");
    }

    /** Throws for the calling thread's last errno. */
    static LinuxException last(String call) {
        return of(call, LibC.errno());
    }

    private static String message(String call, int errno, String detail) {
        String text = errno == 0 ? call + " failed" : call + " failed: " + Errno.name(errno) + " (" + errno + ")";
        return detail == null || detail.isEmpty() ? text : text + ": " + detail;
    }

    /** @return the call that failed */
    public String call() {
        return call;
    }

    /** @return the errno, or 0 when the failure was not reported by errno */
    public int errno() {
        return errno;
    }

    /** @return the symbolic errno name, for example {@code "EPERM"} */
    public String errnoName() {
        return Errno.name(errno);
    }
}
