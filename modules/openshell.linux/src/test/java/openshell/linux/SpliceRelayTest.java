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
import java.net.SocketException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** SpliceRelay on real TCP loopback connections and Unix socket pairs. */
class SpliceRelayTest {
    static final Duration WAIT = Duration.ofSeconds(30);
    private static final byte[] LOOPBACK = {127, 0, 0, 1};
    private static final int SO_SNDBUF = 7;
    private static final int SO_RCVBUF = 8;
    private static final int SMALL_BUFFER = 64 * 1024;

    /** A socket the relay gets (connected with LibC) and the Java socket at its far end. */
    record Tcp(OwnedFd near, Socket far) {
    }

    /** Records the outcome, how often and on which thread the callback ran. */
    static final class Capture implements Consumer<SpliceRelay.Outcome> {
        final CompletableFuture<SpliceRelay.Outcome> outcome = new CompletableFuture<>();
        final AtomicInteger calls = new AtomicInteger();
        volatile String thread = "";

        @Override
        public void accept(SpliceRelay.Outcome value) {
            calls.incrementAndGet();
            thread = Thread.currentThread().getName();
            outcome.complete(value);
        }

        SpliceRelay.Outcome await() throws Exception {
            return outcome.get(WAIT.toSeconds(), TimeUnit.SECONDS);
        }
    }

    static ServerSocket listen() throws IOException {
        return listen(0);
    }

