package openshell.supervisor;

import static openshell.supervisor.Fixture.loopback;
import static openshell.supervisor.Fixture.read;
import static openshell.supervisor.Fixture.send;
import static openshell.supervisor.Fixture.who;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Set;

import io.helidon.webserver.WebServer;
import openshell.isolation.DenyReason;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * L7 enforcement on {@code rest} endpoints against a real Helidon HTTP server on loopback. The
 * workload side is the {@link TestMediationSource} test double (real socket pairs).
 */
@Timeout(120)
class HttpMediationTest {
    private static final String SECRET = "s3cr3t-token-value";
    private WebServer upstream;
    private Fixture f;

    static String restPolicy(int port) {
        return """
                version: 1
                network_policies:
                  api:
                    endpoints:
                      - host: api.test
                        port: %1$d
                        protocol: rest
                        rules:
                          # read-only (GET, HEAD, OPTIONS everywhere) and one POST: a preset and rules are never mixed
                          - {method: GET, path: "**"}
                          - {method: HEAD, path: "**"}
                          - {method: OPTIONS, path: "**"}
                          - {method: POST, path: /upload}
                        deny_rules:
                          - {method: POST, path: /repos/**}
                          - {method: GET, path: /admin/**}
                      - host: other.test
                        port: %1$d
                        protocol: rest
                        access: read-only
                    binaries:
                      - path: /usr/bin/curl
                """.formatted(port);
    }

    @BeforeEach
    void start() throws Exception {
        upstream = Fixture.httpUpstream();
        CredentialProvider gh = CredentialProvider.of("gh", SECRET.getBytes(StandardCharsets.US_ASCII), Set.of("api.test"));
        f = Fixture.start(restPolicy(upstream.port()), b -> b
                .aliases(HostAliases.of(Fixture.aliasToLoopback("api.test", "other.test")))
                .credentials(Credentials.of(List.of(gh))));
        f.resolve(who("/usr/bin/curl"), "api.test");
    }

    @AfterEach
    void stop() {
        f.close();
        upstream.stop();
        for (String line : f.audit) {
            assertFalse(line.contains(SECRET), "a secret in an audit line: " + line);
        }
    }

    private Socket connect() throws Exception {
        return f.connect(who("/usr/bin/curl"), loopback(), upstream.port());
    }

    private String host() {
        return "Host: api.test:" + upstream.port() + "\r\n";
    }

    @Test
    void allowedGetReachesUpstream() throws Exception {
        try (Socket s = connect()) {
            send(s, "GET /repos/acme/x?page=2 HTTP/1.1\r\n" + host() + "\r\n");
            Fixture.Response r = read(new HttpInput(s.getInputStream(), 4096), "GET");
            assertEquals(200, r.status());
            assertEquals("GET /repos/acme/x auth=- body=", r.body());
        }
        String line = f.lastAudit("request");
        assertTrue(line.contains("\"decision\":\"allow\"") && line.contains("\"path\":\"/repos/acme/x\""), line);
        assertFalse(line.contains("page=2"), "the query string is not audited: " + line);
    }

    @Test
    void postDeniedByRuleAnswers403NamingTheRule() throws Exception {
        try (Socket s = connect()) {
            send(s, "POST /repos/acme/x HTTP/1.1\r\n" + host() + "Content-Length: 5\r\n\r\nhello");
            HttpInput in = new HttpInput(s.getInputStream(), 4096);
            Fixture.Response r = read(in, "POST");
            assertEquals(403, r.status());
            assertTrue(r.body().contains("\"cause\":\"DENY_RULE\""), r.body());
            assertTrue(r.body().contains("\"rule\":\"network_policies.api.endpoints[0].deny_rules[0]\""), r.body());
            // The small body was read and dropped: the connection stays, and serves the next request.
            assertTrue(r.head().keepAlive(), "a denied request whose body was dropped keeps the connection");
            send(s, "GET /a HTTP/1.1\r\n" + host() + "\r\n");
            assertEquals("GET /a auth=- body=", read(in, "GET").body());
        }
    }

    @Test
    void deniedBodiesUpToTheBoundAreDroppedAndTheConnectionStays() throws Exception {
        int bound = (int) HttpRelay.MAX_DENIED_BODY_BYTES;
        try (Socket s = connect()) {
            HttpInput in = new HttpInput(s.getInputStream(), 4096);
            send(s, "POST /repos/acme/x HTTP/1.1\r\n" + host() + "Content-Length: " + bound + "\r\n\r\n" + "x".repeat(bound));
            assertEquals(403, read(in, "POST").status());
            // Chunked, exactly at the bound in two chunks.
            String half = "y".repeat(bound / 2);
            send(s, "POST /repos/acme/x HTTP/1.1\r\n" + host() + "Transfer-Encoding: chunked\r\n\r\n"
                    + Integer.toHexString(half.length()) + "\r\n" + half + "\r\n"
                    + Integer.toHexString(half.length()) + "\r\n" + half + "\r\n0\r\n\r\n");
            Fixture.Response chunked = read(in, "POST");
            assertEquals(403, chunked.status());
            assertTrue(chunked.head().keepAlive());
            send(s, "GET /a HTTP/1.1\r\n" + host() + "\r\n");
            assertEquals("GET /a auth=- body=", read(in, "GET").body(), "the dropped bodies left no bytes behind");
        }
    }

