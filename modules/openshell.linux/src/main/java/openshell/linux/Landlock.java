package openshell.linux;

import com.sun.jna.Memory;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Landlock: unprivileged file-system (and TCP port) sandboxing that the restricted thread and its
 * descendants can never lift. {@link #abiVersion()} probes what the kernel has; a
 * {@link Ruleset} handles a set of access rights and grants some of them beneath chosen paths;
 * {@link Ruleset#restrictSelf()} enforces it on the calling thread (and what it {@code execve}s).
 */
public final class Landlock {
    /** Execute a file. */
    public static final long EXECUTE = 1L;
    /** Open a file for writing. */
    public static final long WRITE_FILE = 1L << 1;
    /** Open a file for reading. */
    public static final long READ_FILE = 1L << 2;
    /** List a directory. */
    public static final long READ_DIR = 1L << 3;
    /** Remove a directory. */
    public static final long REMOVE_DIR = 1L << 4;
    /** Unlink a file. */
    public static final long REMOVE_FILE = 1L << 5;
    /** Create a character device. */
    public static final long MAKE_CHAR = 1L << 6;
    /** Create a directory. */
    public static final long MAKE_DIR = 1L << 7;
    /** Create a regular file. */
    public static final long MAKE_REG = 1L << 8;
    /** Create a Unix socket. */
    public static final long MAKE_SOCK = 1L << 9;
    /** Create a FIFO. */
    public static final long MAKE_FIFO = 1L << 10;
    /** Create a block device. */
    public static final long MAKE_BLOCK = 1L << 11;
    /** Create a symbolic link. */
    public static final long MAKE_SYM = 1L << 12;
    /** Link or rename across directories (ABI 2). */
    public static final long REFER = 1L << 13;
    /** Truncate a file (ABI 3). */
    public static final long TRUNCATE = 1L << 14;
    /** ioctl on a device (ABI 5). */
    public static final long IOCTL_DEV = 1L << 15;
    /** Rights that apply to a regular file (the others only to directories). */
    public static final long FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
    /** Read and execute: the rights of a read-only path. */
    public static final long READ_ONLY = EXECUTE | READ_FILE | READ_DIR;
    /** Bind a TCP port (ABI 4). */
    public static final long NET_BIND_TCP = 1L;
    /** Connect a TCP port (ABI 4). */
    public static final long NET_CONNECT_TCP = 1L << 1;
    /** Scope: no connecting to abstract Unix sockets outside the domain (ABI 6). */
    public static final long SCOPE_ABSTRACT_UNIX_SOCKET = 1L;
    /** Scope: no signals to processes outside the domain (ABI 6). */
    public static final long SCOPE_SIGNAL = 1L << 1;

    static final int CREATE_RULESET_VERSION = 1;
    static final int RULE_PATH_BENEATH = 1;
    static final int RULE_NET_PORT = 2;
    static final int O_PATH = 0x200000;
    static final int O_CLOEXEC = 0x80000;

    private Landlock() {
    }

    /**
     * The kernel's Landlock ABI version.
     *
     * @return the version, or 0 if Landlock is absent or disabled (ENOSYS/EOPNOTSUPP)
     */
    public static int abiVersion() {
        long rc = LibC.syscall(LibC.SYS_LANDLOCK_CREATE_RULESET, 0, 0, CREATE_RULESET_VERSION, 0, 0, 0);
        if (rc >= 0) {
            return (int) rc;
        }
        int errno = LibC.errno();
        if (errno == Errno.ENOSYS || errno == Errno.EOPNOTSUPP) {
            return 0;
        }
        throw LinuxException.of("landlock_create_ruleset(VERSION)", errno);
    }

    /**
     * The file-system rights an ABI version can handle.
     *
     * @param abi the version
     * @return the mask
     */
    public static long fsRights(int abi) {
        if (abi <= 0) {
            return 0;
        }
        long rights = (MAKE_SYM << 1) - 1;
        if (abi >= 2) {
            rights |= REFER;
        }
        if (abi >= 3) {
            rights |= TRUNCATE;
        }
        if (abi >= 5) {
            rights |= IOCTL_DEV;
        }
        return rights;
    }

    /**
     * The network rights an ABI version can handle.
     *
     * @param abi the version
     * @return the mask
     */
    public static long netRights(int abi) {
        return abi >= 4 ? NET_BIND_TCP | NET_CONNECT_TCP : 0;
    }

    /**
     * The scopes an ABI version can handle.
     *
     * @param abi the version
     * @return the mask
     */
    public static long scopes(int abi) {
        return abi >= 6 ? SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL : 0;
    }

    /**
     * Creates a ruleset handling exactly these rights.
     *
     * @param handledFs  file-system rights to handle (denied unless granted by a rule)
     * @param handledNet network rights to handle
     * @param scoped     scopes
     * @return the ruleset; the caller owns it
     * @throws LinuxException with EINVAL if the kernel does not know a right (check {@link #abiVersion()})
     */
    public static Ruleset create(long handledFs, long handledNet, long scoped) {
        int size = scoped != 0 ? 24 : handledNet != 0 ? 16 : 8;
        try (Memory attr = new Memory(24)) {
            attr.setLong(0, handledFs);
            attr.setLong(8, handledNet);
            attr.setLong(16, scoped);
            int fd = (int) LibC.check(LibC.syscall(LibC.SYS_LANDLOCK_CREATE_RULESET, LibC.address(attr), size, 0, 0, 0, 0),
                    "landlock_create_ruleset");
            return new Ruleset(OwnedFd.adopt(fd), handledFs, handledNet);
        }
    }

    /** A ruleset being filled; {@link #restrictSelf()} enforces it. */
    public static final class Ruleset implements AutoCloseable {
        private final OwnedFd fd;
        private final long handledFs;
        private final long handledNet;
        private final List<String> paths = new ArrayList<>();

        private Ruleset(OwnedFd fd, long handledFs, long handledNet) {
            this.fd = fd;
            this.handledFs = handledFs;
            this.handledNet = handledNet;
        }

        /**
         * Grants TCP rights on one port (ABI 4+).
         *
         * @param port    0..65535
         * @param allowed {@link #NET_BIND_TCP} and/or {@link #NET_CONNECT_TCP}, handled by this ruleset
         * @return this
         */
        public Ruleset allowPort(int port, long allowed) {
            if (port < 0 || port > 0xffff || allowed == 0 || (allowed & ~handledNet) != 0) {
                throw new LinuxException("landlock_add_rule(NET_PORT)", Errno.EINVAL,
                        "port " + port + " rights 0x" + Long.toHexString(allowed) + " (handled 0x" + Long.toHexString(handledNet) + ")");
            }
            try (Memory attr = new Memory(16)) {
                attr.setLong(0, allowed);
                attr.setLong(8, port);
                LibC.check((int) LibC.syscall(LibC.SYS_LANDLOCK_ADD_RULE, fd.value(), RULE_NET_PORT,
                        LibC.address(attr), 0, 0, 0), "landlock_add_rule(port " + port + ")");
                return this;
            }
        }

        /** @return the handled file-system rights */
        public long handledFs() {
            return handledFs;
        }

        /**
         * Grants rights beneath a path (or on a file). Rights that do not apply to a non-directory
         * are dropped for one, since the kernel refuses them there.
         *
         * @param path    an existing path
         * @param allowed rights, a subset of the handled ones
         * @return this
         */
        public Ruleset allow(String path, long allowed) {
            Objects.requireNonNull(path, "path");
            if ((allowed & ~handledFs) != 0) {
                throw new LinuxException("landlock_add_rule", Errno.EINVAL,
                        "rights 0x" + Long.toHexString(allowed & ~handledFs) + " are not handled by this ruleset");
            }
            int parent = LibC.open(path, O_PATH | O_CLOEXEC, 0);
            if (parent < 0) {
                throw new LinuxException("open(O_PATH)", LibC.errno(), path);
            }
            try (Memory attr = new Memory(12)) {
                long rights = isDirectory(parent) ? allowed : allowed & FILE_RIGHTS;
                attr.setLong(0, rights);
                attr.setInt(8, parent);
                if (rights != 0) {
                    LibC.check((int) LibC.syscall(LibC.SYS_LANDLOCK_ADD_RULE, fd.value(), RULE_PATH_BENEATH,
                            LibC.address(attr), 0, 0, 0), "landlock_add_rule(" + path + ")");
                }
                paths.add(path);
                return this;
            } finally {
                LibC.close(parent);
            }
        }

        private static boolean isDirectory(int fd) {
            // An O_PATH descriptor of a directory can be the base of openat(".") while a file's cannot.
            return java.nio.file.Files.isDirectory(java.nio.file.Path.of("/proc/self/fd/" + fd));
        }

        /** @return the paths granted so far, in order */
        public List<String> paths() {
            return List.copyOf(paths);
        }

        /**
         * Enforces the ruleset on the calling thread ({@code landlock_restrict_self}); the thread
         * needs no_new_privs or CAP_SYS_ADMIN. Other threads are not restricted.
         */
        public void restrictSelf() {
            LibC.check((int) LibC.syscall(LibC.SYS_LANDLOCK_RESTRICT_SELF, fd.value(), 0, 0, 0, 0, 0),
                    "landlock_restrict_self");
        }

        @Override
        public void close() {
            fd.close();
        }
    }
}
