package openshell.sandbox;

import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Optional;
import openshell.linux.Errno;
import openshell.linux.LinuxException;
import openshell.linux.OwnedFd;

/**
 * The few socket calls on raw descriptors the broker needs and {@code openshell.linux} does not
 * offer publicly: connecting a descriptor taken from a workload process, and reading its type,
 * family and addresses. JNA direct mapping, like {@code openshell.linux}'s own binding.
 */
final class SocketCalls {
    static final int AF_UNSPEC = 0;
    static final int AF_UNIX = 1;
    static final int AF_INET = 2;
    static final int AF_INET6 = 10;
    static final int SOCK_STREAM = 1;
    static final int SOCK_DGRAM = 2;
    static final int SOL_SOCKET = 1;
    static final int SO_TYPE = 3;
    static final int SO_ERROR = 4;
    static final int SO_DOMAIN = 39;
    static final int IPPROTO_IPV6 = 41;
    static final int IPV6_V6ONLY = 26;
    static final int EINPROGRESS = 115;
    static final int EISCONN = 106;
    static final int EAFNOSUPPORT = 97;
    static final int SOCKADDR_IN_BYTES = 16;
    static final int SOCKADDR_IN6_BYTES = 28;

    static {
        Native.register(SocketCalls.class, NativeLibrary.getInstance("libc.so.6"));
    }

    private SocketCalls() {
    }

    private static native int connect(int fd, long address, int length);

    private static native int bind(int fd, long address, int length);

    private static native int getsockname(int fd, long address, long lengthAddress);

    private static native int getpeername(int fd, long address, long lengthAddress);

    private static native int getsockopt(int fd, int level, int name, long value, long lengthAddress);

    private static native int socket(int domain, int type, int protocol);

    private static native int listen(int fd, int backlog);

    static final int SOCK_CLOEXEC = 0x80000;

    /**
     * A listening TCP socket on a loopback address, port chosen by the kernel, as a raw
     * descriptor (a JDK channel keeps its descriptor to itself, and a handed-off relay socket
     * must be passed on). Opened in the calling thread's network namespace.
     *
     * @param loopback {@code 127.0.0.1} or {@code ::1}
     * @param backlog  connections queued before accept
     * @return the listener, close-on-exec
     */
    static OwnedFd listenLoopback(InetAddress loopback, int backlog) {
        int domain = loopback instanceof Inet6Address ? AF_INET6 : AF_INET;
        int fd = socket(domain, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            throw new LinuxException("socket", Native.getLastError(), "loopback listener");
        }
        OwnedFd listener = OwnedFd.adopt(fd);
        int rc = bind(fd, new InetSocketAddress(loopback, 0));
        if (rc != 0 || listen(fd, backlog) != 0) {
            int errno = rc != 0 ? rc : Native.getLastError();
            listener.close();
            throw new LinuxException(rc != 0 ? "bind" : "listen", errno, "loopback listener on " + loopback.getHostAddress());
        }
        return listener;
    }

    /**
     * Connects a descriptor.
     *
     * @param fd      the socket
     * @param address where
     * @return 0, or the errno the kernel returned (EINPROGRESS for a non-blocking socket)
     */
    static int connect(int fd, InetSocketAddress address) {
        return connect(fd, encode(address));
    }

    /** connect(2) with an encoded sockaddr, retried on EINTR; returns 0 or the errno. */
    private static int connect(int fd, byte[] encoded) {
        try (Memory memory = new Memory(encoded.length)) {
            memory.write(0, encoded, 0, encoded.length);
            while (true) {
                if (connect(fd, com.sun.jna.Pointer.nativeValue(memory), encoded.length) == 0) {
                    return 0;
                }
                int errno = Native.getLastError();
                if (errno != Errno.EINTR) {
                    return errno;
                }
            }
        }
    }

    /** Binds a descriptor; returns 0 or the errno. */
    static int bind(int fd, InetSocketAddress address) {
        byte[] encoded = encode(address);
        try (Memory memory = new Memory(encoded.length)) {
            memory.write(0, encoded, 0, encoded.length);
            return bind(fd, com.sun.jna.Pointer.nativeValue(memory), encoded.length) == 0 ? 0 : Native.getLastError();
        }
    }

    static int intOption(int fd, int name) {
        return intOption(fd, SOL_SOCKET, name);
    }

    static int intOption(int fd, int level, int name) {
        try (Memory value = new Memory(4); Memory length = new Memory(4)) {
            length.setInt(0, 4);
            if (getsockopt(fd, level, name, com.sun.jna.Pointer.nativeValue(value),
                    com.sun.jna.Pointer.nativeValue(length)) != 0) {
                throw new LinuxException("getsockopt(" + name + ")", Native.getLastError(), "");
            }
            return value.getInt(0);
        }
    }

