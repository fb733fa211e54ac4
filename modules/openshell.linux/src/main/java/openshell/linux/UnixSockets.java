package openshell.linux;

import com.sun.jna.Memory;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Socket calls Java's channels do not offer: descriptor passing ({@code SCM_RIGHTS}), peer
 * credentials with the peer's pid ({@code SO_PEERCRED}), the kernel's socket cookie
 * ({@code SO_COOKIE}), binding to a device ({@code SO_BINDTODEVICE}), and the inode that names a
 * socket in {@code /proc/<pid>/fd}. Descriptors received arrive close-on-exec and owned.
 */
public final class UnixSockets {
    /** Most descriptors one message carries (the kernel's {@code SCM_MAX_FD} is 253). */
    public static final int MAX_FDS_PER_MESSAGE = 16;
    /** Largest message payload sent or received in one call. */
    public static final int MAX_MESSAGE_BYTES = 1 << 20;

    static final int AF_UNIX = 1;
    static final int SOCK_STREAM = 1;
    static final int SOCK_SEQPACKET = 5;
    static final int SOCK_CLOEXEC = 0x80000;
    static final int SOL_SOCKET = 1;
    static final int SCM_RIGHTS = 1;
    static final int SO_BINDTODEVICE = 25;
    static final int SO_PEERCRED = 17;
    static final int SO_COOKIE = 57;
    static final int MSG_NOSIGNAL = 0x4000;
    static final int SHUT_RDWR = 2;
    static final int ENOTCONN = 107;
    static final int MSG_CTRUNC = 0x8;
    static final int MSG_TRUNC = 0x20;
    static final int MSG_CMSG_CLOEXEC = 0x40000000;

    private UnixSockets() {
    }

    /**
     * Credentials of a socket's peer, captured by the kernel at connect time.
     *
     * @param pid the peer's process id (0 if it is in another pid namespace we cannot see)
     * @param uid its user id
     * @param gid its group id
     */
    public record PeerCredentials(int pid, int uid, int gid) {
    }

    /**
     * A received message.
     *
     * @param data the payload (empty with no descriptors means the peer closed)
     * @param fds  the descriptors that came with it, now ours
     */
    public record Message(byte[] data, List<OwnedFd> fds) {
        /** Copies the record. */
        public Message {
            data = data.clone();
            fds = List.copyOf(fds);
        }

        /** @return whether this is the peer's end of stream */
        public boolean endOfStream() {
            return data.length == 0 && fds.isEmpty();
        }
    }

