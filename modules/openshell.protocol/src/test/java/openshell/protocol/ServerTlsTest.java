package openshell.protocol;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManagerFactory;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** The server-only context over a real loopback socket: it serves its chain, and trusts no client. */
class ServerTlsTest {
    private static final LaunchTls TLS = LaunchTls.issue("server-tls-1");

    @Test
    void servesTheLeafAndChainToAPinnedClient() throws Exception {
        SSLContext server = TLS.runtime().sslContext();
        Certificate[] seen = handshake(server, TLS.pin().sslContext(), false);
        assertArrayEquals(TLS.runtime().chain().toArray(new Certificate[0]), seen);
    }

    @Test
    void aClientCertificateIsNeverTrustedEvenWhereOneIsDemanded() throws Exception {
        // The runtime never asks for one; if a server did, no client certificate would pass.
        KeyStore store = KeyStore.getInstance("PKCS12");
        store.load(null, null);
        LaunchTls client = LaunchTls.issue("client-1");
        store.setKeyEntry("c", client.runtime().leafKey(), new char[0], client.runtime().chain().toArray(new Certificate[0]));
        KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keys.init(store, new char[0]);
        KeyStore anchors = KeyStore.getInstance("PKCS12");
        anchors.load(null, null);
        anchors.setCertificateEntry("ca", TLS.pin().authority());
        TrustManagerFactory trust = TrustManagerFactory.getInstance("PKIX");
        trust.init(anchors);
        SSLContext withCertificate = SSLContext.getInstance("TLSv1.3");
        withCertificate.init(keys.getKeyManagers(), trust.getTrustManagers(), null);
        ExecutionException failed = assertThrows(ExecutionException.class,
                () -> handshake(TLS.runtime().sslContext(), withCertificate, true));
        assertInstanceOf(SSLException.class, failed.getCause());
    }

    @Test
    void anEmptyChainIsRefused() {
        assertEquals(Refusal.INVALID_ARGUMENT, assertThrows(ProtocolException.class,
                () -> ServerTls.context("TLS", TLS.runtime().leafKey(), List.of(), Optional.empty())).refusal());
    }

    /** One handshake over loopback TCP; returns the chain the client saw, or the server's failure. */
    private static Certificate[] handshake(SSLContext server, SSLContext client, boolean needClientAuth) throws Exception {
        try (ServerSocket listener = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            CompletableFuture<Void> served = CompletableFuture.runAsync(() -> {
                try (Socket plain = listener.accept();
                     SSLSocket tls = (SSLSocket) server.getSocketFactory().createSocket(plain, null, true)) {
                    tls.setUseClientMode(false);
                    tls.setNeedClientAuth(needClientAuth);
                    tls.startHandshake();
                    tls.getOutputStream().write(1);
                    tls.getOutputStream().flush();
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            try (SSLSocket tls = (SSLSocket) client.getSocketFactory().createSocket(InetAddress.getLoopbackAddress(),
                    listener.getLocalPort())) {
                tls.setSoTimeout(10_000);
                tls.startHandshake();
                Certificate[] chain = tls.getSession().getPeerCertificates();
                int first = tls.getInputStream().read();
                served.get(10, TimeUnit.SECONDS);
                assertEquals(1, first);
                return chain;
            } catch (IOException clientSide) {
                // The server's refusal is the failure under test; the client only sees the alert.
                try {
                    served.get(10, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    ExecutionException refused = new ExecutionException("the server failed", e.getCause().getCause());
                    refused.addSuppressed(clientSide);
                    throw refused;
                }
                throw clientSide;
            }
        }
    }
}