    /** A loopback listener; a positive {@code receiveBuffer} fixes accepted sockets' SO_RCVBUF. */
    static ServerSocket listen(int receiveBuffer) throws IOException {
        ServerSocket server = new ServerSocket();
        if (receiveBuffer > 0) {
            server.setReceiveBufferSize(receiveBuffer);
        }
        server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 64);
        server.setSoTimeout((int) WAIT.toMillis());
        return server;
    }

    static Tcp connect(ServerSocket server) throws IOException {
        return connect(server, 0);
    }

    /** Connects a LibC socket to {@code server}; a positive {@code buffer} fixes its SO_SNDBUF and SO_RCVBUF. */
    static Tcp connect(ServerSocket server, int buffer) throws IOException {
        OwnedFd near = dial(server, buffer);
        Socket far = server.accept();
        far.setSoTimeout((int) WAIT.toMillis());
        return new Tcp(near, far);
    }

    /** A LibC socket connected to {@code server} (which accepts it elsewhere). */
    static OwnedFd dial(ServerSocket server, int buffer) {
        OwnedFd near = OwnedFd.adopt(LibC.check(LibC.socket(WorkloadFilter.AF_INET,
                WorkloadFilter.SOCK_STREAM | UnixSockets.SOCK_CLOEXEC, 0), "socket"));
        try (Memory address = Sockaddrs.inet4(LOOPBACK, server.getLocalPort()); Memory size = new Memory(4)) {
            if (buffer > 0) {
                size.setInt(0, buffer);
                LibC.check(LibC.setsockopt(near.value(), UnixSockets.SOL_SOCKET, SO_SNDBUF, LibC.address(size), 4), "SO_SNDBUF");
                LibC.check(LibC.setsockopt(near.value(), UnixSockets.SOL_SOCKET, SO_RCVBUF, LibC.address(size), 4), "SO_RCVBUF");
            }
            LibC.check(LibC.connect(near.value(), LibC.address(address), 16), "connect");
        } catch (LinuxException e) {
            near.close();
            throw e;
        }
        return near;
    }

    /** A connected pair of Unix stream sockets: the relay takes {@code get(0)}, the test keeps {@code get(1)}. */
    static List<OwnedFd> unixPair() {
        int[] fds = new int[2];
        LibC.check(LibC.socketpair(UnixSockets.AF_UNIX, UnixSockets.SOCK_STREAM | UnixSockets.SOCK_CLOEXEC, 0, fds), "socketpair");
        return List.of(OwnedFd.adopt(fds[0]), OwnedFd.adopt(fds[1]));
    }

    static byte[] random(int size, long seed) {
        byte[] data = new byte[size];
        new Random(seed).nextBytes(data);
        return data;
    }

    static byte[] sha256(byte[] data) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(data);
        } catch (NoSuchAlgorithmException e) {
            throw new AssertionError(e);
        }
    }

    static byte[] ascii(String text) {
        return text.getBytes(StandardCharsets.US_ASCII);
    }

    static long openDescriptors() throws IOException {
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            return fds.count();
        }
    }

    /** The loop thread's kernel task id, learnt from a callback (callbacks run on the loop thread). */
    static int loopTaskId(SpliceRelay relay) throws Exception {
        CompletableFuture<Integer> tid = new CompletableFuture<>();
        List<OwnedFd> a = unixPair();
        List<OwnedFd> b = unixPair();
        try {
            relay.add(a.get(0), b.get(0), outcome -> tid.complete((int) LibC.syscall(LibC.SYS_GETTID, 0, 0, 0, 0, 0, 0))).close();
            return tid.get(WAIT.toSeconds(), TimeUnit.SECONDS);
        } finally {
            a.get(1).close();
            b.get(1).close();
        }
    }

    /** CPU time a task has used ({@code schedstat}: this module cannot read java.management's ThreadMXBean). */
    static long cpuNanos(int taskId) throws IOException {
        String schedstat = Files.readString(Path.of("/proc/self/task/" + taskId + "/schedstat"));
        return Long.parseLong(schedstat.substring(0, schedstat.indexOf(' ')));
    }

    @Test
    void bytesFlowBothWaysUnchangedAndInOrder() throws Exception {
        byte[] up = random(4 << 20, 1);
        byte[] down = random(3 << 20 | 12345, 2);
        Capture done = new Capture();
        try (SpliceRelay relay = SpliceRelay.start("relay-both-ways"); ServerSocket workloadSide = listen();
             ServerSocket upstream = listen(); ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
            Tcp a = connect(workloadSide);
            Tcp b = connect(upstream);
            SpliceRelay.Handle handle = relay.add(a.near(), b.near(), done);
            assertFalse(a.near().isOpen(), "the relay owns the descriptor now");
            try (Socket workload = a.far(); Socket server = b.far()) {
                Future<?> sendUp = pool.submit(() -> {
                    workload.getOutputStream().write(up);
                    workload.shutdownOutput();
                    return null;
                });
                Future<?> sendDown = pool.submit(() -> {
                    server.getOutputStream().write(down);
                    server.shutdownOutput();
                    return null;
                });
                Future<byte[]> receivedUp = pool.submit(() -> server.getInputStream().readAllBytes());
                Future<byte[]> receivedDown = pool.submit(() -> workload.getInputStream().readAllBytes());
                assertArrayEquals(sha256(up), sha256(receivedUp.get(WAIT.toSeconds(), TimeUnit.SECONDS)));
                assertArrayEquals(sha256(down), sha256(receivedDown.get(WAIT.toSeconds(), TimeUnit.SECONDS)));
                sendUp.get(WAIT.toSeconds(), TimeUnit.SECONDS);
                sendDown.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            }
            assertEquals(new SpliceRelay.Outcome(up.length, down.length, Optional.empty()), done.await());
            assertEquals("relay-both-ways", done.thread, "callbacks run on the loop thread");
            assertEquals(1, done.calls.get());
            assertFalse(handle.isOpen());
            assertEquals(0, relay.open());
        }
    }

    @Test
    void splicesAtTheChunkAndTurnBoundsKeepEveryByte() throws Exception {
        int[] sizes = {1, SpliceRelay.CHUNK_BYTES - 1, SpliceRelay.CHUNK_BYTES, SpliceRelay.CHUNK_BYTES + 1,
                SpliceRelay.TURN_BYTES, SpliceRelay.TURN_BYTES + 1, 3 * SpliceRelay.TURN_BYTES + 7};
        try (SpliceRelay relay = SpliceRelay.start("relay-bounds"); ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
            for (int size : sizes) {
                List<OwnedFd> a = unixPair();
                List<OwnedFd> b = unixPair();
                Capture done = new Capture();
                relay.add(a.get(0), b.get(0), done);
                byte[] data = random(size, size);
                try (OwnedFd workload = a.get(1); OwnedFd server = b.get(1)) {
                    Future<?> send = pool.submit(() -> {
                        workload.write(data);
                        LibC.check(LibC.shutdown(workload.value(), 1), "shutdown");
                        return null;
                    });
                    assertArrayEquals(sha256(data), sha256(server.readToEnd(size + 1, WAIT)), "size " + size);
                    send.get(WAIT.toSeconds(), TimeUnit.SECONDS);
                    LibC.check(LibC.shutdown(server.value(), 1), "shutdown");
                    assertEquals(new SpliceRelay.Outcome(size, 0, Optional.empty()), done.await());
                    assertEquals(0, workload.readToEnd(1, WAIT).length);
                }
            }
        }
    }

    @Test
    void aReceiverThatDoesNotReadStopsItsSenderWithBoundedBuffering() throws Exception {
        int total = 16 << 20;
        byte[] data = random(total, 3);
        AtomicLong written = new AtomicLong();
        Capture done = new Capture();
        try (SpliceRelay relay = SpliceRelay.start("relay-backpressure"); ServerSocket workloadSide = listen();
             ServerSocket upstream = listen(SMALL_BUFFER); ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
            int loop = loopTaskId(relay);
            Tcp a = connect(workloadSide, SMALL_BUFFER);
            Tcp b = connect(upstream, SMALL_BUFFER);
            relay.add(a.near(), b.near(), done);
            try (Socket workload = a.far(); Socket server = b.far()) {
                workload.setSendBufferSize(SMALL_BUFFER);
                Future<?> send = pool.submit(() -> {
                    OutputStream out = workload.getOutputStream();
                    for (int offset = 0; offset < total; offset += 16 * 1024) {
                        out.write(data, offset, 16 * 1024);
                        written.addAndGet(16 * 1024);
                    }
                    workload.shutdownOutput();
                    return null;
                });
                // Waits (bounded) for the writer to stall; if the relay buffered without bound it never would.
                long deadline = System.nanoTime() + WAIT.toNanos();
                long last = -1;
                int unchanged = 0;
                while (unchanged < 5) {
                    assertTrue(System.nanoTime() < deadline, "the writer never stalled");
                    assertTrue(written.get() < total, "everything was accepted while nobody read");
                    Thread.sleep(100);
                    long now = written.get();
                    unchanged = now == last ? unchanged + 1 : 0;
                    last = now;
                }
                // Socket buffers of ~128 KiB each (the kernel doubles 64 KiB) and one 64 KiB pipe.
                assertTrue(last < 4 << 20, "buffered " + last + " bytes");
                long cpuBefore = cpuNanos(loop);
                long wallBefore = System.nanoTime();
                Thread.sleep(300);
                long cpu = cpuNanos(loop) - cpuBefore;
                long wall = System.nanoTime() - wallBefore;
                assertTrue(cpu * 10 <= wall, "the loop spun while blocked: " + cpu + " ns of CPU in " + wall + " ns");
                assertTrue(relay.open() == 1 && !done.outcome.isDone());

                byte[] received = server.getInputStream().readAllBytes();
                assertArrayEquals(sha256(data), sha256(received));
                send.get(WAIT.toSeconds(), TimeUnit.SECONDS);
                server.shutdownOutput();
                assertEquals(-1, workload.getInputStream().read());
            }
            assertEquals(new SpliceRelay.Outcome(total, 0, Optional.empty()), done.await());
        }
    }

    @Test
    void halfCloseIsPassedOnAndTheOtherDirectionKeepsFlowing() throws Exception {
        Capture done = new Capture();
        try (SpliceRelay relay = SpliceRelay.start("relay-half-close"); ServerSocket workloadSide = listen();
             ServerSocket upstream = listen()) {
            Tcp a = connect(workloadSide);
            Tcp b = connect(upstream);
            SpliceRelay.Handle handle = relay.add(a.near(), b.near(), done);
            try (Socket workload = a.far(); Socket server = b.far()) {
                workload.getOutputStream().write(ascii("request"));
                workload.shutdownOutput();
                assertArrayEquals(ascii("request"), server.getInputStream().readAllBytes(), "request, then end of stream");
                assertTrue(handle.isOpen(), "one direction is still open");
                server.getOutputStream().write(ascii("response"));
                byte[] response = workload.getInputStream().readNBytes(8);
                assertArrayEquals(ascii("response"), response);
                assertTrue(handle.isOpen());
                server.shutdownOutput();
                assertEquals(-1, workload.getInputStream().read());
            }
            assertEquals(new SpliceRelay.Outcome(7, 8, Optional.empty()), done.await());
            assertFalse(handle.isOpen());
        }
    }

    @Test
    void aResetEndsTheRelayAndResetsTheOtherSide() throws Exception {
        Capture done = new Capture();
        try (SpliceRelay relay = SpliceRelay.start("relay-reset"); ServerSocket workloadSide = listen();
             ServerSocket upstream = listen()) {
            Tcp a = connect(workloadSide);
            Tcp b = connect(upstream);
            relay.add(a.near(), b.near(), done);
            Socket server = b.far();
            try (Socket workload = a.far()) {
                workload.getOutputStream().write(ascii("hello"));
                assertArrayEquals(ascii("hello"), server.getInputStream().readNBytes(5));
                server.setSoLinger(true, 0);
                server.close();
                SpliceRelay.Outcome outcome = done.await();
                assertEquals(5, outcome.bytesAtoB());
                assertTrue(outcome.error().orElseThrow().contains("ECONNRESET"), outcome.toString());
                InputStream in = workload.getInputStream();
                assertThrows(SocketException.class, in::read, "a cut stream must not look complete");
            }
            assertEquals(0, relay.open());
            assertEquals(1, done.calls.get());
        }
    }

    @Test
    void writingToAPeerThatHasGoneEndsTheRelayWithEpipe() throws Exception {
        Capture done = new Capture();
        try (SpliceRelay relay = SpliceRelay.start("relay-epipe")) {
            List<OwnedFd> a = unixPair();
            List<OwnedFd> b = unixPair();
            relay.add(a.get(0), b.get(0), done);
            try (OwnedFd workload = a.get(1)) {
                b.get(1).close();
                assertEquals(0, workload.readToEnd(1, WAIT).length, "the peer's end of stream is passed on");
                workload.write(ascii("late"));
                SpliceRelay.Outcome outcome = done.await();
                assertTrue(outcome.error().orElseThrow().contains("EPIPE"), outcome.toString());
            }
            assertEquals(0, relay.open());
        }
    }

    @Test
    void aHandleClosesItsRelayFromAnotherThreadOnce() throws Exception {
        Capture done = new Capture();
        try (SpliceRelay relay = SpliceRelay.start("relay-handle")) {
            List<OwnedFd> a = unixPair();
            List<OwnedFd> b = unixPair();
            SpliceRelay.Handle handle = relay.add(a.get(0), b.get(0), done);
            try (OwnedFd workload = a.get(1); OwnedFd server = b.get(1)) {
                workload.write(ascii("x"));
                byte[] one = new byte[1];
                assertEquals(1, server.read(one, WAIT));
                assertTrue(handle.isOpen());
                assertEquals(1, relay.open());
                Thread closer = Thread.ofPlatform().start(handle::close);
                closer.join();
                handle.close();
                assertEquals(new SpliceRelay.Outcome(1, 0, Optional.of(SpliceRelay.CLOSED_BY_HANDLE)), done.await());
                assertEquals("relay-handle", done.thread);
                assertFalse(handle.isOpen());
                assertEquals(0, relay.open());
                assertEquals(0, workload.readToEnd(1, WAIT).length, "closed");
                assertEquals(0, server.readToEnd(1, WAIT).length, "closed");
                handle.close();
            }
            assertEquals(1, done.calls.get());
        }
    }

    @Test
    void closingTheLoopEndsEveryRelayAndRefusesMore() throws Exception {
        SpliceRelay relay = SpliceRelay.start("relay-close-all");
        List<Capture> captures = new ArrayList<>();
        List<OwnedFd> farEnds = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                List<OwnedFd> a = unixPair();
                List<OwnedFd> b = unixPair();
                farEnds.add(a.get(1));
                farEnds.add(b.get(1));
                Capture done = new Capture();
                captures.add(done);
                relay.add(a.get(0), b.get(0), done);
            }
            relay.close();
            assertFalse(relay.thread().isAlive(), "close waits for the loop");
            for (Capture done : captures) {
                assertTrue(done.outcome.isDone(), "close ended every relay before returning");
                assertEquals(Optional.of(SpliceRelay.CLOSED_WITH_LOOP), done.await().error());
                assertEquals(1, done.calls.get());
            }
            for (OwnedFd far : farEnds) {
                assertEquals(0, far.readToEnd(1, WAIT).length);
            }
            assertEquals(0, relay.open());
            relay.close();

            List<OwnedFd> a = unixPair();
            List<OwnedFd> b = unixPair();
            Capture refused = new Capture();
            LinuxException e = assertThrows(LinuxException.class, () -> relay.add(a.get(0), b.get(0), refused));
            assertEquals(Errno.ECANCELED, e.errno());
            assertFalse(a.get(0).isOpen() || b.get(0).isOpen());
            try (OwnedFd farA = a.get(1); OwnedFd farB = b.get(1)) {
                assertEquals(0, farA.readToEnd(1, WAIT).length, "a refused socket is closed");
                assertEquals(0, farB.readToEnd(1, WAIT).length, "a refused socket is closed");
            }
            assertEquals(0, refused.calls.get());
        } finally {
            farEnds.forEach(OwnedFd::close);
        }
    }

    @Test
    void relaysPerLoopAreBounded() throws Exception {
        assertEquals(Errno.EINVAL, assertThrows(LinuxException.class,
                () -> SpliceRelay.start("relay-too-many", SpliceRelay.MAX_RELAYS + 1, SpliceRelay.CLOSE_WAIT)).errno());
        SpliceRelay.start("relay-max", SpliceRelay.MAX_RELAYS, SpliceRelay.CLOSE_WAIT).close();
        int max = 2;
        List<OwnedFd> farEnds = new ArrayList<>();
        try (SpliceRelay relay = SpliceRelay.start("relay-bounded", max, SpliceRelay.CLOSE_WAIT)) {
            List<SpliceRelay.Handle> handles = new ArrayList<>();
            List<Capture> captures = new ArrayList<>();
            for (int i = 0; i < max; i++) {
                List<OwnedFd> a = unixPair();
                List<OwnedFd> b = unixPair();
                farEnds.add(a.get(1));
                farEnds.add(b.get(1));
                Capture done = new Capture();
                captures.add(done);
                handles.add(relay.add(a.get(0), b.get(0), done));
            }
            assertEquals(max, relay.open());

            List<OwnedFd> a = unixPair();
            List<OwnedFd> b = unixPair();
            LinuxException e = assertThrows(LinuxException.class, () -> relay.add(a.get(0), b.get(0), new Capture()));
            assertEquals(Errno.EAGAIN, e.errno());
            assertFalse(a.get(0).isOpen() || b.get(0).isOpen());
            try (OwnedFd farA = a.get(1); OwnedFd farB = b.get(1)) {
                assertEquals(0, farA.readToEnd(1, WAIT).length, "the refused sockets are closed");
                assertEquals(0, farB.readToEnd(1, WAIT).length, "the refused sockets are closed");
            }
            assertEquals(max, relay.open());

            handles.get(0).close();
            captures.get(0).await();
            List<OwnedFd> c = unixPair();
            List<OwnedFd> d = unixPair();
            farEnds.add(c.get(1));
            farEnds.add(d.get(1));
            Capture again = new Capture();
            relay.add(c.get(0), d.get(0), again);
            farEnds.get(farEnds.size() - 2).write(ascii("ok"));
            byte[] two = new byte[2];
            assertEquals(2, farEnds.get(farEnds.size() - 1).read(two, WAIT), "a freed place is reused");
        } finally {
            farEnds.forEach(OwnedFd::close);
        }
    }

    @Test
    void refusedDescriptorsAreClosed() {
        try (SpliceRelay relay = SpliceRelay.start("relay-refusals")) {
            List<OwnedFd> a = unixPair();
            List<OwnedFd> b = unixPair();
            a.get(0).close();
            assertEquals(Errno.EBADF, assertThrows(LinuxException.class, () -> relay.add(a.get(0), b.get(0), new Capture())).errno());
            assertFalse(b.get(0).isOpen());
            List<OwnedFd> c = unixPair();
            OwnedFd alias = OwnedFd.adopt(c.get(0).value());
            assertEquals(Errno.EINVAL, assertThrows(LinuxException.class, () -> relay.add(c.get(0), alias, new Capture())).errno());
            assertFalse(c.get(0).isOpen() || alias.isOpen());
            assertEquals(0, c.get(1).readToEnd(1, WAIT).length);
            assertEquals(0, relay.open());
            a.get(1).close();
            b.get(1).close();
            c.get(1).close();
        }
    }

    @Test
    void closeWaitsForTheLoopAtMostCloseWait() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        SpliceRelay relay = SpliceRelay.start("relay-close-wait", 1, Duration.ofMillis(200));
        List<OwnedFd> a = unixPair();
        List<OwnedFd> b = unixPair();
        try {
            relay.add(a.get(0), b.get(0), outcome -> {
                try {
                    release.await(WAIT.toSeconds(), TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            assertEquals(Errno.ETIMEDOUT, assertThrows(LinuxException.class, relay::close).errno(),
                    "a blocking callback holds the loop");
            release.countDown();
            relay.close();
            assertFalse(relay.thread().isAlive());
        } finally {
            a.get(1).close();
            b.get(1).close();
        }
    }

    @Test
    void descriptorsDoNotLeakAcrossMoreRelaysThanOneWaitReturns() throws Exception {
        int count = SpliceRelay.EVENTS_PER_WAIT + 44;
        try (SpliceRelay warmUp = SpliceRelay.start("relay-warm-up")) {
            runPingPongs(warmUp, 2);
        }
        long before = openDescriptors();
        try (SpliceRelay relay = SpliceRelay.start("relay-leaks")) {
            runPingPongs(relay, count);
            assertEquals(0, relay.open());
        }
        assertEquals(before, openDescriptors());
    }

    /** {@code count} relays at once: each far end sends a word and half-closes, every relay ends cleanly. */
    private static void runPingPongs(SpliceRelay relay, int count) throws Exception {
        List<OwnedFd> farEnds = new ArrayList<>();
        List<Capture> captures = new ArrayList<>();
        try {
            for (int i = 0; i < count; i++) {
                List<OwnedFd> a = unixPair();
                List<OwnedFd> b = unixPair();
                farEnds.add(a.get(1));
                farEnds.add(b.get(1));
                Capture done = new Capture();
                captures.add(done);
                relay.add(a.get(0), b.get(0), done);
            }
            for (int i = 0; i < farEnds.size(); i++) {
                farEnds.get(i).write(ascii(i % 2 == 0 ? "ping" : "pong!"));
                LibC.check(LibC.shutdown(farEnds.get(i).value(), 1), "shutdown");
            }
            for (Capture done : captures) {
                assertEquals(new SpliceRelay.Outcome(4, 5, Optional.empty()), done.await());
            }
            for (int i = 0; i < farEnds.size(); i++) {
                assertArrayEquals(ascii(i % 2 == 0 ? "pong!" : "ping"), farEnds.get(i).readToEnd(16, WAIT));
            }
        } finally {
            farEnds.forEach(OwnedFd::close);
        }
    }

    @Test
    void idleRelaysDoNotWakeTheLoop() throws Exception {
        List<Socket> farEnds = new ArrayList<>();
        try (SpliceRelay relay = SpliceRelay.start("relay-idle"); ServerSocket workloadSide = listen();
             ServerSocket upstream = listen()) {
            int loop = loopTaskId(relay);
            for (int i = 0; i < 20; i++) {
                Tcp a = connect(workloadSide);
                Tcp b = connect(upstream);
                farEnds.add(a.far());
                farEnds.add(b.far());
                relay.add(a.near(), b.near(), new Capture());
            }
            // One round trip through the last relay: by then the loop has registered them all.
            farEnds.get(farEnds.size() - 2).getOutputStream().write(1);
            assertEquals(1, farEnds.get(farEnds.size() - 1).getInputStream().read());
            farEnds.get(farEnds.size() - 1).getOutputStream().write(2);
            assertEquals(2, farEnds.get(farEnds.size() - 2).getInputStream().read());
            Thread.sleep(500); // lets delayed ACKs of that round trip arrive

            long wakeups = relay.wakeups();
            long cpuBefore = cpuNanos(loop);
            long wallBefore = System.nanoTime();
            Thread.sleep(500);
            long cpu = cpuNanos(loop) - cpuBefore;
            long wall = System.nanoTime() - wallBefore;
            assertTrue(relay.wakeups() - wakeups <= 2, (relay.wakeups() - wakeups) + " wake-ups while idle");
            assertTrue(cpu * 10 <= wall, "the loop spun while idle: " + cpu + " ns of CPU in " + wall + " ns");
            assertEquals(20, relay.open());
        } finally {
            for (Socket far : farEnds) {
                far.close();
            }
        }
    }
}
