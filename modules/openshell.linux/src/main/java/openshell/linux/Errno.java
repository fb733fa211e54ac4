package openshell.linux;

/** Linux errno values this module names or returns (x86-64 numbering). */
public final class Errno {
    /** Operation not permitted. */
    public static final int EPERM = 1;
    /** No such file or directory (also: notification no longer valid). */
    public static final int ENOENT = 2;
    /** No such process. */
    public static final int ESRCH = 3;
    /** Interrupted system call. */
    public static final int EINTR = 4;
    /** Bad file descriptor. */
    public static final int EBADF = 9;
    /** No child processes. */
    public static final int ECHILD = 10;
    /** Try again. */
    public static final int EAGAIN = 11;
    /** Permission denied. */
    public static final int EACCES = 13;
    /** Bad address. */
    public static final int EFAULT = 14;
    /** Device or resource busy. */
    public static final int EBUSY = 16;
    /** Not a typewriter (also: unknown ioctl). */
    public static final int ENOTTY = 25;
    /** Invalid argument. */
    public static final int EINVAL = 22;
    /** Function not implemented. */
    public static final int ENOSYS = 38;
    /** Operation not supported. */
    public static final int EOPNOTSUPP = 95;
    /** Address family not supported by protocol. */
    public static final int EAFNOSUPPORT = 97;
    /** Network is unreachable. */
    public static final int ENETUNREACH = 101;
    /** Connection refused. */
    public static final int ECONNREFUSED = 111;
    /** Connection timed out. */
    public static final int ETIMEDOUT = 110;
    /** Operation canceled. */
    public static final int ECANCELED = 125;

    private static final String[] NAMES = new String[134];

    static {
        String[] known = {
            "1 EPERM", "2 ENOENT", "3 ESRCH", "4 EINTR", "5 EIO", "6 ENXIO", "7 E2BIG", "8 ENOEXEC", "9 EBADF",
            "10 ECHILD", "11 EAGAIN", "12 ENOMEM", "13 EACCES", "14 EFAULT", "16 EBUSY", "17 EEXIST", "18 EXDEV",
            "19 ENODEV", "20 ENOTDIR", "21 EISDIR", "22 EINVAL", "23 ENFILE", "24 EMFILE", "25 ENOTTY",
            "26 ETXTBSY", "28 ENOSPC", "30 EROFS", "32 EPIPE", "34 ERANGE", "36 ENAMETOOLONG", "38 ENOSYS",
            "39 ENOTEMPTY", "40 ELOOP", "61 ENODATA", "75 EOVERFLOW", "88 ENOTSOCK", "90 EMSGSIZE",
            "92 ENOPROTOOPT", "93 EPROTONOSUPPORT", "94 ESOCKTNOSUPPORT", "95 EOPNOTSUPP", "97 EAFNOSUPPORT",
            "98 EADDRINUSE", "99 EADDRNOTAVAIL", "100 ENETDOWN", "101 ENETUNREACH", "104 ECONNRESET",
            "106 EISCONN", "107 ENOTCONN", "110 ETIMEDOUT", "111 ECONNREFUSED", "113 EHOSTUNREACH",
            "114 EALREADY", "115 EINPROGRESS", "125 ECANCELED", "133 EHWPOISON"};
        for (String entry : known) {
            int space = entry.indexOf(' ');
            NAMES[Integer.parseInt(entry.substring(0, space))] = entry.substring(space + 1);
        }
    }

    private Errno() {
    }

    /**
     * The symbolic name of an errno.
     *
     * @param errno the number
     * @return its name, or {@code "errno <n>"} for one this table does not know
     */
    public static String name(int errno) {
        if (errno > 0 && errno < NAMES.length && NAMES[errno] != null) {
            return NAMES[errno];
        }
        return "errno " + errno;
    }
}
