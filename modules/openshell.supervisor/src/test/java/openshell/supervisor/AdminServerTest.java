package openshell.supervisor;

import static openshell.supervisor.Fixture.loopback;
import static openshell.supervisor.Fixture.who;
import static openshell.supervisor.TcpMediationTest.tcpPolicy;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.Socket;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The admin endpoints over real HTTP on loopback (mediation driven by the workload test double). */
@Timeout(120)
class AdminServerTest {
    private static Fixture.Response get(int port, String path) throws Exception {
        try (Socket s = new Socket(loopback(), port)) {
            s.setSoTimeout(30_000);
            Fixture.send(s, "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
            return Fixture.read(new HttpInput(s.getInputStream(), 4096), "GET");
        }
    }

    @Test
    void healthReadinessAndMetrics() throws Exception {
        AtomicBoolean running = new AtomicBoolean(false);
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.start(tcpPolicy("echo.test", echo.port()),
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test"))));
             AdminServer admin = AdminServer.start("127.0.0.1", 0, running::get, f.mediation)) {
            assertEquals(200, get(admin.port(), "/healthz").status());
            Fixture.Response notReady = get(admin.port(), "/readyz");
            assertEquals(503, notReady.status());
            assertTrue(notReady.body().contains("\"boundaryRunning\":false"), notReady.body());
            running.set(true);
            assertEquals(200, get(admin.port(), "/readyz").status());

            f.resolve(who("/usr/bin/nc"), "echo.test");
            try (Socket s = f.connect(who("/usr/bin/nc"), loopback(), echo.port())) {
                s.getOutputStream().write('x');
                assertEquals('x', s.getInputStream().read());
                f.denied(who("/usr/bin/bash"), loopback(), echo.port());
                // The relay counts a chunk after writing it on, so the echo can be back first.
                String metrics = get(admin.port(), "/metrics").body();
                long deadline = System.nanoTime() + 10_000_000_000L;
                while (!metrics.contains("openshell_relayed_bytes_total{direction=\"out\"} 1") && System.nanoTime() < deadline) {
                    Thread.sleep(20);
                    metrics = get(admin.port(), "/metrics").body();
                }
                assertTrue(metrics.contains("openshell_decisions_total{kind=\"connect\",outcome=\"allow\"} 1"), metrics);
                assertTrue(metrics.contains("openshell_decisions_total{kind=\"connect\",outcome=\"deny\"} 1"), metrics);
                assertTrue(metrics.contains("openshell_decisions_total{kind=\"dns\",outcome=\"allow\"} 1"), metrics);
                assertTrue(metrics.contains("openshell_active_relays 1"), metrics);
                assertTrue(metrics.contains("openshell_dns_queries_total{outcome=\"answered\"} 1"), metrics);
                assertTrue(metrics.contains("openshell_relayed_bytes_total{direction=\"out\"} 1"), metrics);
                assertTrue(metrics.contains("openshell_decision_seconds_count 3"), metrics);
                assertTrue(metrics.contains("openshell_decision_seconds_bucket{le=\"+Inf\"} 3"), metrics);
                assertTrue(metrics.contains("openshell_decision_seconds_bucket{le=\"0.0001\"} "), metrics);
            }
            f.mediation.close();
            Fixture.Response down = get(admin.port(), "/readyz");
            assertEquals(503, down.status());
            assertTrue(down.body().contains("\"mediationLive\":false"), down.body());
        }
    }
}
