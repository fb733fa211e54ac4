package openshell.linux;

import com.sun.jna.Memory;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;

/**
 * A TCP dial that yields a raw descriptor, for connections whose bytes a {@link SpliceRelay}
 * moves: a JDK socket keeps its descriptor to itself. Blocking, {@code TCP_NODELAY} on (as every
 * hop of a mediated connection has), close-on-exec, bounded by a timeout.
 */
public final class TcpSockets {
    static final int AF_INET = 2;
    static final int AF_INET6 = 10;
    static final int SOCK_STREAM = 1;
    static final int SOCK_NONBLOCK = 0x800;
    static final int SOCK_CLOEXEC = 0x80000;
    static final int IPPROTO_TCP = 6;
    static final int TCP_NODELAY = 1;
    static final int SOL_SOCKET = 1;
    static final int SO_ERROR = 4;
    static final int EINPROGRESS = 115;
    static final short POLLOUT = 4;
    static final int F_GETFL = 3;
    static final int F_SETFL = 4;
    static final int O_NONBLOCK = 0x800;

    private TcpSockets() {
    }

    /**
     * Connects to an address.
     *
     * @param to      address and port
     * @param timeout longest wait for the handshake
     * @return the connected socket, blocking
     * @throws LinuxException with ETIMEDOUT when the handshake did not finish in time, or the
     *                        kernel's errno (ECONNREFUSED, ENETUNREACH ...)
     */
    public static OwnedFd dial(InetSocketAddress to, Duration timeout) {
        InetAddress address = to.getAddress();
        if (address == null) {
            throw new LinuxException("connect", Errno.EINVAL, "unresolved address " + to);
        }
        boolean v4 = address instanceof Inet4Address;
        OwnedFd socket = OwnedFd.adopt(LibC.check(LibC.socket(v4 ? AF_INET : AF_INET6,
                SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), "socket(AF_INET)"));
        try (Memory sockaddr = new Memory(v4 ? 16 : 28); Memory option = new Memory(4); Memory pollfd = new Memory(8)) {
            sockaddr.clear();
            byte[] raw = address.getAddress();
            sockaddr.setShort(0, (short) (v4 ? AF_INET : AF_INET6));
            sockaddr.setByte(2, (byte) (to.getPort() >> 8));
            sockaddr.setByte(3, (byte) to.getPort());
            sockaddr.write(v4 ? 4 : 8, raw, 0, raw.length);
            if (!v4 && address instanceof java.net.Inet6Address six && six.getScopeId() != 0) {
                sockaddr.setInt(24, six.getScopeId());
            }
            option.setInt(0, 1);
            LibC.check(LibC.setsockopt(socket.value(), IPPROTO_TCP, TCP_NODELAY, LibC.address(option), 4), "setsockopt(TCP_NODELAY)");
            if (LibC.connect(socket.value(), LibC.address(sockaddr), (int) sockaddr.size()) != 0) {
                int errno = LibC.errno();
                if (errno != EINPROGRESS && errno != Errno.EINTR) {
                    throw LinuxException.of("connect(" + to + ")", errno);
                }
                awaitWritable(socket.value(), timeout, to, pollfd);
                try (Memory length = new Memory(4)) {
                    length.setInt(0, 4);
                    LibC.check(LibC.getsockopt(socket.value(), SOL_SOCKET, SO_ERROR, LibC.address(option), LibC.address(length)),
                            "getsockopt(SO_ERROR)");
                }
                if (option.getInt(0) != 0) {
                    throw LinuxException.of("connect(" + to + ")", option.getInt(0));
                }
            }
            int flags = LibC.check(LibC.fcntl(socket.value(), F_GETFL, 0), "fcntl(F_GETFL)");
            LibC.check(LibC.fcntl(socket.value(), F_SETFL, flags & ~O_NONBLOCK), "fcntl(F_SETFL)");
            return socket;
        } catch (RuntimeException e) {
            socket.close();
            throw e;
        }
    }

    static final int SO_TYPE = 3;
    static final int SO_PROTOCOL = 38;
    static final int SO_DOMAIN = 39;

    /**
     * Whether a descriptor is a TCP socket (IPv4 or IPv6): what a descriptor received from
     * another process must be before it is relayed as one.
     *
     * @param fd any descriptor
     * @return {@code true} for a TCP socket, {@code false} for anything else (a pipe, a file, a
     *         Unix or UDP socket)
     */
    public static boolean isTcp(int fd) {
        try (Memory value = new Memory(4); Memory length = new Memory(4)) {
            int[] expected = {SO_DOMAIN, SO_TYPE, SO_PROTOCOL};
            int[] found = new int[3];
            for (int i = 0; i < 3; i++) {
                length.setInt(0, 4);
                if (LibC.getsockopt(fd, SOL_SOCKET, expected[i], LibC.address(value), LibC.address(length)) != 0) {
                    return false;
                }
                found[i] = value.getInt(0);
            }
            return (found[0] == AF_INET || found[0] == AF_INET6) && found[1] == SOCK_STREAM && found[2] == IPPROTO_TCP;
        }
    }

    private static void awaitWritable(int fd, Duration timeout, InetSocketAddress to, Memory pollfd) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            long remaining = deadline - System.nanoTime();
            if (remaining <= 0) {
                throw new LinuxException("connect(" + to + ")", Errno.ETIMEDOUT, "no handshake within " + timeout);
            }
            pollfd.setInt(0, fd);
            pollfd.setShort(4, POLLOUT);
            pollfd.setShort(6, (short) 0);
            int rc = LibC.poll(LibC.address(pollfd), 1, (int) Math.min(Integer.MAX_VALUE, (remaining + 999_999) / 1_000_000));
            if (rc > 0) {
                return;
            }
            if (rc < 0 && LibC.errno() != Errno.EINTR) {
                throw LinuxException.of("poll(connect)", LibC.errno());
            }
        }
    }
}
