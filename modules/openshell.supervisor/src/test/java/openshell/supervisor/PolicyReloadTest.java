package openshell.supervisor;

import static openshell.supervisor.Fixture.WAIT;
import static openshell.supervisor.Fixture.loopback;
import static openshell.supervisor.Fixture.who;
import static openshell.supervisor.TcpMediationTest.tcpPolicy;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

import openshell.isolation.DenyReason;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Hot reload: a new generation is installed atomically, live relays it no longer allows are cut,
 * an invalid document never becomes effective. Workload side: the {@link TestMediationSource}
 * test double (real socket pairs); upstream: a real loopback echo server.
 */
@Timeout(120)
class PolicyReloadTest {
    static void roundTrip(Socket s) throws IOException {
        s.getOutputStream().write("ping".getBytes(StandardCharsets.US_ASCII));
        byte[] back = s.getInputStream().readNBytes(4);
        assertEquals("ping", new String(back, StandardCharsets.US_ASCII));
    }

    /** Reads until the relay is cut: EOF or a reset, within the socket's read timeout. */
    static boolean cut(Socket s) {
        try {
            return s.getInputStream().read() == -1;
        } catch (java.net.SocketTimeoutException e) {
            return false;
        } catch (IOException e) {
            return true;
        }
    }

    @Test
    void reloadThatDropsTheEndpointClosesTheLiveRelay() throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.start(tcpPolicy("echo.test", echo.port()),
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test", "other.test"))))) {
            f.resolve(who("/usr/bin/nc"), "echo.test");
            try (Socket s = f.connect(who("/usr/bin/nc"), loopback(), echo.port())) {
                roundTrip(s);
                ReloadReport report = f.policies.reload(tcpPolicy("other.test", echo.port()).getBytes(StandardCharsets.UTF_8));
                assertEquals(ReloadReport.Outcome.LOADED, report.outcome(), report.reasons().toString());
                assertEquals(2, report.generation());
                assertTrue(cut(s), "the relay is closed");
                assertTrue(f.lastAudit("revoke").contains("\"cause\":\"REVOKED\""));
            }
            assertEquals(DenyReason.POLICY, f.denied(who("/usr/bin/nc"), loopback(), echo.port()));
            assertTrue(f.lastAudit("connect").contains("\"generation\":2"));
        }
    }

    @Test
    void reloadThatStillAllowsKeepsTheRelay() throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.start(tcpPolicy("echo.test", echo.port()),
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test"))))) {
            f.resolve(who("/usr/bin/nc"), "echo.test");
            try (Socket s = f.connect(who("/usr/bin/nc"), loopback(), echo.port())) {
                String same = tcpPolicy("echo.test", echo.port()) + "  # a comment makes it a new document\n";
                assertEquals(ReloadReport.Outcome.LOADED, f.policies.reload(same.getBytes(StandardCharsets.UTF_8)).outcome());
                roundTrip(s);
            }
        }
    }

    @Test
    void requestsOnALiveConnectionAreDecidedByTheNewGeneration() throws Exception {
        io.helidon.webserver.WebServer upstream = Fixture.httpUpstream();
        try (Fixture f = Fixture.start(HttpMediationTest.restPolicy(upstream.port()),
                b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("api.test", "other.test"))))) {
            f.resolve(who("/usr/bin/curl"), "api.test");
            try (Socket s = f.connect(who("/usr/bin/curl"), loopback(), upstream.port())) {
                String get = "GET /repos/acme/x HTTP/1.1\r\nHost: api.test\r\n\r\n";
                HttpInput in = new HttpInput(s.getInputStream(), 4096);
                Fixture.send(s, get);
                assertEquals(200, Fixture.read(in, "GET").status());
                String stricter = HttpMediationTest.restPolicy(upstream.port())
                        .replace("- {method: GET, path: /admin/**}", "- {method: GET, path: /repos/**}");
                assertEquals(ReloadReport.Outcome.LOADED, f.policies.reload(stricter.getBytes(StandardCharsets.UTF_8)).outcome());
                Fixture.send(s, get);
                Fixture.Response r = Fixture.read(in, "GET");
                assertEquals(403, r.status(), "the same connection, the new generation's rule");
                assertTrue(r.body().contains("\"generation\":2"), r.body());
            }
        } finally {
            upstream.stop();
        }
    }

    @Test
    void invalidUpdateKeepsTheLastValidGeneration() throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.start(tcpPolicy("echo.test", echo.port()),
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test"))))) {
            f.resolve(who("/usr/bin/nc"), "echo.test");
            try (Socket s = f.connect(who("/usr/bin/nc"), loopback(), echo.port())) {
                ReloadReport report = f.policies.reload("version: 1\nnetwork_policies: [oops\n".getBytes(StandardCharsets.UTF_8));
                assertEquals(ReloadReport.Outcome.FAILED, report.outcome());
                assertFalse(report.reasons().isEmpty());
                assertEquals(1, report.generation());
                roundTrip(s);
            }
            f.connect(who("/usr/bin/nc"), loopback(), echo.port()).close();
        }
    }

    @Test
    void invalidUpdateCanDenyAllUntilAValidOne() throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.start(tcpPolicy("echo.test", echo.port()), PolicyInstallation.OnInvalid.DENY_ALL_UNTIL_VALID,
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test"))))) {
            f.resolve(who("/usr/bin/nc"), "echo.test");
            try (Socket s = f.connect(who("/usr/bin/nc"), loopback(), echo.port())) {
                s.setSoTimeout((int) WAIT.toMillis());
                // A static section may not change in a reload: the whole update is invalid.
                String changed = "version: 1\nprocess: {run_as_user: 1234, run_as_group: 1234}\n";
                ReloadReport report = f.policies.reload(changed.getBytes(StandardCharsets.UTF_8));
                assertEquals(ReloadReport.Outcome.FAILED, report.outcome());
                assertTrue(report.reasons().getFirst().contains("fixed at creation"), report.reasons().toString());
                assertTrue(cut(s), "deny-all closes live relays");
            }
            assertEquals(DenyReason.POLICY, f.denied(who("/usr/bin/nc"), loopback(), echo.port()));
            assertEquals(ReloadReport.Outcome.LOADED,
                    f.policies.reload(tcpPolicy("echo.test", echo.port()).getBytes(StandardCharsets.UTF_8)).outcome());
            f.resolve(who("/usr/bin/nc"), "echo.test");
            f.connect(who("/usr/bin/nc"), loopback(), echo.port()).close();
        }
    }
}
