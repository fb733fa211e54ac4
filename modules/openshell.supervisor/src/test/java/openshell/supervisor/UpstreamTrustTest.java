package openshell.supervisor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import java.security.GeneralSecurityException;
import java.time.Clock;
import java.util.List;

import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLHandshakeException;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLServerSocket;
import javax.net.ssl.SSLSocket;

import openshell.isolation.SandboxId;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The operator's extra upstream trust anchors, against a real TLS server on loopback. */
@Timeout(60)
class UpstreamTrustTest {
    @Test
    void anOperatorAnchorIsTrustedBesidesTheSystemOnesAndNothingElseIs() throws Exception {
        InterceptionAuthority operatorCa = InterceptionAuthority.create(new SandboxId("operator-ca"), Clock.systemUTC());
        InterceptionAuthority strangerCa = InterceptionAuthority.create(new SandboxId("stranger-ca"), Clock.systemUTC());
        try (SSLServerSocket server = (SSLServerSocket) operatorCa.serverContext("api.demo.test").getServerSocketFactory()
                .createServerSocket(0, 8, InetAddress.getLoopbackAddress())) {
            Thread.ofPlatform().daemon().start(() -> {
                while (!server.isClosed()) {
                    try (Socket s = server.accept()) {
                        ((SSLSocket) s).startHandshake();
                        s.getOutputStream().write('k');
                    } catch (IOException e) {
                        // a refused handshake; the next client comes
                    }
                }
            });
            SSLContext withOperator = UpstreamTrust.context(List.of(operatorCa.caCertificate()));
            assertEquals('k', handshake(withOperator, server.getLocalPort(), "api.demo.test"));
            // Host name verification still applies to an operator anchor.
            assertThrows(SSLHandshakeException.class, () -> handshake(withOperator, server.getLocalPort(), "other.demo.test"));
            assertThrows(SSLHandshakeException.class,
                    () -> handshake(UpstreamTrust.context(List.of(strangerCa.caCertificate())), server.getLocalPort(), "api.demo.test"));
            assertThrows(SSLHandshakeException.class, () -> handshake(UpstreamTrust.context(List.of()), server.getLocalPort(),
                    "api.demo.test"));
        }
    }

    @Test
    void theSystemAnchorsStay() throws GeneralSecurityException {
        assertTrue(UpstreamTrust.systemAnchors().size() > 10, "the JDK's cacerts has public roots");
        assertEquals(SSLContext.getDefault(), UpstreamTrust.context(List.of()));
    }

    private static int handshake(SSLContext context, int port, String name) throws IOException {
        // As SandboxMediation dials: a plain socket to the address, TLS layered with the admitted name.
        try (Socket plain = new Socket(InetAddress.getLoopbackAddress(), port);
             SSLSocket s = (SSLSocket) context.getSocketFactory().createSocket(plain, name, port, true)) {
            s.setSoTimeout(20_000);
            SSLParameters p = s.getSSLParameters();
            p.setEndpointIdentificationAlgorithm("HTTPS");
            p.setServerNames(List.of(new javax.net.ssl.SNIHostName(name)));
            s.setSSLParameters(p);
            s.startHandshake();
            return s.getInputStream().read();
        }
    }
}