    static Optional<InetSocketAddress> localAddress(int fd) {
        return address(fd, false);
    }

    static Optional<InetSocketAddress> peerAddress(int fd) {
        return address(fd, true);
    }

    private static Optional<InetSocketAddress> address(int fd, boolean peer) {
        try (Memory value = new Memory(128); Memory length = new Memory(4)) {
            value.clear();
            length.setInt(0, 128);
            long v = com.sun.jna.Pointer.nativeValue(value);
            long l = com.sun.jna.Pointer.nativeValue(length);
            int rc = peer ? getpeername(fd, v, l) : getsockname(fd, v, l);
            if (rc != 0) {
                return Optional.empty();
            }
            int n = Math.min(length.getInt(0), 128);
            return decode(value.getByteArray(0, n));
        }
    }

    /** @return the family of a sockaddr, or -1 if it is shorter than the family field */
    static int family(byte[] sockaddr, int length) {
        if (length < 2) {
            return -1;
        }
        return ByteBuffer.wrap(sockaddr, 0, 2).order(ByteOrder.nativeOrder()).getShort() & 0xffff;
    }

    /**
     * Decodes an AF_INET or AF_INET6 sockaddr.
     *
     * @param sockaddr the bytes as the caller passed them
     * @return the address, or empty if the family is another or the length too short
     */
    static Optional<InetSocketAddress> decode(byte[] sockaddr) {
        int family = family(sockaddr, sockaddr.length);
        try {
            if (family == AF_INET && sockaddr.length >= SOCKADDR_IN_BYTES) {
                int port = (sockaddr[2] & 0xff) << 8 | sockaddr[3] & 0xff;
                return Optional.of(new InetSocketAddress(InetAddress.getByAddress(Arrays.copyOfRange(sockaddr, 4, 8)), port));
            }
            if (family == AF_INET6 && sockaddr.length >= SOCKADDR_IN6_BYTES) {
                int port = (sockaddr[2] & 0xff) << 8 | sockaddr[3] & 0xff;
                int scope = ByteBuffer.wrap(sockaddr, 24, 4).order(ByteOrder.nativeOrder()).getInt();
                byte[] raw = Arrays.copyOfRange(sockaddr, 8, 24);
                InetAddress address = scope == 0 ? InetAddress.getByAddress(raw) : Inet6Address.getByAddress(null, raw, scope);
                return Optional.of(new InetSocketAddress(address, port));
            }
        } catch (UnknownHostException e) {
            return Optional.empty();
        }
        return Optional.empty();
    }

    /**
     * Connects an IPv6 socket to an IPv4 address through its IPv4-mapped form
     * ({@code ::ffff:a.b.c.d}), which a dual-stack socket (IPV6_V6ONLY off) reaches over IPv4.
     *
     * @return 0, or the errno the kernel returned
     */
    static int connectMapped(int fd, InetSocketAddress ipv4) {
        return connect(fd, encodeMapped(ipv4));
    }

    /** An IPv4 address and port as the IPv4-mapped sockaddr_in6 a dual-stack socket uses. */
    static byte[] encodeMapped(InetSocketAddress ipv4) {
        byte[] mapped = new byte[16];
        mapped[10] = (byte) 0xff;
        mapped[11] = (byte) 0xff;
        System.arraycopy(ipv4.getAddress().getAddress(), 0, mapped, 12, 4);
        ByteBuffer b = ByteBuffer.allocate(SOCKADDR_IN6_BYTES).order(ByteOrder.nativeOrder());
        b.putShort(0, (short) AF_INET6);
        b.order(ByteOrder.BIG_ENDIAN).putShort(2, (short) ipv4.getPort());
        b.put(8, mapped);
        return b.array();
    }

    /** The sockaddr a socket of {@code domain} would show for {@code address} (mapped on an IPv6 socket). */
    static byte[] encodeFor(int domain, InetSocketAddress address) {
        return domain == AF_INET6 && address.getAddress() instanceof Inet4Address ? encodeMapped(address) : encode(address);
    }

    static byte[] encode(InetSocketAddress address) {
        InetAddress ip = address.getAddress();
        if (ip instanceof Inet4Address) {
            ByteBuffer b = ByteBuffer.allocate(SOCKADDR_IN_BYTES).order(ByteOrder.nativeOrder());
            b.putShort(0, (short) AF_INET);
            b.order(ByteOrder.BIG_ENDIAN).putShort(2, (short) address.getPort());
            b.put(4, ip.getAddress());
            return b.array();
        }
        ByteBuffer b = ByteBuffer.allocate(SOCKADDR_IN6_BYTES).order(ByteOrder.nativeOrder());
        b.putShort(0, (short) AF_INET6);
        b.order(ByteOrder.BIG_ENDIAN).putShort(2, (short) address.getPort());
        b.put(8, ip.getAddress());
        return b.array();
    }
}
