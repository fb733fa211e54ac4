package openshell.protocol;

import java.security.KeyStore;
import java.security.cert.X509Certificate;
import java.util.Objects;

import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * What the supervisor trusts for one launch: only the launch CA, and only for the
 * runtime's server name. No system trust store is consulted.
 *
 * @param serverName {@code sandbox.<session-id>.openshell.internal}
 * @param authority  the launch CA certificate
 */
public record TlsPin(String serverName, X509Certificate authority) {
    /**
     * Canonical constructor.
     *
     * @param serverName server name
     * @param authority  launch CA
     */
    public TlsPin {
        Objects.requireNonNull(serverName);
        Objects.requireNonNull(authority);
    }

    SSLContext sslContext() {
        try {
            KeyStore store = KeyStore.getInstance("PKCS12");
            store.load(null, null);
            store.setCertificateEntry("launch-ca", authority);
            TrustManagerFactory trust = TrustManagerFactory.getInstance("PKIX");
            trust.init(store);
            SSLContext context = SSLContext.getInstance("TLSv1.3");
            context.init(null, trust.getTrustManagers(), null);
            return context;
        } catch (Exception e) {
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "cannot build the pinned TLS context", e);
        }
    }
}
