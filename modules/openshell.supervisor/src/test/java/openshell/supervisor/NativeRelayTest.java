package openshell.supervisor;

import static openshell.supervisor.Fixture.WAIT;
import static openshell.supervisor.Fixture.loopback;
import static openshell.supervisor.Fixture.who;
import static openshell.supervisor.PolicyReloadTest.cut;
import static openshell.supervisor.PolicyReloadTest.roundTrip;
import static openshell.supervisor.TcpMediationTest.tcpPolicy;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import openshell.isolation.DenyReason;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Opaque connections handed off over the descriptor channel and relayed natively
 * ({@link SpliceRelay}): the same admission, audit, revocation and half-close as a relay over the
 * link, and everything inspected still relayed over the link. Workload side: the
 * {@link TestMediationSource} double passing a real socket over a real channel; upstream: a real
 * loopback echo server.
 */
@Timeout(120)
class NativeRelayTest {
    @Test
    void anAllowedOpaqueConnectionIsRelayedNativelyBothWaysAndHalfCloses(@TempDir Path dir) throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.startNative(tcpPolicy("echo.test", echo.port()), dir,
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test"))))) {
            f.resolve(who("/usr/bin/nc"), "echo.test");
            byte[] data = new byte[3 << 20];
            new Random(7).nextBytes(data);
            try (Socket s = f.connect(who("/usr/bin/nc"), loopback(), echo.port())) {
                assertTrue(f.lastAudit("connect").contains("\"relay\":\"native\""), f.lastAudit("connect"));
                Thread writer = Thread.ofVirtual().start(() -> {
                    try {
                        s.getOutputStream().write(data);
                        s.shutdownOutput();
                    } catch (IOException e) {
                        throw new java.io.UncheckedIOException(e);
                    }
                });
                byte[] back = s.getInputStream().readAllBytes();
                writer.join(WAIT.toMillis());
                assertArrayEquals(data, back, "every byte came back, then the echo's half-close");
            }
            awaitNoRelays(f);
        }
    }

    @Test
    void aReloadThatDropsTheEndpointCutsTheNativeRelay(@TempDir Path dir) throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.startNative(tcpPolicy("echo.test", echo.port()), dir,
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test", "other.test"))))) {
            f.resolve(who("/usr/bin/nc"), "echo.test");
            try (Socket s = f.connect(who("/usr/bin/nc"), loopback(), echo.port())) {
                roundTrip(s);
                ReloadReport report = f.policies.reload(tcpPolicy("other.test", echo.port()).getBytes(StandardCharsets.UTF_8));
                assertEquals(ReloadReport.Outcome.LOADED, report.outcome(), report.reasons().toString());
                assertTrue(cut(s), "the native relay is closed");
                assertTrue(f.lastAudit("revoke").contains("\"cause\":\"REVOKED\""));
            }
            awaitNoRelays(f);
        }
    }

    @Test
    void closingTheMediationCutsNativeRelays(@TempDir Path dir) throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer()) {
            Socket s;
            try (Fixture f = Fixture.startNative(tcpPolicy("echo.test", echo.port()), dir,
                    b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test"))))) {
                f.resolve(who("/usr/bin/nc"), "echo.test");
                s = f.connect(who("/usr/bin/nc"), loopback(), echo.port());
                roundTrip(s);
            }
            try (s) {
                assertTrue(cut(s), "the mediation's end closes its native relays");
            }
        }
    }

    @Test
    void inspectedEndpointsStayOnTheLinkEvenWhenAHandoffIsPossible(@TempDir Path dir) throws Exception {
        io.helidon.webserver.WebServer upstream = Fixture.httpUpstream();
        try (Fixture f = Fixture.startNative(HttpMediationTest.restPolicy(upstream.port()), dir,
                b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("api.test"))))) {
            f.resolve(who("/usr/bin/curl"), "api.test");
            try (Socket s = f.connect(who("/usr/bin/curl"), loopback(), upstream.port())) {
                assertFalse(f.source.handed.getLast().handedOff.get(WAIT.toSeconds(), TimeUnit.SECONDS),
                        "an L7 endpoint is relayed through the supervisor's HTTP relay, not handed off");
                Fixture.send(s, "GET /repos/acme/x HTTP/1.1\r\nHost: api.test\r\n\r\n");
                assertEquals(200, Fixture.read(new HttpInput(s.getInputStream(), 4096), "GET").status());
            }
        } finally {
            upstream.stop();
        }
    }

    @Test
    void anUpstreamThatRefusesDeniesTheConnectAndLeavesNothingWaiting(@TempDir Path dir) throws Exception {
        int closedPort;
        try (ServerSocket closed = new ServerSocket(0, 1, loopback())) {
            closedPort = closed.getLocalPort();
        }
        try (Fixture f = Fixture.startNative(tcpPolicy("echo.test", closedPort), dir,
                b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test"))))) {
            f.resolve(who("/usr/bin/nc"), "echo.test");
            assertEquals(DenyReason.MEDIATION_UNAVAILABLE, f.denied(who("/usr/bin/nc"), loopback(), closedPort));
            assertTrue(f.lastAudit("connect").contains("\"upstream\":\"failed\""), f.lastAudit("connect"));
            assertEquals(0, f.mediation.handoffsWaiting());
        }
    }

    @Test
    void somethingOtherThanATcpSocketEndsOnlyItsOwnConnection(@TempDir Path dir) throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.startNative(tcpPolicy("echo.test", echo.port()), dir,
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test"))))) {
            f.resolve(who("/usr/bin/nc"), "echo.test");
            f.source.sendPipeInstead = true;
            try (Socket s = f.connect(who("/usr/bin/nc"), loopback(), echo.port())) {
                assertTrue(cut(s), "a pipe is not relayed");
            }
            awaitNoRelays(f);
            try (Socket s = f.connect(who("/usr/bin/nc"), loopback(), echo.port())) {
                roundTrip(s);
            }
        }
    }

    @Test
    void aPolicyDenialNeverHandsAnythingOff(@TempDir Path dir) throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.startNative(tcpPolicy("echo.test", echo.port()), dir,
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test"))))) {
            f.resolve(who("/usr/bin/nc"), "echo.test");
            assertEquals(DenyReason.POLICY, f.denied(who("/usr/bin/python3"), loopback(), echo.port()));
            assertFalse(f.source.handed.getLast().handedOff.isDone(), "a denied open is neither allowed nor handed off");
            assertEquals(0, f.mediation.handoffsWaiting());
        }
    }

    private static void awaitNoRelays(Fixture f) throws InterruptedException {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (f.mediation.nativeRelays() != 0 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertEquals(0, f.mediation.nativeRelays(), "every native relay ended");
    }
}
