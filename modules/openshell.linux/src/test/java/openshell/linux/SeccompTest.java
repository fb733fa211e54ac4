package openshell.linux;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.jna.Memory;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** Seccomp filters and the notification ioctls, against the real kernel, on filtered threads. */
class SeccompTest {
    private static final Duration WAIT = FilteredThread.WAIT;

    @Test
    void notificationSizesComeFromTheKernel() {
        Seccomp.NotificationSizes sizes = Seccomp.notificationSizes();
        assertTrue(sizes.notification() >= 80, sizes.toString());
        assertTrue(sizes.response() >= 24, sizes.toString());
        assertEquals(64, sizes.data());
    }

    @Test
    void socketIsNotifiedWithItsArgumentsAndAnsweredWithAnErrno() throws Exception {
        FilteredThread thread = FilteredThread.start(WorkloadFilter.program(),
                () -> FilteredThread.call(() -> LibC.socket(WorkloadFilter.AF_INET, WorkloadFilter.SOCK_STREAM, 0)));
        try (SeccompListener listener = thread.listener) {
            assertTrue(listener.waitKillable(), "this kernel (6.18) has WAIT_KILLABLE_RECV");
            SeccompNotification notification = listener.newNotification();
            assertEquals(SeccompListener.Pending.NOTIFICATION, listener.awaitPending(WAIT));
            assertTrue(listener.receive(notification));
            assertEquals(WorkloadFilter.NR_SOCKET, notification.syscall());
            assertEquals(Seccomp.AUDIT_ARCH_X86_64, notification.arch());
            assertEquals(WorkloadFilter.AF_INET, notification.argument(0));
            assertEquals(WorkloadFilter.SOCK_STREAM, notification.argument(1));
            assertTrue(listener.isValid(notification.id()));
            assertTrue(listener.respondErrno(notification.id(), Errno.EACCES));
            assertArrayEquals(new long[] {-1, Errno.EACCES}, thread.await());
            assertFalse(listener.isValid(notification.id()), "an answered notification is no longer valid");
            assertFalse(listener.respondErrno(notification.id(), Errno.EACCES), "a second answer is refused as ENOENT");
        }
    }

    @Test
    void continueLetsTheKernelRunTheCall() throws Exception {
        FilteredThread thread = FilteredThread.start(WorkloadFilter.program(), () -> {
            long[] created = FilteredThread.call(() -> LibC.socket(WorkloadFilter.AF_INET, WorkloadFilter.SOCK_DGRAM, 0));
            if (created[0] >= 0) {
                LibC.close((int) created[0]);
            }
            return created;
        });
        try (SeccompListener listener = thread.listener) {
            SeccompNotification notification = listener.newNotification();
            assertEquals(SeccompListener.Pending.NOTIFICATION, listener.awaitPending(WAIT));
            assertTrue(listener.receive(notification));
            assertTrue(listener.respondContinue(notification.id()));
            long[] result = thread.await();
            assertTrue(result[0] >= 0, "socket() ran after CONTINUE: " + result[0] + " errno " + result[1]);
        }
    }

    @Test
    void filterDeniesRawAndForeignFamiliesAndIoUringWithoutNotifying() throws Exception {
        FilteredThread thread = FilteredThread.start(WorkloadFilter.program(), () -> {
            long[] raw = FilteredThread.call(() -> LibC.socket(WorkloadFilter.AF_INET, 3, 1));
            long[] packet = FilteredThread.call(() -> LibC.socket(17, 3, 0));
            long[] icmp = FilteredThread.call(() -> LibC.socket(WorkloadFilter.AF_INET, WorkloadFilter.SOCK_DGRAM, 1));
            long[] uring = new long[] {LibC.syscall(WorkloadFilter.NR_IO_URING_SETUP, 1, 0, 0, 0, 0, 0), LibC.errno()};
            long[] unix = FilteredThread.call(() -> LibC.socket(WorkloadFilter.AF_UNIX, WorkloadFilter.SOCK_STREAM, 0));
            if (unix[0] >= 0) {
                LibC.close((int) unix[0]);
            }
            return new long[] {raw[0], raw[1], packet[0], packet[1], icmp[0], icmp[1], uring[0], uring[1], unix[0]};
        });
        try (SeccompListener listener = thread.listener) {
            // Completing without any answer from us proves none of these calls was notified.
            long[] r = thread.await();
            assertTrue(listener.fd().isOpen());
            assertArrayEquals(new long[] {-1, Errno.EPERM, -1, Errno.EAFNOSUPPORT, -1, Errno.EPERM, -1, Errno.EPERM},
                    java.util.Arrays.copyOf(r, 8));
            assertTrue(r[8] >= 0, "AF_UNIX sockets are allowed without a notification");
        }
    }

