package openshell.supervisor;

import static openshell.supervisor.Fixture.loopback;
import static openshell.supervisor.Fixture.read;
import static openshell.supervisor.Fixture.send;
import static openshell.supervisor.Fixture.who;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.time.Clock;
import java.util.List;

import javax.net.ssl.SNIHostName;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLHandshakeException;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLServerSocket;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManagerFactory;

import openshell.isolation.SandboxId;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * HTTPS interception on a {@code rest} endpoint: the workload (the {@link TestMediationSource}
 * test double, speaking real TLS over a real socket pair) trusts only the sandbox's CA; the
 * upstream is a real JDK TLS server on loopback whose certificate comes from a separate test CA
 * (issued with the same authority class, which is all a test CA needs), trusted by the supervisor
 * through trusted configuration.
 */
@Timeout(120)
class HttpsInterceptionTest {
    private InterceptionAuthority upstreamCa;
    private SSLServerSocket upstream;
    private Thread serving;

    @BeforeEach
    void startUpstream() throws Exception {
        upstreamCa = InterceptionAuthority.create(new SandboxId("upstream-test-ca"), Clock.systemUTC());
        upstream = (SSLServerSocket) upstreamCa.serverContext("api.test").getServerSocketFactory()
                .createServerSocket(0, 50, loopback());
        serving = Thread.ofPlatform().daemon().start(() -> {
            while (!upstream.isClosed()) {
                try {
                    Socket s = upstream.accept();
                    Thread.ofVirtual().start(() -> serve(s));
                } catch (IOException e) {
                    return;
                }
            }
        });
    }

