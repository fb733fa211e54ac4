package openshell.protocol;

import java.net.Socket;
import java.security.GeneralSecurityException;
import java.security.Principal;
import java.security.PrivateKey;
import java.security.SecureRandom;
import java.security.cert.CertificateException;
import java.security.cert.X509Certificate;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

import javax.net.ssl.KeyManager;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.TrustManager;
import javax.net.ssl.X509ExtendedKeyManager;
import javax.net.ssl.X509ExtendedTrustManager;

/**
 * A TLS context that only ever serves: one EC leaf key and its chain, and no trust in any client
 * certificate. Built directly, because the JDK's usual way costs a cold JVM hundreds of
 * milliseconds that every sandbox start and every intercepted host would pay: a PKCS12 key
 * store encrypts the key with a 10,000-round password-based KDF on {@code setKeyEntry}, and
 * {@code SSLContext.init} with no trust managers loads and parses the whole {@code cacerts}.
 * Neither is needed by a server that never asks for a client certificate.
 */
public final class ServerTls {
    private ServerTls() {
    }

    /**
     * A server-only context presenting {@code chain} (leaf first) with {@code key}.
     *
     * @param protocol the {@link SSLContext} protocol ({@code TLSv1.3}, {@code TLS})
     * @param key      the leaf's private key (EC)
     * @param chain    leaf first, then its issuers; not empty
     * @param random   the randomness source, or empty for the JDK's default
     * @return the initialised context
     * @throws GeneralSecurityException if the JDK has no such protocol
     * @throws ProtocolException         INVALID_ARGUMENT for an empty chain
     */
    public static SSLContext context(String protocol, PrivateKey key, List<X509Certificate> chain,
                                     Optional<SecureRandom> random) throws GeneralSecurityException {
        Objects.requireNonNull(key, "key");
        if (chain.isEmpty()) {
            throw new ProtocolException(Refusal.INVALID_ARGUMENT, "empty certificate chain");
        }
        SSLContext context = SSLContext.getInstance(protocol);
        context.init(new KeyManager[] {new LeafKeyManager(key, chain.toArray(new X509Certificate[0]))},
                new TrustManager[] {new NoClientTrust()}, random.orElse(null));
        return context;
    }

    /** Presents one leaf and its chain to every server handshake whose key type it fits; never a client. */
    private static final class LeafKeyManager extends X509ExtendedKeyManager {
        private static final String ALIAS = "leaf";
        private final PrivateKey key;
        private final X509Certificate[] chain;
        private final String keyType;

        LeafKeyManager(PrivateKey key, X509Certificate[] chain) {
            this.key = key;
            this.chain = chain;
            this.keyType = key.getAlgorithm();
        }

        private String alias(String wanted) {
            return wanted != null && wanted.startsWith(keyType) ? ALIAS : null;
        }

        @Override
        public String[] getClientAliases(String type, Principal[] issuers) {
            return null;
        }

        @Override
        public String chooseClientAlias(String[] types, Principal[] issuers, Socket socket) {
            return null;
        }

        @Override
        public String[] getServerAliases(String type, Principal[] issuers) {
            String alias = alias(type);
            return alias == null ? null : new String[] {alias};
        }

        @Override
        public String chooseServerAlias(String type, Principal[] issuers, Socket socket) {
            return alias(type);
        }

        @Override
        public String chooseEngineServerAlias(String type, Principal[] issuers, SSLEngine engine) {
            return alias(type);
        }

        @Override
        public X509Certificate[] getCertificateChain(String alias) {
            return ALIAS.equals(alias) ? chain.clone() : null;
        }

        @Override
        public PrivateKey getPrivateKey(String alias) {
            return ALIAS.equals(alias) ? key : null;
        }
    }

    /** Trusts no certificate: the server never requests one, and must not accept one if it were sent. */
    private static final class NoClientTrust extends X509ExtendedTrustManager {
        private static CertificateException refused() {
            return new CertificateException("this endpoint trusts no peer certificate");
        }

        @Override
        public void checkClientTrusted(X509Certificate[] chain, String authType) throws CertificateException {
            throw refused();
        }

        @Override
        public void checkServerTrusted(X509Certificate[] chain, String authType) throws CertificateException {
            throw refused();
        }

        @Override
        public void checkClientTrusted(X509Certificate[] chain, String authType, Socket socket) throws CertificateException {
            throw refused();
        }

        @Override
        public void checkServerTrusted(X509Certificate[] chain, String authType, Socket socket) throws CertificateException {
            throw refused();
        }

        @Override
        public void checkClientTrusted(X509Certificate[] chain, String authType, SSLEngine engine) throws CertificateException {
            throw refused();
        }

        @Override
        public void checkServerTrusted(X509Certificate[] chain, String authType, SSLEngine engine) throws CertificateException {
            throw refused();
        }

        @Override
        public X509Certificate[] getAcceptedIssuers() {
            return new X509Certificate[0];
        }
    }
}
