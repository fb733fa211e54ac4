package openshell.supervisor;

import java.math.BigInteger;
import java.net.InetAddress;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.SecureRandom;
import java.security.cert.X509Certificate;
import java.security.spec.ECGenParameterSpec;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import javax.net.ssl.SSLContext;

import openshell.isolation.SandboxId;
import openshell.protocol.ServerTls;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.ExtendedKeyUsage;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.asn1.x509.KeyPurposeId;
import org.bouncycastle.asn1.x509.KeyUsage;
import org.bouncycastle.cert.X509v3CertificateBuilder;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509ExtensionUtils;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.operator.OperatorCreationException;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;

/**
 * The per-sandbox interception CA: created fresh for each sandbox (its key never leaves this
 * process), it issues one leaf certificate per intercepted host so the supervisor can terminate
 * the workload's TLS on {@code rest} endpoints and inspect requests. The runtime installs
 * {@link #caCertificatePem()} in the workload's trust store; no other party trusts it. Leaves are
 * cached, bounded, and replaced before they expire.
 */
final class InterceptionAuthority {
    /** Most leaf certificates cached; the least recently used is dropped (and re-issued on demand). */
    static final int MAX_LEAF_CERTIFICATES = 256;
    /** Lifetime of the CA (a sandbox outliving it gets leaves no client trusts: restart it). */
    static final Duration CA_VALIDITY = Duration.ofDays(30);
    /** A cached leaf that expires sooner than this is re-issued. */
    static final Duration LEAF_RENEW_BEFORE = Duration.ofDays(1);
    /** Backdating of every certificate, for clock skew between supervisor and workload. */
    static final Duration BACKDATE = Duration.ofHours(1);

    private final String sandbox;
    private final Clock clock;
    private final KeyPair caKeys;
    private final X509Certificate ca;
    private final SecureRandom random = new SecureRandom();
    private final LinkedHashMap<String, Leaf> leaves = new LinkedHashMap<>(16, 0.75f, true) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Leaf> eldest) {
            return size() > MAX_LEAF_CERTIFICATES;
        }
    };

    private record Leaf(SSLContext context, X509Certificate certificate) {
    }

    private InterceptionAuthority(String sandbox, Clock clock) {
        this.sandbox = sandbox;
        this.clock = clock;
        try {
            this.caKeys = newKeys();
            Instant now = clock.instant();
            X500Name name = new X500Name("CN=OpenShell sandbox " + sandbox + " interception CA,O=OpenShell");
            X509v3CertificateBuilder b = new JcaX509v3CertificateBuilder(name, serial(), Date.from(now.minus(BACKDATE)),
                    Date.from(now.plus(CA_VALIDITY)), name, caKeys.getPublic());
            JcaX509ExtensionUtils ext = new JcaX509ExtensionUtils();
            b.addExtension(Extension.basicConstraints, true, new BasicConstraints(0));
            b.addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.keyCertSign | KeyUsage.cRLSign));
            b.addExtension(Extension.subjectKeyIdentifier, false, ext.createSubjectKeyIdentifier(caKeys.getPublic()));
            this.ca = sign(b);
        } catch (GeneralSecurityException | OperatorCreationException | java.io.IOException e) {
            throw new SupervisorException("cannot create the interception CA: " + e.getMessage(), e);
        }
    }

    /**
     * @param sandbox the sandbox it serves (named in the CA's subject)
     * @param clock   the time source for validity
     * @return a fresh authority
     */
    static InterceptionAuthority create(SandboxId sandbox, Clock clock) {
        return new InterceptionAuthority(sandbox.value(), clock);
    }

    X509Certificate caCertificate() {
        return ca;
    }

    /** @return the CA certificate, PEM, for the workload's trust store */
    String caCertificatePem() {
        try {
            return "-----BEGIN CERTIFICATE-----\n"
                    + Base64.getMimeEncoder(64, "\n".getBytes(java.nio.charset.StandardCharsets.US_ASCII)).encodeToString(ca.getEncoded())
                    + "\n-----END CERTIFICATE-----\n";
        } catch (java.security.cert.CertificateEncodingException e) {
            throw new SupervisorException("cannot encode the interception CA", e);
        }
    }

    /**
     * @param host a canonical host name or an IP literal
     * @return a server TLS context presenting a leaf for exactly that host
     */
    synchronized SSLContext serverContext(String host) {
        Leaf leaf = leaves.get(host);
        if (leaf != null && leaf.certificate.getNotAfter().toInstant().isAfter(clock.instant().plus(LEAF_RENEW_BEFORE))) {
            return leaf.context;
        }
        leaf = issue(host);
        leaves.put(host, leaf);
        return leaf.context;
    }

    synchronized int cachedLeaves() {
        return leaves.size();
    }

    private Leaf issue(String host) {
        try {
            KeyPair keys = newKeys();
            Instant now = clock.instant();
            Instant notAfter = ca.getNotAfter().toInstant();
            X500Name subject = new X500Name("CN=" + host);
            X509v3CertificateBuilder b = new JcaX509v3CertificateBuilder(ca, serial(), Date.from(now.minus(BACKDATE)),
                    Date.from(notAfter), subject, keys.getPublic());
            JcaX509ExtensionUtils ext = new JcaX509ExtensionUtils();
            boolean literal = host.indexOf(':') >= 0 || host.matches("[0-9.]+");
            GeneralName san = literal ? new GeneralName(GeneralName.iPAddress, InetAddress.ofLiteral(host).getHostAddress())
                    : new GeneralName(GeneralName.dNSName, host);
            b.addExtension(Extension.basicConstraints, true, new BasicConstraints(false));
            b.addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.digitalSignature));
            b.addExtension(Extension.extendedKeyUsage, false, new ExtendedKeyUsage(KeyPurposeId.id_kp_serverAuth));
            b.addExtension(Extension.subjectAlternativeName, false, new GeneralNames(san));
            b.addExtension(Extension.authorityKeyIdentifier, false, ext.createAuthorityKeyIdentifier(ca));
            X509Certificate leaf = sign(b);
            // Server-only: no PKCS12 store (a password-based KDF per leaf) and no cacerts.
            SSLContext context = ServerTls.context("TLS", keys.getPrivate(), List.of(leaf, ca), Optional.of(random));
            return new Leaf(context, leaf);
        } catch (GeneralSecurityException | OperatorCreationException | java.io.IOException e) {
            throw new SupervisorException("cannot issue an interception certificate for " + host + ": " + e.getMessage(), e);
        }
    }

    private X509Certificate sign(X509v3CertificateBuilder b) throws OperatorCreationException, GeneralSecurityException {
        return new JcaX509CertificateConverter().getCertificate(
                b.build(new JcaContentSignerBuilder("SHA256withECDSA").build(caKeys.getPrivate())));
    }

    private static KeyPair newKeys() throws GeneralSecurityException {
        KeyPairGenerator g = KeyPairGenerator.getInstance("EC");
        g.initialize(new ECGenParameterSpec("secp256r1"));
        return g.generateKeyPair();
    }

    private BigInteger serial() {
        return new BigInteger(127, random).add(BigInteger.ONE);
    }

    @Override
    public String toString() {
        return "InterceptionAuthority[" + sandbox + "]";
    }
}
