package openshell.linux;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Namespaces on dedicated threads (net, uts, ipc are per thread) and in children. */
class NamespacesTest {

    @Test
    void freshNetworkNamespaceOnAThreadGetsLoopbackUpWithoutTheIpBinary() throws Exception {
        long hostNet = Namespaces.current(NamespaceType.NET);
        String result = CapabilitiesTest.onFreshThread(() -> {
            try (OwnedFd original = Namespaces.openCurrent(NamespaceType.NET)) {
                Namespaces.unshare(NamespaceType.NET);
                long fresh = Namespaces.current(NamespaceType.NET);
                boolean upBefore = Namespaces.loopbackUp();
                Namespaces.bringLoopbackUp();
                boolean upAfter = Namespaces.loopbackUp();
                String echo;
                try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
                     Socket client = new Socket(InetAddress.getLoopbackAddress(), server.getLocalPort());
                     Socket accepted = server.accept()) {
                    client.getOutputStream().write(7);
                    echo = "read " + accepted.getInputStream().read();
                } catch (java.io.IOException e) {
                    echo = e.toString();
                }
                Namespaces.enter(NamespaceType.NET, original);
                return (fresh != hostNet) + " " + upBefore + " " + upAfter + " " + echo + " back "
                        + (Namespaces.current(NamespaceType.NET) == hostNet);
            }
        });
        assertEquals("true false true read 7 back true", result);
        assertEquals(hostNet, Namespaces.current(NamespaceType.NET), "the test thread never moved");
    }

    @Test
    void utsAndIpcNamespacesArePerThread() throws Exception {
        long uts = Namespaces.current(NamespaceType.UTS);
        long ipc = Namespaces.current(NamespaceType.IPC);
        long[] fresh = CapabilitiesTest.onFreshThread(() -> {
            Namespaces.unshare(NamespaceType.UTS, NamespaceType.IPC);
            return new long[] {Namespaces.current(NamespaceType.UTS), Namespaces.current(NamespaceType.IPC)};
        });
        assertNotEquals(uts, fresh[0]);
        assertNotEquals(ipc, fresh[1]);
    }

    @Test
    void aMultithreadedJvmCannotCreateAUserNamespaceNorEnterAMountNamespace() throws Exception {
        LinuxException e = CapabilitiesTest.onFreshThread(() -> assertThrows(LinuxException.class,
                () -> Namespaces.unshare(NamespaceType.USER)));
        assertEquals(Errno.EINVAL, e.errno());
        assertTrue(e.getMessage().contains("unshare([USER]) failed: EINVAL"), e.getMessage());
        LinuxException mount = CapabilitiesTest.onFreshThread(() -> {
            try (OwnedFd ns = Namespaces.openCurrent(NamespaceType.MOUNT)) {
                return assertThrows(LinuxException.class, () -> Namespaces.enter(NamespaceType.MOUNT, ns));
            }
        });
        assertEquals(Errno.EINVAL, mount.errno());
        long hostMount = Namespaces.current(NamespaceType.MOUNT);
        assertNotEquals(hostMount, (long) CapabilitiesTest.onFreshThread(() -> {
            Namespaces.unshare(NamespaceType.MOUNT);
            return Namespaces.current(NamespaceType.MOUNT);
        }), "unshare of a mount namespace is per thread and works");
    }

    @Test
    void setnsIntoAChildsNetworkNamespaceAndWriteIdMaps() throws Exception {
        try (ChildProcess child = ChildProcess.builder("/usr/bin/unshare")
                .argv(List.of("unshare", "--user", "--net", "/usr/bin/sleep", "60")).spawn()) {
            try {
                long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
                while (Namespaces.of(child.pid(), NamespaceType.NET) == Namespaces.current(NamespaceType.NET)) {
                    assertTrue(System.nanoTime() < deadline, "unshare(1) did not create its namespaces");
                    Thread.onSpinWait();
                }
                Namespaces.writeIdMaps(child.pid(), List.of(new Namespaces.IdMapping(0, 100000, 1000)),
                        List.of(new Namespaces.IdMapping(0, 100000, 1000)), true);
                assertEquals("0 100000 1000", Files.readString(Path.of("/proc/" + child.pid() + "/uid_map")).trim().replaceAll("\\s+", " "));
                long childNet = Namespaces.of(child.pid(), NamespaceType.NET);
                long joined = CapabilitiesTest.onFreshThread(() -> {
                    try (OwnedFd ns = Namespaces.open(child.pid(), NamespaceType.NET)) {
                        Namespaces.enter(NamespaceType.NET, ns);
                        return Namespaces.current(NamespaceType.NET);
                    }
                });
                assertEquals(childNet, joined);
            } finally {
                child.pidfd().signal(9);
                child.awaitExit(Duration.ofSeconds(30));
            }
        }
    }

    @Test
    void idMapsAreBounded() {
        List<Namespaces.IdMapping> tooMany = java.util.stream.IntStream.range(0, Namespaces.MAX_ID_MAP_LINES + 1)
                .mapToObj(i -> new Namespaces.IdMapping(i, 100000 + i, 1)).toList();
        LinuxException e = assertThrows(LinuxException.class, () -> Namespaces.writeIdMaps(1, tooMany, tooMany, false));
        assertEquals(Errno.EINVAL, e.errno());
        assertThrows(LinuxException.class, () -> new Namespaces.IdMapping(0, 0, 0));
        assertFalse(Namespaces.current(NamespaceType.PID) == 0);
    }
}
