package openshell.linux;

import com.sun.jna.Memory;
import java.nio.charset.StandardCharsets;

/**
 * A pseudo-terminal pair from {@code /dev/ptmx} ({@code posix_openpt}), window size control, and
 * the session calls a terminal's child needs ({@code setsid}, {@code TIOCSCTTY}).
 */
public final class Pty implements AutoCloseable {
    static final int O_RDWR = 2;
    static final int O_NOCTTY = 0x100;
    static final int O_CLOEXEC = 0x80000;
    static final long TIOCSCTTY = 0x540E;
    static final long TIOCGWINSZ = 0x5413;
    static final long TIOCSWINSZ = 0x5414;

    private final OwnedFd master;
    private final OwnedFd slave;
    private final String slaveName;

    private Pty(OwnedFd master, OwnedFd slave, String slaveName) {
        this.master = master;
        this.slave = slave;
        this.slaveName = slaveName;
    }

    /**
     * Window size in character cells.
     *
     * @param rows    rows, 1..65535
     * @param columns columns, 1..65535
     */
    public record WindowSize(int rows, int columns) {
        /** Validates the record. */
        public WindowSize {
            if (rows < 1 || rows > 0xffff || columns < 1 || columns > 0xffff) {
                throw new LinuxException("window size", Errno.EINVAL, rows + "x" + columns);
            }
        }
    }

    /** @return a new pair; both ends close-on-exec and not our controlling terminal */
    public static Pty open() {
        OwnedFd master = OwnedFd.adopt(LibC.check(LibC.posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC), "posix_openpt"));
        try {
            LibC.check(LibC.grantpt(master.value()), "grantpt");
            LibC.check(LibC.unlockpt(master.value()), "unlockpt");
            byte[] name = new byte[128];
            int rc = LibC.ptsname_r(master.value(), name, name.length);
            if (rc != 0) {
                throw LinuxException.of("ptsname_r", rc);
            }
            int length = 0;
            while (length < name.length && name[length] != 0) {
                length++;
            }
            String slaveName = new String(name, 0, length, StandardCharsets.US_ASCII);
            int slave = LibC.open(slaveName, O_RDWR | O_NOCTTY | O_CLOEXEC, 0);
            if (slave < 0) {
                throw new LinuxException("open", LibC.errno(), slaveName);
            }
            return new Pty(master, OwnedFd.adopt(slave), slaveName);
        } catch (LinuxException e) {
            master.close();
            throw e;
        }
    }

    /** @return the master (our end) */
    public OwnedFd master() {
        return master;
    }

    /** @return the slave (the child's stdio) */
    public OwnedFd slave() {
        return slave;
    }

    /** @return the slave's path, for example {@code /dev/pts/3} */
    public String slaveName() {
        return slaveName;
    }

    /** @return the current window size */
    public WindowSize windowSize() {
        try (Memory size = new Memory(8)) {
            size.clear();
            LibC.check(LibC.ioctl(master.value(), TIOCGWINSZ, LibC.address(size)), "ioctl(TIOCGWINSZ)");
            return new WindowSize(Math.max(1, size.getShort(0) & 0xffff), Math.max(1, size.getShort(2) & 0xffff));
        }
    }

    /**
     * Resizes the terminal; the foreground process group gets SIGWINCH.
     *
     * @param size the new size
     */
    public void resize(WindowSize size) {
        try (Memory winsize = new Memory(8)) {
            winsize.clear();
            winsize.setShort(0, (short) size.rows());
            winsize.setShort(2, (short) size.columns());
            LibC.check(LibC.ioctl(master.value(), TIOCSWINSZ, LibC.address(winsize)), "ioctl(TIOCSWINSZ)");
        }
    }

    /**
     * Starts a new session with the calling process as leader ({@code setsid}).
     *
     * @return the session id
     */
    public static int newSession() {
        return LibC.check(LibC.setsid(), "setsid");
    }

    /**
     * Makes a terminal the controlling terminal of the calling session leader ({@code TIOCSCTTY}).
     *
     * @param fd a descriptor of the terminal (the slave)
     */
    public static void makeControllingTerminal(int fd) {
        LibC.check(LibC.ioctl(fd, TIOCSCTTY, 0), "ioctl(TIOCSCTTY)");
    }

    @Override
    public void close() {
        slave.close();
        master.close();
    }
}
