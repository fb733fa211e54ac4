package openshell.protocol;

import java.security.GeneralSecurityException;
import java.security.PrivateKey;
import java.security.cert.X509Certificate;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

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

    /** Server-only: no PKCS12 store (its KDF) and no cacerts, see {@link ServerTls}. */
    SSLContext sslContext() {
        try {
            return ServerTls.context(LinkSecurity.TLS_PROTOCOL, leafKey, chain, Optional.empty());
        } catch (GeneralSecurityException e) {
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "cannot build the runtime TLS context", e);
        }
    }
}
