package openshell.linux;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.jna.Memory;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The acceptance path: a process started through the launcher calls {@code connect()} to an
 * AF_INET address, the parent's listener sees it with readable sockaddr bytes and the caller's
 * executable, and answers with an errno, CONTINUE, an injected descriptor, or too late.
 */
class LauncherNotificationTest {
    private static final byte[] REMOTE = {10, 20, 30, 40};

    /** What the parent saw of the intercepted connect(). */
    record Seen(byte[] sockaddr, String executable, boolean validAfterInspection) {
    }

    private static Seen inspect(SeccompNotification n) {
        byte[] sockaddr = new byte[16];
        TaskMemory.probe().read(n.pid(), n.argument(1), sockaddr, 16);
        try {
            String exe = Files.readSymbolicLink(Path.of("/proc", Integer.toString(n.pid()), "exe")).toString();
            return new Seen(sockaddr, exe, true);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private static boolean isInet(SeccompNotification n) {
        if (n.syscall() != WorkloadFilter.NR_CONNECT) {
            return false;
        }
        byte[] family = new byte[2];
        TaskMemory.probe().read(n.pid(), n.argument(1), family, 2);
        return (family[0] & 0xff | (family[1] & 0xff) << 8) == WorkloadFilter.AF_INET;
    }

    private static void assertRemote(Seen seen, int port) {
        assertEquals(WorkloadFilter.AF_INET, seen.sockaddr()[0] & 0xff | (seen.sockaddr()[1] & 0xff) << 8);
        assertEquals(port, (seen.sockaddr()[2] & 0xff) << 8 | seen.sockaddr()[3] & 0xff);
        assertArrayEquals(REMOTE, Arrays.copyOfRange(seen.sockaddr(), 4, 8));
        assertEquals("/usr/bin/bash", seen.executable());
    }

    @Test
    void connectIsDeliveredWithSockaddrAndExecutableAndAnsweredWithAnErrno() throws Exception {
        CompletableFuture<Seen> seen = new CompletableFuture<>();
        Launches.Outcome outcome = Launches.run(Launches.bash(
                "if exec 3<>/dev/tcp/10.20.30.40/8080; then echo connected; else echo refused; fi").build(),
                (listener, n) -> {
                    if (!isInet(n)) {
                        return Launches.continueAll(listener, n);
                    }
                    Seen s = inspect(n);
                    seen.complete(new Seen(s.sockaddr(), s.executable(), listener.isValid(n.id())));
                    listener.respondErrno(n.id(), Errno.ECONNREFUSED);
                    return true;
                });
        assertInstanceOf(LaunchResult.Started.class, outcome.started(), outcome.ready() + "\n" + outcome.output());
        Seen s = seen.get(Launches.WAIT.toSeconds(), TimeUnit.SECONDS);
        assertRemote(s, 8080);
        assertTrue(s.validAfterInspection(), "the caller was still blocked while we read its memory");
        assertTrue(outcome.output().contains("Connection refused"), outcome.output());
        assertTrue(outcome.output().contains("refused"), outcome.output());
    }

    @Test
    void continueLetsTheConnectReachItsDestination() throws Exception {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            server.setSoTimeout((int) Launches.WAIT.toMillis());
            CompletableFuture<String> received = CompletableFuture.supplyAsync(() -> readLine(server));
            Launches.Outcome outcome = Launches.run(Launches.bash(
                    "exec 3<>/dev/tcp/127.0.0.1/" + server.getLocalPort() + " && echo over-continue >&3").build(),
                    Launches::continueAll);
            assertInstanceOf(LaunchResult.Started.class, outcome.started());
            assertEquals(new ChildExit(0, 0), outcome.exit(), outcome.output());
            assertEquals("over-continue", received.get(Launches.WAIT.toSeconds(), TimeUnit.SECONDS));
        }
    }

    @Test
    void addFdInjectsTheParentsSocketIntoTheBlockedConnect() throws Exception {
        try (ServerSocket relay = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            relay.setSoTimeout((int) Launches.WAIT.toMillis());
            CompletableFuture<String> received = CompletableFuture.supplyAsync(() -> readLine(relay));
            CompletableFuture<Seen> seen = new CompletableFuture<>();
            Launches.Outcome outcome = Launches.run(Launches.bash(
                    "exec 3<>/dev/tcp/10.20.30.40/443 && echo via-relay >&3").build(),
                    (listener, n) -> {
                        if (!isInet(n)) {
                            return Launches.continueAll(listener, n);
                        }
                        seen.complete(inspect(n));
                        int ours = LibC.socket(WorkloadFilter.AF_INET, WorkloadFilter.SOCK_STREAM | 0x80000, 0);
                        try (Memory address = Sockaddrs.inet4(new byte[] {127, 0, 0, 1}, relay.getLocalPort())) {
                            LibC.check(LibC.connect(ours, LibC.address(address), 16), "connect(relay)");
                            if (listener.injectFd(n.id(), ours, (int) n.argument(0), false)) {
                                listener.respondValue(n.id(), 0);
                            }
                        } finally {
                            LibC.close(ours);
                        }
                        return true;
                    });
            assertInstanceOf(LaunchResult.Started.class, outcome.started());
            assertEquals(new ChildExit(0, 0), outcome.exit(), outcome.output());
            assertRemote(seen.get(Launches.WAIT.toSeconds(), TimeUnit.SECONDS), 443);
            assertEquals("via-relay", received.get(Launches.WAIT.toSeconds(), TimeUnit.SECONDS));
        }
    }

    @Test
    void anAnswerAfterTheCallerDiedIsDetectedByIdValid() throws Exception {
        CompletableFuture<boolean[]> checks = new CompletableFuture<>();
        Launches.Outcome outcome = Launches.run(Launches.bash("exec 3<>/dev/tcp/10.20.30.40/22; echo not-reached").build(),
                (listener, n) -> {
                    if (!isInet(n)) {
                        return Launches.continueAll(listener, n);
                    }
                    boolean before = listener.isValid(n.id());
                    try (Pidfd caller = Pidfd.open(n.pid())) {
                        caller.signal(9);
                        boolean dead = caller.awaitTermination(Launches.WAIT);
                        checks.complete(new boolean[] {before, dead, listener.isValid(n.id()),
                            listener.respondErrno(n.id(), Errno.ECONNREFUSED)});
                    }
                    return false;
                });
        boolean[] c = checks.get(Launches.WAIT.toSeconds(), TimeUnit.SECONDS);
        assertTrue(c[0], "valid while the caller is blocked");
        assertTrue(c[1], "the caller died");
        assertFalse(c[2], "ID_VALID reports the dead caller's notification as gone");
        assertFalse(c[3], "the late answer is refused, not applied");
        assertEquals(new ChildExit(-1, 9), outcome.exit());
        assertFalse(outcome.output().contains("not-reached"), outcome.output());
    }

    private static String readLine(ServerSocket server) {
        try (Socket accepted = server.accept(); InputStream in = accepted.getInputStream()) {
            accepted.setSoTimeout((int) Launches.WAIT.toMillis());
            return new String(in.readAllBytes(), StandardCharsets.UTF_8).trim();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
