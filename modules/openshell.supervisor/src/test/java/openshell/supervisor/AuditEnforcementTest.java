package openshell.supervisor;

import static openshell.supervisor.Fixture.loopback;
import static openshell.supervisor.Fixture.read;
import static openshell.supervisor.Fixture.send;
import static openshell.supervisor.Fixture.who;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.helidon.webserver.WebServer;
import java.net.Socket;
import org.junit.jupiter.api.Test;

/**
 * An endpoint with upstream's {@code enforcement: audit}: what its rules would refuse is
 * forwarded, and the audit line says in fields what enforcement would have denied; an
 * {@code enforce} endpoint beside it still refuses.
 */
class AuditEnforcementTest {
    private static String policy(int port) {
        return """
                version: 1
                network_policies:
                  watched:
                    endpoints:
                      - host: audit.test
                        port: %1$d
                        protocol: rest
                        enforcement: audit
                        rules:
                          - allow: {method: GET, path: /ok}
                      - host: enforce.test
                        port: %1$d
                        protocol: rest
                        enforcement: enforce
                        rules:
                          - allow: {method: GET, path: /ok}
                    binaries:
                      - path: /usr/bin/curl
                """.formatted(port);
    }

    @Test
    void anAuditedEndpointForwardsWhatItWouldDenyAndTheAuditLineSaysSo() throws Exception {
        WebServer upstream = Fixture.httpUpstream();
        try (Fixture f = Fixture.start(policy(upstream.port()), b -> b.aliases(HostAliases.of(
                Fixture.aliasToLoopback("audit.test", "enforce.test"))))) {
            f.resolve(who("/usr/bin/curl"), "audit.test");
            try (Socket s = f.connect(who("/usr/bin/curl"), loopback(), upstream.port())) {
                send(s, "POST /not-listed HTTP/1.1\r\nHost: audit.test:" + upstream.port() + "\r\nContent-Length: 2\r\n\r\nhi");
                Fixture.Response r = read(new HttpInput(s.getInputStream(), 4096), "POST");
                assertEquals(200, r.status(), "forwarded under audit: " + r.body());
                assertEquals("POST /not-listed auth=- body=hi", r.body());
            }
            String audited = f.lastAudit("request");
            assertTrue(audited.contains("\"decision\":\"allow\"") && audited.contains("\"enforcement\":\"audit\"")
                    && audited.contains("\"wouldDeny\":{\"cause\":"), audited);

            f.resolve(who("/usr/bin/curl"), "enforce.test");
            try (Socket s = f.connect(who("/usr/bin/curl"), loopback(), upstream.port())) {
                send(s, "POST /not-listed HTTP/1.1\r\nHost: enforce.test:" + upstream.port() + "\r\nContent-Length: 2\r\n\r\nhi");
                assertEquals(403, read(new HttpInput(s.getInputStream(), 4096), "POST").status());
            }
            String enforced = f.lastAudit("request");
            assertTrue(enforced.contains("\"decision\":\"deny\""), enforced);
            assertFalse(enforced.contains("wouldDeny"), enforced);
        } finally {
            upstream.stop();
        }
    }
}
