package openshell.linux;

import com.sun.jna.Memory;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Creating and entering namespaces, reading their identity, writing id maps, and bringing up the
 * loopback interface of a fresh network namespace (with {@code SIOCSIFFLAGS}, no {@code ip}
 * binary). {@code unshare}/{@code setns} act on the calling thread; see {@link NamespaceType} for
 * which kinds a multithreaded JVM can enter at all.
 */
public final class Namespaces {
    /** Most lines in one uid or gid map (the kernel's limit since 4.15). */
    public static final int MAX_ID_MAP_LINES = 340;

    static final long SIOCGIFFLAGS = 0x8913;
    static final long SIOCSIFFLAGS = 0x8914;
    static final short IFF_UP = 0x1;
    static final int AF_INET = 2;
    static final int SOCK_DGRAM = 2;
    static final int SOCK_CLOEXEC = 0x80000;
    static final int O_RDONLY = 0;
    static final int O_CLOEXEC = 0x80000;

    private Namespaces() {
    }

    /**
     * One line of a uid or gid map.
     *
     * @param inside  first id inside the namespace
     * @param outside first id outside it
     * @param count   how many ids, at least 1
     */
    public record IdMapping(long inside, long outside, long count) {
        /** Validates the record. */
        public IdMapping {
            if (inside < 0 || outside < 0 || count < 1 || inside + count > 0xffffffffL || outside + count > 0xffffffffL) {
                throw new LinuxException("id map", Errno.EINVAL, "mapping " + inside + " " + outside + " " + count);
            }
        }
    }

    /**
     * Moves the calling thread into new namespaces ({@code unshare}).
     *
     * @param types the kinds
     */
    public static void unshare(NamespaceType... types) {
        int flags = 0;
        for (NamespaceType type : types) {
            flags |= type.cloneFlag();
        }
        LibC.check(LibC.unshare(flags), "unshare(" + List.of(types) + ")");
    }

    /**
     * Opens a process's namespace.
     *
     * @param pid  the process
     * @param type the kind
     * @return a namespace descriptor
     */
    public static OwnedFd open(int pid, NamespaceType type) {
        return openPath("/proc/" + pid + "/ns/" + type.procName());
    }

    /**
     * Opens the calling thread's namespace (to return to it later).
     *
     * @param type the kind
     * @return a namespace descriptor
     */
    public static OwnedFd openCurrent(NamespaceType type) {
        return openPath("/proc/thread-self/ns/" + type.procName());
    }

    /**
     * Opens a namespace file (a {@code /proc/<pid>/ns/*} path or a bind mount of one).
     *
     * @param path the path
     * @return a namespace descriptor
     */
    public static OwnedFd openPath(String path) {
        int fd = LibC.open(path, O_RDONLY | O_CLOEXEC, 0);
        if (fd < 0) {
            throw new LinuxException("open(namespace)", LibC.errno(), path);
        }
        return OwnedFd.adopt(fd);
    }

    /**
     * Moves the calling thread into a namespace ({@code setns}).
     *
     * @param type      the kind (checked by the kernel against the descriptor)
     * @param namespace a namespace descriptor
     */
    public static void enter(NamespaceType type, OwnedFd namespace) {
        LibC.check(LibC.setns(namespace.value(), type.cloneFlag()), "setns(" + type + ")");
    }

    /**
     * The identity (inode) of the calling thread's namespace.
     *
     * @param type the kind
     * @return the inode number
     */
    public static long current(NamespaceType type) {
        return inode(Path.of("/proc/thread-self/ns", type.procName()));
    }

    /**
     * The identity (inode) of a process's namespace.
     *
     * @param pid  the process
     * @param type the kind
     * @return the inode number
     */
    public static long of(int pid, NamespaceType type) {
        return inode(Path.of("/proc", Integer.toString(pid), "ns", type.procName()));
    }

