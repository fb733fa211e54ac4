package openshell.protocol;

import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.util.List;
import java.util.Objects;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;

/**
 * The sandbox runtime's TLS server identity for one launch: the leaf key and the chain
 * (leaf, then the launch CA). The runtime is always the TLS server, whichever side dialed.
 *
 * @param serverName {@code sandbox.<session-id>.openshell.internal}
 * @param leafKey    the leaf's private key
 * @param chain      leaf certificate first, then the launch CA
 */
public record RuntimeTlsIdentity(String serverName, PrivateKey leafKey, List<X509Certificate> chain) {
    /**
     * Canonical constructor.
     *
     * @param serverName server name
     * @param leafKey    leaf key
     * @param chain      chain, leaf first
     */
    public RuntimeTlsIdentity {
        Objects.requireNonNull(serverName);
        Objects.requireNonNull(leafKey);
        chain = List.copyOf(chain);
        if (chain.isEmpty()) {
            throw new ProtocolException(Refusal.INVALID_ARGUMENT, "empty certificate chain");
        }
    }

    @Override
    public String toString() {
        return "RuntimeTlsIdentity[" + serverName + "]";
    }

    SSLContext sslContext() {
        try {
            KeyStore store = KeyStore.getInstance("PKCS12");
            store.load(null, null);
            char[] password = new char[0];
            store.setKeyEntry("leaf", leafKey, password, chain.toArray(new Certificate[0]));
            KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
            keys.init(store, password);
            SSLContext context = SSLContext.getInstance("TLSv1.3");
            context.init(keys.getKeyManagers(), null, null);
            return context;
        } catch (Exception e) {
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "cannot build the runtime TLS context", e);
        }
    }
}
