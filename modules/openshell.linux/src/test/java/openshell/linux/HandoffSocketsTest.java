package openshell.linux;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.jna.Memory;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The socket calls behind the descriptor channel and the native relay: a {@code SOCK_SEQPACKET}
 * listener on a socket file that passes a descriptor under a token, and a raw TCP dial.
 */
class HandoffSocketsTest {
    private static final Duration WAIT = Duration.ofSeconds(10);

    @Test
    void aSeqpacketListenerOnAFileTakesAConnectionAndItsDescriptor(@TempDir Path dir) throws Exception {
        Path path = dir.resolve("link.fds");
        try (OwnedFd listener = UnixSockets.listenSeqpacket(path)) {
            assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(path)));
            assertEquals(Optional.empty(), UnixSockets.accept(listener.value(), Duration.ofMillis(20)), "nothing dialled yet");
            try (OwnedFd client = UnixSockets.connectSeqpacket(path);
                 OwnedFd server = UnixSockets.accept(listener.value(), WAIT).orElseThrow()) {
                assertEquals(LibC.getpid(), UnixSockets.peerCredentials(server.value()).pid());
                java.util.List<OwnedFd> pipe = OwnedFd.pipe();
                try (OwnedFd read = pipe.get(0); OwnedFd write = pipe.get(1)) {
                    byte[] token = "0123456789abcdef".getBytes(StandardCharsets.US_ASCII);
                    UnixSockets.send(client.value(), token, write.value());
                    UnixSockets.Message message = UnixSockets.receive(server.value(), 16, WAIT).orElseThrow();
                    assertArrayEquals(token, message.data());
                    assertEquals(1, message.fds().size());
                    try (OwnedFd passed = message.fds().get(0)) {
                        passed.write("x".getBytes(StandardCharsets.US_ASCII));
                    }
                    byte[] one = new byte[1];
                    assertEquals(1, read.read(one, WAIT));
                }
            }
        }
    }

    @Test
    void aStaleSocketFileIsReplacedAndAMissingOneIsTheKernelsError(@TempDir Path dir) throws Exception {
        Path path = dir.resolve("stale.fds");
        Files.writeString(path, "left over");
        try (OwnedFd listener = UnixSockets.listenSeqpacket(path)) {
            assertTrue(listener.isOpen());
        }
        LinuxException missing = assertThrows(LinuxException.class, () -> UnixSockets.connectSeqpacket(dir.resolve("absent")));
        assertEquals(Errno.ENOENT, missing.errno());
    }

    @Test
    void aSocketPathIsBoundedBySockaddrUn(@TempDir Path dir) {
        String base = dir.toString() + "/";
        Path atBound = Path.of(base + "a".repeat(UnixSockets.MAX_PATH_BYTES - base.length()));
        Path overBound = Path.of(base + "a".repeat(UnixSockets.MAX_PATH_BYTES - base.length() + 1));
        try (OwnedFd listener = UnixSockets.listenSeqpacket(atBound)) {
            assertTrue(listener.isOpen(), "a path of exactly " + UnixSockets.MAX_PATH_BYTES + " bytes fits");
            try (OwnedFd client = UnixSockets.connectSeqpacket(atBound)) {
                assertTrue(client.isOpen());
            }
        }
        assertEquals(Errno.EINVAL, assertThrows(LinuxException.class, () -> UnixSockets.listenSeqpacket(overBound)).errno());
        assertEquals(Errno.EINVAL, assertThrows(LinuxException.class, () -> UnixSockets.connectSeqpacket(overBound)).errno());
    }

    @Test
    void aRawDialIsConnectedBlockingAndWithoutNagle() throws Exception {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             OwnedFd dialled = TcpSockets.dial(new InetSocketAddress(InetAddress.getLoopbackAddress(), server.getLocalPort()), WAIT);
             Socket accepted = server.accept()) {
            assertEquals(1, intOption(dialled.value(), TcpSockets.IPPROTO_TCP, TcpSockets.TCP_NODELAY));
            assertEquals(0, LibC.fcntl(dialled.value(), TcpSockets.F_GETFL, 0) & TcpSockets.O_NONBLOCK, "blocking");
            dialled.write("ping".getBytes(StandardCharsets.US_ASCII));
            InputStream in = accepted.getInputStream();
            assertArrayEquals("ping".getBytes(StandardCharsets.US_ASCII), in.readNBytes(4));
            OutputStream out = accepted.getOutputStream();
            out.write("pong".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            byte[] answer = new byte[4];
            assertEquals(4, dialled.read(answer, WAIT));
            assertArrayEquals("pong".getBytes(StandardCharsets.US_ASCII), answer);
        }
    }

    @Test
    void onlyATcpSocketIsTakenForOne(@TempDir Path dir) throws Exception {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             OwnedFd tcp = TcpSockets.dial(new InetSocketAddress(InetAddress.getLoopbackAddress(), server.getLocalPort()), WAIT)) {
            assertTrue(TcpSockets.isTcp(tcp.value()));
        }
        java.util.List<OwnedFd> pipe = OwnedFd.pipe();
        java.util.List<OwnedFd> unix = UnixSockets.seqpacketPair();
        try (OwnedFd read = pipe.get(0); OwnedFd write = pipe.get(1); OwnedFd a = unix.get(0); OwnedFd b = unix.get(1);
             OwnedFd udp = OwnedFd.adopt(LibC.socket(TcpSockets.AF_INET, 2, 0))) {
            assertFalse(TcpSockets.isTcp(read.value()), "a pipe");
            assertFalse(TcpSockets.isTcp(a.value()), "a Unix socket");
            assertFalse(TcpSockets.isTcp(-1), "no descriptor");
            assertFalse(TcpSockets.isTcp(udp.value()), "a UDP socket");
            assertFalse(TcpSockets.isTcp(write.value()) || TcpSockets.isTcp(b.value()));
        }
        try (OwnedFd file = OwnedFd.adopt(LibC.open(dir.toString(), 0, 0))) {
            assertFalse(TcpSockets.isTcp(file.value()), "a directory");
        }
    }

    @Test
    void aRefusedDialIsTheKernelsErrorAndLeavesNoDescriptor() throws IOException {
        int port;
        try (ServerSocket closed = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = closed.getLocalPort();
        }
        long before = openDescriptors();
        LinuxException refused = assertThrows(LinuxException.class,
                () -> TcpSockets.dial(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), WAIT));
        assertEquals(Errno.ECONNREFUSED, refused.errno());
        assertEquals(before, openDescriptors());
        assertFalse(refused.getMessage().isEmpty());
    }

    private static long openDescriptors() throws IOException {
        try (var list = Files.list(Path.of("/proc/self/fd"))) {
            return list.count();
        }
    }

    private static int intOption(int fd, int level, int name) {
        try (Memory value = new Memory(4); Memory length = new Memory(4)) {
            length.setInt(0, 4);
            LibC.check(LibC.getsockopt(fd, level, name, LibC.address(value), LibC.address(length)), "getsockopt");
            return value.getInt(0);
        }
    }
}