    /** A minimal HTTP/1.1 responder over TLS: answers each request with what it received. */
    private static void serve(Socket s) {
        try (s) {
            HttpInput in = new HttpInput(s.getInputStream(), 4096);
            OutputStream out = s.getOutputStream();
            HttpHead req;
            while ((req = HttpParser.readRequest(in)) != null) {
                java.io.ByteArrayOutputStream body = new java.io.ByteArrayOutputStream();
                HttpParser.copyBody(in, body, req, new byte[4096], n -> { });
                String auth = req.headers().stream().filter(h -> h.name().equalsIgnoreCase("authorization"))
                        .map(HttpHead.Header::value).findFirst().orElse("-");
                byte[] answer = (req.method() + " " + req.target() + " auth=" + auth).getBytes(StandardCharsets.UTF_8);
                out.write(("HTTP/1.1 200 OK\r\nContent-Length: " + answer.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
                out.write(answer);
                out.flush();
            }
        } catch (IOException e) {
            // The relay closed the connection.
        }
    }

    @AfterEach
    void stopUpstream() throws Exception {
        upstream.close();
        serving.join(Fixture.WAIT.toMillis());
    }

    private static SSLContext trusting(X509Certificate ca) throws Exception {
        KeyStore ks = KeyStore.getInstance("PKCS12");
        ks.load(null, null);
        ks.setCertificateEntry("ca", ca);
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(ks);
        SSLContext c = SSLContext.getInstance("TLS");
        c.init(null, tmf.getTrustManagers(), null);
        return c;
    }

    private static X509Certificate fromPem(String pem) throws Exception {
        return (X509Certificate) CertificateFactory.getInstance("X.509")
                .generateCertificate(new ByteArrayInputStream(pem.getBytes(StandardCharsets.US_ASCII)));
    }

    /** The workload's TLS client over its mediated socket, trusting only the sandbox CA. */
    private static SSLSocket workloadTls(Socket plain, String caPem, String host) throws Exception {
        SSLSocket tls = (SSLSocket) trusting(fromPem(caPem)).getSocketFactory().createSocket(plain, host, 443, true);
        SSLParameters p = tls.getSSLParameters();
        p.setEndpointIdentificationAlgorithm("HTTPS");
        p.setServerNames(List.of(new SNIHostName(host)));
        tls.setSSLParameters(p);
        tls.startHandshake();
        return tls;
    }

    private Fixture fixture(boolean trustUpstream) throws Exception {
        SSLContext context = trustUpstream ? trusting(upstreamCa.caCertificate()) : SSLContext.getDefault();
        return fixture(() -> {
            upstreamTrustBuilt.incrementAndGet();
            return context;
        });
    }

    private final java.util.concurrent.atomic.AtomicInteger upstreamTrustBuilt = new java.util.concurrent.atomic.AtomicInteger();

    private Fixture fixture(java.util.function.Supplier<SSLContext> upstreamTrust) throws Exception {
        CredentialProvider gh = CredentialProvider.of("gh", "tls-secret-value".getBytes(StandardCharsets.US_ASCII),
                java.util.Set.of("api.test"));
        Fixture f = Fixture.start(HttpMediationTest.restPolicy(upstream.getLocalPort()), b -> b
                .aliases(HostAliases.of(Fixture.aliasToLoopback("api.test")))
                .credentials(Credentials.of(List.of(gh)))
                .upstreamTls(upstreamTrust));
        f.resolve(who("/usr/bin/curl"), "api.test");
        return f;
    }

    @Test
    void httpsIsTerminatedInspectedAndReEncrypted() throws Exception {
        try (Fixture f = fixture(true)) {
            try (SSLSocket tls = workloadTls(f.connect(who("/usr/bin/curl"), loopback(), upstream.getLocalPort()),
                    f.mediation.interceptionCaPem(), "api.test")) {
                String host = "Host: api.test\r\n";
                send(tls, "GET /repos/acme/x HTTP/1.1\r\n" + host + "\r\n");
                HttpInput in = new HttpInput(tls.getInputStream(), 4096);
                Fixture.Response ok = read(in, "GET");
                assertEquals(200, ok.status());
                assertEquals("GET /repos/acme/x auth=-", ok.body());
                send(tls, "GET /admin/keys HTTP/1.1\r\n" + host + "\r\n");
                Fixture.Response denied = read(in, "GET");
                assertEquals(403, denied.status());
                assertTrue(denied.body().contains("deny_rules[1]"), denied.body());
                send(tls, "GET /again HTTP/1.1\r\n" + host + "Authorization: Bearer openshell-credential-gh\r\n\r\n");
                assertEquals("GET /again auth=Bearer tls-secret-value", read(in, "GET").body(),
                        "the placeholder is replaced inside the re-encrypted request");
                send(tls, "GET /other HTTP/1.1\r\nHost: other.test\r\n\r\n");
                Fixture.Response wrongHost = read(in, "GET");
                assertEquals(403, wrongHost.status(), "on intercepted TLS the Host must name the certificate's host");
                assertTrue(wrongHost.body().contains("HOST_MISMATCH"), wrongHost.body());
            }
            assertTrue(f.audit.stream().anyMatch(l -> l.contains("\"path\":\"/again\"")));
            assertTrue(f.audit.stream().noneMatch(l -> l.contains("tls-secret-value")));
        }
    }

    @Test
    void upstreamTrustIsBuiltAtTheFirstInspectedTlsConnectionOnly() throws Exception {
        try (Fixture f = fixture(true)) {
            assertEquals(0, upstreamTrustBuilt.get(), "not at start: it costs every sandbox start");
            for (int i = 0; i < 2; i++) {
                try (SSLSocket tls = workloadTls(f.connect(who("/usr/bin/curl"), loopback(), upstream.getLocalPort()),
                        f.mediation.interceptionCaPem(), "api.test")) {
                    send(tls, "GET /repos/acme/x HTTP/1.1\r\nHost: api.test\r\n\r\n");
                    assertEquals(200, read(new HttpInput(tls.getInputStream(), 4096), "GET").status());
                }
                assertEquals(1, upstreamTrustBuilt.get(), "built once, then kept");
            }
        }
    }

    @Test
    void upstreamTrustThatCannotBeBuiltRefusesTheConnection() throws Exception {
        try (Fixture f = fixture(() -> {
            throw new SupervisorException("no trust store");
        })) {
            assertRequestAnswered502UpstreamTls(f);
        }
    }

    @Test
    void workloadThatDoesNotTrustTheSandboxCaFailsItsHandshake() throws Exception {
        try (Fixture f = fixture(true)) {
            Socket plain = f.connect(who("/usr/bin/curl"), loopback(), upstream.getLocalPort());
            String otherCa = InterceptionAuthority.create(new SandboxId("other"), Clock.systemUTC()).caCertificatePem();
            assertThrows(SSLHandshakeException.class, () -> workloadTls(plain, otherCa, "api.test").close());
            plain.close();
        }
    }

    @Test
    void upstreamFailingVerificationAnswers502() throws Exception {
        try (Fixture f = fixture(false)) {
            assertRequestAnswered502UpstreamTls(f);
        }
    }

    /** The workload's intercepted TLS request is answered 502 UPSTREAM_TLS, and audited so. */
    private void assertRequestAnswered502UpstreamTls(Fixture f) throws Exception {
        try (SSLSocket tls = workloadTls(f.connect(who("/usr/bin/curl"), loopback(), upstream.getLocalPort()),
                f.mediation.interceptionCaPem(), "api.test")) {
            send(tls, "GET /repos/acme/x HTTP/1.1\r\nHost: api.test\r\n\r\n");
            Fixture.Response r = read(new HttpInput(tls.getInputStream(), 4096), "GET");
            assertEquals(502, r.status());
            assertTrue(r.body().contains("UPSTREAM_TLS"), r.body());
            assertTrue(f.lastAudit("tls").contains("UPSTREAM_TLS"));
        }
    }

    @Test
    void leavesAreRenewedBeforeTheyExpire() {
        DnsPlaneTest.MutableClock clock = new DnsPlaneTest.MutableClock();
        InterceptionAuthority a = InterceptionAuthority.create(new SandboxId("renew"), clock);
        assertEquals(clock.instant().plus(InterceptionAuthority.CA_VALIDITY), a.caCertificate().getNotAfter().toInstant());
        SSLContext leaf = a.serverContext("h.test");
        clock.advance(InterceptionAuthority.CA_VALIDITY.minus(InterceptionAuthority.LEAF_RENEW_BEFORE).minusSeconds(1));
        assertTrue(leaf == a.serverContext("h.test"), "kept until LEAF_RENEW_BEFORE ahead of expiry");
        clock.advance(java.time.Duration.ofSeconds(1));
        assertTrue(leaf != a.serverContext("h.test"), "re-issued at the bound");
    }

    @Test
    void caIsFreshPerSandboxAndLeavesAreCachedUpToTheBound() throws Exception {
        InterceptionAuthority a = InterceptionAuthority.create(new SandboxId("a"), Clock.systemUTC());
        InterceptionAuthority b = InterceptionAuthority.create(new SandboxId("a"), Clock.systemUTC());
        X509Certificate ca = fromPem(a.caCertificatePem());
        assertEquals(a.caCertificate(), ca);
        assertTrue(!ca.getPublicKey().equals(b.caCertificate().getPublicKey()), "a fresh key per sandbox");
        assertEquals(0, ca.getBasicConstraints());
        assertTrue(ca.getSubjectX500Principal().getName().contains("sandbox a"));
        SSLContext first = a.serverContext("h0.test");
        assertTrue(first == a.serverContext("h0.test"), "cached");
        for (int i = 1; i <= InterceptionAuthority.MAX_LEAF_CERTIFICATES; i++) {
            a.serverContext("h" + i + ".test");
        }
        assertEquals(InterceptionAuthority.MAX_LEAF_CERTIFICATES, a.cachedLeaves());
        assertTrue(first != a.serverContext("h0.test"), "the least recently used leaf was dropped and re-issued");
    }
}