    /**
     * The identity of the namespace a path names.
     *
     * @param path a namespace file
     * @return the inode number
     */
    public static long inode(Path path) {
        try {
            Object inode = Files.getAttribute(path, "unix:ino");
            return ((Number) inode).longValue();
        } catch (IOException | UnsupportedOperationException e) {
            throw new LinuxException("stat(namespace)", 0, path + ": " + e);
        }
    }

    /**
     * Writes a process's uid and gid maps; {@code setgroups} is denied first when asked (required
     * for an unprivileged writer).
     *
     * @param pid           a process in a fresh user namespace
     * @param uidMap        uid map lines
     * @param gidMap        gid map lines
     * @param denySetgroups whether to write {@code deny} to {@code setgroups} first
     */
    public static void writeIdMaps(int pid, List<IdMapping> uidMap, List<IdMapping> gidMap, boolean denySetgroups) {
        Path proc = Path.of("/proc", Integer.toString(pid));
        if (denySetgroups) {
            writeOnce(proc.resolve("setgroups"), "deny");
        }
        writeOnce(proc.resolve("uid_map"), format(uidMap));
        writeOnce(proc.resolve("gid_map"), format(gidMap));
    }

    private static String format(List<IdMapping> map) {
        if (map.isEmpty() || map.size() > MAX_ID_MAP_LINES) {
            throw new LinuxException("id map", Errno.EINVAL, map.size() + " lines (1.." + MAX_ID_MAP_LINES + ")");
        }
        StringBuilder text = new StringBuilder();
        for (IdMapping line : map) {
            text.append(line.inside()).append(' ').append(line.outside()).append(' ').append(line.count()).append('\n');
        }
        return text.toString();
    }

    private static void writeOnce(Path file, String content) {
        // The kernel takes a map in exactly one write(2).
        byte[] bytes = content.getBytes(StandardCharsets.US_ASCII);
        int fd = LibC.open(file.toString(), 1 | O_CLOEXEC, 0);
        if (fd < 0) {
            throw new LinuxException("open", LibC.errno(), file.toString());
        }
        try (Memory buffer = new Memory(bytes.length)) {
            buffer.write(0, bytes, 0, bytes.length);
            long n = LibC.write(fd, LibC.address(buffer), bytes.length);
            if (n != bytes.length) {
                throw new LinuxException("write", n < 0 ? LibC.errno() : Errno.EINVAL, file.toString());
            }
        } finally {
            LibC.close(fd);
        }
    }

    /**
     * Brings {@code lo} up in the calling thread's network namespace (needs CAP_NET_ADMIN there).
     */
    public static void bringLoopbackUp() {
        int fd = LibC.check(LibC.socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), "socket(AF_INET, SOCK_DGRAM)");
        try (Memory ifreq = new Memory(40)) {
            ifreq.clear();
            ifreq.setString(0, "lo", "US-ASCII");
            LibC.check(LibC.ioctl(fd, SIOCGIFFLAGS, LibC.address(ifreq)), "ioctl(SIOCGIFFLAGS, lo)");
            ifreq.setShort(16, (short) (ifreq.getShort(16) | IFF_UP));
            LibC.check(LibC.ioctl(fd, SIOCSIFFLAGS, LibC.address(ifreq)), "ioctl(SIOCSIFFLAGS, lo)");
        } finally {
            LibC.close(fd);
        }
    }

    /**
     * Whether {@code lo} is up in the calling thread's network namespace.
     *
     * @return whether IFF_UP is set
     */
    public static boolean loopbackUp() {
        int fd = LibC.check(LibC.socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), "socket(AF_INET, SOCK_DGRAM)");
        try (Memory ifreq = new Memory(40)) {
            ifreq.clear();
            ifreq.setString(0, "lo", "US-ASCII");
            LibC.check(LibC.ioctl(fd, SIOCGIFFLAGS, LibC.address(ifreq)), "ioctl(SIOCGIFFLAGS, lo)");
            return (ifreq.getShort(16) & IFF_UP) != 0;
        } finally {
            LibC.close(fd);
        }
    }
}