    /**
     * A connected pair of message-preserving Unix sockets ({@code SOCK_SEQPACKET}), close-on-exec.
     *
     * @return the two ends
     */
    public static List<OwnedFd> seqpacketPair() {
        int[] fds = new int[2];
        LibC.check(LibC.socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), "socketpair(AF_UNIX, SOCK_SEQPACKET)");
        return List.of(OwnedFd.adopt(fds[0]), OwnedFd.adopt(fds[1]));
    }

    /** Longest socket path a {@code sockaddr_un} holds, without its terminating NUL. */
    public static final int MAX_PATH_BYTES = 107;
    /** Most connections a path listener queues before {@code accept}. */
    static final int PATH_BACKLOG = 4;

    /**
     * Listens for message-preserving connections ({@code SOCK_SEQPACKET}) on a socket file, replacing
     * a stale file of that name; the file gets mode 0600.
     *
     * @param path the socket file, at most {@link #MAX_PATH_BYTES} bytes
     * @return the listening socket, close-on-exec
     */
    public static OwnedFd listenSeqpacket(Path path) {
        try (Memory address = sockaddr(path)) {
            try {
                Files.deleteIfExists(path);
            } catch (IOException e) {
                throw new LinuxException("unlink(" + path + ")", Errno.EACCES, e.toString());
            }
            OwnedFd socket = OwnedFd.adopt(LibC.check(LibC.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), "socket(AF_UNIX)"));
            try {
                LibC.check(LibC.bind(socket.value(), LibC.address(address), (int) address.size()), "bind(" + path + ")");
                Files.setPosixFilePermissions(path, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
                LibC.check(LibC.listen(socket.value(), PATH_BACKLOG), "listen(" + path + ")");
                return socket;
            } catch (IOException | RuntimeException e) {
                socket.close();
                throw e instanceof LinuxException l ? l : new LinuxException("chmod(" + path + ")", Errno.EACCES, e.toString());
            }
        }
    }

    /**
     * Accepts one connection on a listening socket of any family (the runtime's loopback relay
     * listeners use it too), waiting at most {@code timeout}.
     *
     * @param listener the listening socket
     * @param timeout  the longest wait
     * @return the connection (close-on-exec), or empty on timeout
     */
    public static Optional<OwnedFd> accept(int listener, Duration timeout) {
        if (!Poll.readable(listener, timeout, "poll(listener)")) {
            return Optional.empty();
        }
        int fd = LibC.accept4(listener, 0, 0, SOCK_CLOEXEC);
        if (fd < 0) {
            int errno = LibC.errno();
            if (errno == Errno.EAGAIN || errno == Errno.EINTR || errno == ECONNABORTED) {
                return Optional.empty();
            }
            throw LinuxException.of("accept4", errno);
        }
        return Optional.of(OwnedFd.adopt(fd));
    }

    static final int ECONNABORTED = 103;

    /**
     * Connects to a {@code SOCK_SEQPACKET} listener's socket file.
     *
     * @param path the socket file
     * @return the connected socket, close-on-exec
     * @throws LinuxException with the kernel's errno (ENOENT, ECONNREFUSED, EACCES ...)
     */
    public static OwnedFd connectSeqpacket(Path path) {
        try (Memory address = sockaddr(path)) {
            OwnedFd socket = OwnedFd.adopt(LibC.check(LibC.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), "socket(AF_UNIX)"));
            while (LibC.connect(socket.value(), LibC.address(address), (int) address.size()) != 0) {
                int errno = LibC.errno();
                if (errno != Errno.EINTR) {
                    socket.close();
                    throw LinuxException.of("connect(" + path + ")", errno);
                }
            }
            return socket;
        }
    }

    private static Memory sockaddr(Path path) {
        byte[] name = path.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8);
        if (name.length == 0 || name.length > MAX_PATH_BYTES) {
            throw new LinuxException("sockaddr_un", Errno.EINVAL, "socket path is " + name.length + " bytes, at most "
                    + MAX_PATH_BYTES + ": " + path);
        }
        Memory address = new Memory(2 + name.length + 1);
        address.clear();
        address.setShort(0, (short) AF_UNIX);
        address.write(2, name, 0, name.length);
        return address;
    }

    /**
     * Sends one message with descriptors ({@code sendmsg} with {@code SCM_RIGHTS}).
     *
     * @param socket a connected Unix socket
     * @param data   the payload, at least one byte
     * @param fds    descriptors to pass (duplicated into the receiver; ours stay open)
     */
    public static void send(int socket, byte[] data, int... fds) {
        if (data.length == 0 || data.length > MAX_MESSAGE_BYTES || fds.length > MAX_FDS_PER_MESSAGE) {
            throw new LinuxException("sendmsg", Errno.EINVAL, data.length + " bytes (1.." + MAX_MESSAGE_BYTES + "), "
                    + fds.length + " fds (at most " + MAX_FDS_PER_MESSAGE + ")");
        }
        int controlLength = fds.length == 0 ? 0 : 16 + align(4 * fds.length);
        try (Memory payload = new Memory(data.length); Memory iov = new Memory(16); Memory header = new Memory(56);
             Memory control = new Memory(Math.max(8, controlLength))) {
            payload.write(0, data, 0, data.length);
            iov.setLong(0, LibC.address(payload));
            iov.setLong(8, data.length);
            header.clear();
            header.setLong(16, LibC.address(iov));
            header.setLong(24, 1);
            if (fds.length > 0) {
                control.clear();
                control.setLong(0, 16 + 4L * fds.length);
                control.setInt(8, SOL_SOCKET);
                control.setInt(12, SCM_RIGHTS);
                for (int i = 0; i < fds.length; i++) {
                    control.setInt(16 + 4L * i, fds[i]);
                }
                header.setLong(32, LibC.address(control));
                header.setLong(40, controlLength);
            }
            while (true) {
                long n = LibC.sendmsg(socket, LibC.address(header), MSG_NOSIGNAL);
                if (n == data.length) {
                    return;
                }
                int errno = n < 0 ? LibC.errno() : Errno.EAGAIN;
                if (errno != Errno.EINTR) {
                    throw new LinuxException("sendmsg", errno, n >= 0 ? "short send of " + n + " bytes" : "");
                }
            }
        }
    }

    /**
     * Receives one message with any descriptors ({@code recvmsg}, {@code MSG_CMSG_CLOEXEC}),
     * waiting at most {@code timeout}.
     *
     * @param socket   a connected Unix socket
     * @param maxBytes largest payload accepted, 1..{@link #MAX_MESSAGE_BYTES}
     * @param timeout  the longest wait
     * @return the message, or empty on timeout
     * @throws LinuxException with EMSGSIZE if the payload or the descriptors did not fit (any
     *                        descriptors that did arrive are closed)
     */
    public static Optional<Message> receive(int socket, int maxBytes, Duration timeout) {
        if (maxBytes < 1 || maxBytes > MAX_MESSAGE_BYTES) {
            throw new LinuxException("recvmsg", Errno.EINVAL, "maxBytes " + maxBytes);
        }
        if (!Poll.readable(socket, timeout, "poll(unix socket)")) {
            return Optional.empty();
        }
        int controlLength = 16 + align(4 * MAX_FDS_PER_MESSAGE);
        try (Memory payload = new Memory(maxBytes); Memory iov = new Memory(16); Memory header = new Memory(56);
             Memory control = new Memory(controlLength)) {
            iov.setLong(0, LibC.address(payload));
            iov.setLong(8, maxBytes);
            header.clear();
            control.clear();
            header.setLong(16, LibC.address(iov));
            header.setLong(24, 1);
            header.setLong(32, LibC.address(control));
            header.setLong(40, controlLength);
            long n;
            while ((n = LibC.recvmsg(socket, LibC.address(header), MSG_CMSG_CLOEXEC)) < 0) {
                int errno = LibC.errno();
                if (errno != Errno.EINTR) {
                    throw LinuxException.of("recvmsg", errno);
                }
            }
            List<OwnedFd> fds = new ArrayList<>();
            long used = header.getLong(40);
            if (used >= 16 && control.getInt(8) == SOL_SOCKET && control.getInt(12) == SCM_RIGHTS) {
                long count = (control.getLong(0) - 16) / 4;
                for (int i = 0; i < count; i++) {
                    fds.add(OwnedFd.adopt(control.getInt(16 + 4L * i)));
                }
            }
            int flags = header.getInt(48);
            if ((flags & (MSG_CTRUNC | MSG_TRUNC)) != 0) {
                fds.forEach(OwnedFd::close);
                throw new LinuxException("recvmsg", 90, "message or descriptors truncated");
            }
            return Optional.of(new Message(payload.getByteArray(0, (int) n), fds));
        }
    }

    /**
     * Shuts a connected socket down both ways ({@code shutdown(SHUT_RDWR)}): a reader blocked on it
     * wakes to end of stream, and so does the peer, while the descriptor stays ours to close (a
     * number closed under another thread's poll could be reused meanwhile).
     *
     * @param socket a connected socket
     */
    public static void shutdown(int socket) {
        if (LibC.shutdown(socket, SHUT_RDWR) != 0) {
            int errno = LibC.errno();
            if (errno != ENOTCONN) {
                throw LinuxException.of("shutdown", errno);
            }
        }
    }

    private static int align(int length) {
        return (length + 7) & ~7;
    }

    /**
     * The peer's credentials ({@code SO_PEERCRED}).
     *
     * @param socket a connected Unix socket
     * @return pid, uid and gid of the peer
     */
    public static PeerCredentials peerCredentials(int socket) {
        try (Memory value = new Memory(12); Memory length = new Memory(4)) {
            length.setInt(0, 12);
            LibC.check(LibC.getsockopt(socket, SOL_SOCKET, SO_PEERCRED, LibC.address(value), LibC.address(length)),
                    "getsockopt(SO_PEERCRED)");
            return new PeerCredentials(value.getInt(0), value.getInt(4), value.getInt(8));
        }
    }

    /**
     * The socket's cookie ({@code SO_COOKIE}): unique for the kernel's uptime, unlike an fd number.
     *
     * @param socket any socket
     * @return the cookie
     */
    public static long cookie(int socket) {
        try (Memory value = new Memory(8); Memory length = new Memory(4)) {
            length.setInt(0, 8);
            LibC.check(LibC.getsockopt(socket, SOL_SOCKET, SO_COOKIE, LibC.address(value), LibC.address(length)),
                    "getsockopt(SO_COOKIE)");
            return value.getLong(0);
        }
    }

    /**
     * Binds a socket to a network device ({@code SO_BINDTODEVICE}; needs CAP_NET_RAW).
     *
     * @param socket any socket
     * @param device the interface name, for example {@code lo}
     */
    public static void bindToDevice(int socket, String device) {
        byte[] name = device.getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        if (name.length == 0 || name.length >= 16) {
            throw new LinuxException("setsockopt(SO_BINDTODEVICE)", Errno.EINVAL, "device name " + device);
        }
        try (Memory value = new Memory(16)) {
            value.clear();
            value.write(0, name, 0, name.length);
            LibC.check(LibC.setsockopt(socket, SOL_SOCKET, SO_BINDTODEVICE, LibC.address(value), name.length + 1),
                    "setsockopt(SO_BINDTODEVICE)");
        }
    }

    /**
     * The device a socket is bound to.
     *
     * @param socket any socket
     * @return the interface name, or empty if unbound
     */
    public static Optional<String> boundDevice(int socket) {
        try (Memory value = new Memory(16); Memory length = new Memory(4)) {
            value.clear();
            length.setInt(0, 16);
            LibC.check(LibC.getsockopt(socket, SOL_SOCKET, SO_BINDTODEVICE, LibC.address(value), LibC.address(length)),
                    "getsockopt(SO_BINDTODEVICE)");
            String name = value.getString(0, "US-ASCII");
            return name.isEmpty() ? Optional.empty() : Optional.of(name);
        }
    }

    /**
     * The inode of a process's socket, from {@code /proc/<pid>/fd/<fd>} ({@code socket:[inode]}).
     *
     * @param pid the process (or thread) id
     * @param fd  the descriptor number in it
     * @return the inode, or empty if the descriptor is not a socket
     */
    public static Optional<Long> socketInode(int pid, int fd) {
        try {
            String target = Files.readSymbolicLink(Path.of("/proc", Integer.toString(pid), "fd", Integer.toString(fd))).toString();
            if (target.startsWith("socket:[") && target.endsWith("]")) {
                return Optional.of(Long.parseLong(target.substring(8, target.length() - 1)));
            }
            return Optional.empty();
        } catch (IOException e) {
            throw new LinuxException("readlink(/proc/" + pid + "/fd/" + fd + ")", Errno.ENOENT, e.toString());
        }
    }
}