    /**
     * Without the filter, joining a fresh session keyring succeeds for any user, and the other
     * calls fail with EFAULT (null arguments) or as the host's sysctls say: the filter's EPERM
     * comes first, whatever the host allows.
     */
    @Test
    void filterRefusesKeyringsBpfPerfAndUserfaultfdOnTheRealKernel() throws Exception {
        FilteredThread thread = FilteredThread.start(WorkloadFilter.program(), () -> {
            int[] calls = {WorkloadFilter.NR_KEYCTL, WorkloadFilter.NR_ADD_KEY, WorkloadFilter.NR_REQUEST_KEY,
                    WorkloadFilter.NR_PERF_EVENT_OPEN, WorkloadFilter.NR_BPF, WorkloadFilter.NR_USERFAULTFD};
            long[] results = new long[calls.length * 2];
            for (int i = 0; i < calls.length; i++) {
                // keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL): a new anonymous session keyring; the rest get nulls.
                long first = calls[i] == WorkloadFilter.NR_KEYCTL ? 1 : 0;
                results[2 * i] = LibC.syscall(calls[i], first, 0, 0, 0, 0, 0);
                results[2 * i + 1] = LibC.errno();
            }
            return results;
        });
        try (SeccompListener listener = thread.listener) {
            // Completing without any answer from us proves none of these calls was notified.
            long[] r = thread.await();
            assertTrue(listener.fd().isOpen());
            long[] refused = new long[r.length];
            for (int i = 0; i < refused.length; i += 2) {
                refused[i] = -1;
                refused[i + 1] = Errno.EPERM;
            }
            assertArrayEquals(refused, r);
        }
    }

    @Test
    void addFdInjectsOurConnectedSocketAndASeparateSendReturnsZero() throws Exception {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            int port = server.getLocalPort();
            FilteredThread thread = FilteredThread.start(WorkloadFilter.program(), () -> {
                int fd = LibC.socket(WorkloadFilter.AF_INET, WorkloadFilter.SOCK_STREAM, 0);
                if (fd < 0) {
                    return new long[] {fd, LibC.errno()};
                }
                try (Memory address = Sockaddrs.inet4(new byte[] {10, 1, 2, 3}, 80)) {
                    int rc = LibC.connect(fd, LibC.address(address), 16);
                    if (rc < 0) {
                        return new long[] {rc, LibC.errno()};
                    }
                    byte[] hello = "hello".getBytes(StandardCharsets.US_ASCII);
                    try (Memory data = new Memory(hello.length)) {
                        data.write(0, hello, 0, hello.length);
                        return new long[] {rc, 0, LibC.write(fd, LibC.address(data), hello.length)};
                    }
                } finally {
                    LibC.close(fd);
                }
            });
            try (SeccompListener listener = thread.listener) {
                SeccompNotification notification = listener.newNotification();
                assertEquals(SeccompListener.Pending.NOTIFICATION, listener.awaitPending(WAIT));
                assertTrue(listener.receive(notification));
                assertEquals(WorkloadFilter.NR_SOCKET, notification.syscall());
                assertTrue(listener.respondContinue(notification.id()));

                assertEquals(SeccompListener.Pending.NOTIFICATION, listener.awaitPending(WAIT));
                assertTrue(listener.receive(notification));
                assertEquals(WorkloadFilter.NR_CONNECT, notification.syscall());
                int targetFd = (int) notification.argument(0);
                byte[] sockaddr = new byte[16];
                assertEquals(16, TaskMemory.probe().read(notification.pid(), notification.argument(1), sockaddr, 16));
                assertEquals(WorkloadFilter.AF_INET, sockaddr[0] | sockaddr[1] << 8);
                assertEquals(80, (sockaddr[2] & 0xff) << 8 | sockaddr[3] & 0xff);
                assertArrayEquals(new byte[] {10, 1, 2, 3}, java.util.Arrays.copyOfRange(sockaddr, 4, 8));
                assertTrue(listener.isValid(notification.id()));

                int ours = LibC.socket(WorkloadFilter.AF_INET, WorkloadFilter.SOCK_STREAM | 0x80000, 0);
                try (Memory relay = Sockaddrs.inet4(new byte[] {127, 0, 0, 1}, port)) {
                    assertEquals(0, LibC.connect(ours, LibC.address(relay), 16));
                    assertTrue(listener.injectFd(notification.id(), ours, targetFd, false));
                    assertTrue(listener.respondValue(notification.id(), 0));
                } finally {
                    LibC.close(ours);
                }
                assertArrayEquals(new long[] {0, 0, 5}, thread.await(), "connect() returned 0, the write went through our socket");
                server.setSoTimeout((int) WAIT.toMillis());
                try (Socket accepted = server.accept(); InputStream in = accepted.getInputStream()) {
                    accepted.setSoTimeout((int) WAIT.toMillis());
                    assertEquals("hello", new String(in.readNBytes(5), StandardCharsets.US_ASCII));
                }
            }
        }
    }

    @Test
    void installRefusesAnInvalidProgramWithEinval() throws Exception {
        BpfProgram fallsOffTheEnd = BpfProgram.builder().loadNr().build();
        java.util.concurrent.CompletableFuture<LinuxException> failure = new java.util.concurrent.CompletableFuture<>();
        Thread.ofPlatform().start(() -> {
            ProcessControl.setNoNewPrivileges();
            try {
                Seccomp.installWithListener(fallsOffTheEnd).close();
                failure.complete(null);
            } catch (LinuxException e) {
                failure.complete(e);
            }
        });
        LinuxException e = failure.get(30, java.util.concurrent.TimeUnit.SECONDS);
        assertEquals(Errno.EINVAL, e.errno());
        assertTrue(e.getMessage().contains("seccomp(SET_MODE_FILTER, NEW_LISTENER)"), e.getMessage());
        assertTrue(e.getMessage().contains("EINVAL"), e.getMessage());
    }

    @Test
    void errnoActionIsBounded() {
        assertEquals(Seccomp.RET_ERRNO | 4095, Seccomp.errno(4095));
        assertThrows(LinuxException.class, () -> Seccomp.errno(4096));
        assertThrows(LinuxException.class, () -> Seccomp.errno(0));
    }
}
