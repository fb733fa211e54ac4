package openshell.supervisor;

import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.X509Certificate;
import java.util.List;

import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;

/**
 * The TLS context the supervisor verifies upstream servers with: the JDK's default trust anchors
 * plus the operator's extra ones from trusted gateway configuration (a private CA, or the
 * quickstart's demo CA). Never anything from a policy, and never the interception CA.
 */
final class UpstreamTrust {
    private UpstreamTrust() {
    }

    /**
     * @param extra operator trust anchors, possibly none
     * @return the default context when there are none, else one trusting both
     */
    static SSLContext context(List<X509Certificate> extra) {
        try {
            if (extra.isEmpty()) {
                return SSLContext.getDefault();
            }
            KeyStore anchors = KeyStore.getInstance("PKCS12");
            anchors.load(null, null);
            int n = 0;
            for (X509Certificate system : systemAnchors()) {
                anchors.setCertificateEntry("system-" + (n++), system);
            }
            n = 0;
            for (X509Certificate operator : extra) {
                anchors.setCertificateEntry("operator-" + (n++), operator);
            }
            TrustManagerFactory factory = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            factory.init(anchors);
            SSLContext context = SSLContext.getInstance("TLS");
            context.init(null, factory.getTrustManagers(), null);
            return context;
        } catch (GeneralSecurityException | java.io.IOException e) {
            throw new SupervisorException("cannot build the upstream TLS context: " + e.getMessage(), e);
        }
    }

    /** The anchors the JDK's default trust manager uses (its cacerts, or javax.net.ssl.trustStore). */
    static List<X509Certificate> systemAnchors() throws GeneralSecurityException {
        TrustManagerFactory factory = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        factory.init((KeyStore) null);
        for (TrustManager manager : factory.getTrustManagers()) {
            if (manager instanceof X509TrustManager x509) {
                return List.of(x509.getAcceptedIssuers());
            }
        }
        return List.of();
    }
}