    @Test
    void aDeniedBodyOverTheBoundOrHeldForContinueGetsThe403AndTheConnectionCloses() throws Exception {
        long over = HttpRelay.MAX_DENIED_BODY_BYTES + 1;
        try (Socket s = connect()) {
            // The head alone: the 403 comes without waiting for a body that is not worth reading.
            send(s, "POST /repos/acme/x HTTP/1.1\r\n" + host() + "Content-Length: " + over + "\r\n\r\n");
            HttpInput in = new HttpInput(s.getInputStream(), 4096);
            Fixture.Response r = read(in, "POST");
            assertEquals(403, r.status());
            assertFalse(r.head().keepAlive());
            assertEquals(-1, s.getInputStream().read());
        }
        try (Socket s = connect()) {
            send(s, "POST /repos/acme/x HTTP/1.1\r\n" + host() + "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n");
            HttpInput in = new HttpInput(s.getInputStream(), 4096);
            Fixture.Response r = read(in, "POST");
            assertEquals(403, r.status(), "a final answer, never 100 Continue, for a denied request");
            assertFalse(r.head().keepAlive());
        }
        try (Socket s = connect()) {
            String chunk = "z".repeat((int) HttpRelay.MAX_DENIED_BODY_BYTES);
            send(s, "POST /repos/acme/x HTTP/1.1\r\n" + host() + "Transfer-Encoding: chunked\r\n\r\n"
                    + Integer.toHexString(chunk.length()) + "\r\n" + chunk + "\r\n1\r\nz\r\n0\r\n\r\n");
            HttpInput in = new HttpInput(s.getInputStream(), 4096);
            Fixture.Response r = read(in, "POST");
            assertEquals(403, r.status());
            assertFalse(r.head().keepAlive(), "one byte past the bound: the connection closes");
        }
    }

    @Test
    void deniedRequestWithoutBodyKeepsTheConnectionAndItsOrder() throws Exception {
        try (Socket s = connect()) {
            // Pipelined: allowed, denied, allowed; answered in order on one connection.
            send(s, "GET /a HTTP/1.1\r\n" + host() + "\r\n"
                    + "GET /admin/keys HTTP/1.1\r\n" + host() + "\r\n"
                    + "GET /b HTTP/1.1\r\n" + host() + "\r\n");
            HttpInput in = new HttpInput(s.getInputStream(), 4096);
            assertEquals("GET /a auth=- body=", read(in, "GET").body());
            Fixture.Response denied = read(in, "GET");
            assertEquals(403, denied.status());
            assertTrue(denied.body().contains("deny_rules[1]"), denied.body());
            assertEquals("GET /b auth=- body=", read(in, "GET").body());
        }
    }

    @Test
    void chunkedBodyOfAnAllowedPostIsRelayed() throws Exception {
        try (Socket s = connect()) {
            send(s, "POST /upload HTTP/1.1\r\n" + host() + "Transfer-Encoding: chunked\r\n\r\n"
                    + "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
            Fixture.Response r = read(new HttpInput(s.getInputStream(), 4096), "POST");
            assertEquals("POST /upload auth=- body=hello world", r.body());
        }
    }

    @Test
    void hostHeaderMustNameTheAdmittedHost() throws Exception {
        try (Socket s = connect()) {
            send(s, "GET /a HTTP/1.1\r\nHost: other.test\r\n\r\n");
            Fixture.Response r = read(new HttpInput(s.getInputStream(), 4096), "GET");
            assertEquals(403, r.status());
            assertTrue(r.body().contains("HOST_MISMATCH"), r.body());
        }
    }

    @Test
    void smugglingShapedRequestIsRefusedAndNeverForwarded() throws Exception {
        try (Socket s = connect()) {
            send(s, "POST /upload HTTP/1.1\r\n" + host() + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + "0\r\n\r\nGET /admin/keys HTTP/1.1\r\n" + host() + "\r\n");
            HttpInput in = new HttpInput(s.getInputStream(), 4096);
            Fixture.Response r = read(in, "POST");
            assertEquals(400, r.status());
            assertTrue(r.body().contains("ambiguous"), r.body());
            assertEquals(-1, s.getInputStream().read(), "the connection is closed, the smuggled request never read");
        }
    }

    @Test
    void credentialPlaceholderIsReplacedOnlyForItsBoundHost() throws Exception {
        try (Socket s = connect()) {
            send(s, "GET /user HTTP/1.1\r\n" + host() + "Authorization: Bearer openshell-credential-gh\r\n\r\n");
            Fixture.Response r = read(new HttpInput(s.getInputStream(), 4096), "GET");
            assertEquals("GET /user auth=Bearer " + SECRET + " body=", r.body());
        }
        f.resolve(who("/usr/bin/curl"), "other.test");
        // other.test aliases the same loopback address: the pin table now maps it to both names.
        try (Socket s = connect()) {
            send(s, "GET /user HTTP/1.1\r\nHost: other.test:" + upstream.port()
                    + "\r\nAuthorization: Bearer openshell-credential-gh\r\n\r\n");
            Fixture.Response r = read(new HttpInput(s.getInputStream(), 4096), "GET");
            assertEquals(403, r.status());
            assertTrue(r.body().contains("CREDENTIAL_NOT_BOUND"), r.body());
            assertFalse(r.body().contains(SECRET));
        }
    }

    @Test
    void deniedBinaryNeverReachesL7() throws Exception {
        assertEquals(DenyReason.POLICY, f.denied(who("/usr/bin/wget"), loopback(), upstream.port()));
    }
}
