package openshell.protocol;

import java.math.BigInteger;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.PrivateKey;
import java.security.SecureRandom;
import java.security.cert.X509Certificate;
import java.security.spec.ECGenParameterSpec;
import java.time.Instant;
import java.util.Date;
import java.util.List;
import java.util.Objects;

import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.ExtendedKeyUsage;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.asn1.x509.KeyPurposeId;
import org.bouncycastle.asn1.x509.KeyUsage;
import org.bouncycastle.cert.CertIOException;
import org.bouncycastle.cert.X509v3CertificateBuilder;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.operator.OperatorCreationException;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;

/**
 * The TLS material of one launch: a fresh CA that signs exactly one leaf, for
 * {@code sandbox.<session-id>.openshell.internal}, then is forgotten. The CA private key
 * exists only inside {@link #issue(String)}; nothing can sign a second leaf, so pinning
 * the CA pins this one runtime.
 * <p>
 * Minting needs BouncyCastle ({@code requires static} in this module): only the minting side
 * (the gateway, and whoever mints in a build or a test) has it on its module graph; the sandbox
 * runtime never links this class.
 *
 * @param runtime what the sandbox runtime serves with
 * @param pin     what the supervisor trusts
 */
public record LaunchTls(RuntimeTlsIdentity runtime, TlsPin pin) {
    private static final SecureRandom RANDOM = new SecureRandom();

    /**
     * Canonical constructor.
     *
     * @param runtime what the sandbox runtime serves with
     * @param pin     what the supervisor trusts
     */
    public LaunchTls {
        Objects.requireNonNull(runtime);
        Objects.requireNonNull(pin);
    }

    /**
     * The TLS server name of a session.
     *
     * @param sessionId a DNS label
     * @return {@code sandbox.<session-id>.openshell.internal}
     */
    public static String serverName(String sessionId) {
        return SandboxServerName.of(sessionId);
    }

    /**
     * Issues fresh material for one launch.
     *
     * @param sessionId the session, a DNS label
     * @return the runtime identity and the supervisor's pin
     */
    public static LaunchTls issue(String sessionId) {
        String serverName = serverName(sessionId);
        try {
            KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
            generator.initialize(new ECGenParameterSpec("secp256r1"), RANDOM);
            KeyPair authorityKeys = generator.generateKeyPair();
            KeyPair leafKeys = generator.generateKeyPair();
            Instant now = Instant.now();
            Date notBefore = Date.from(now.minus(ProtocolLimits.TOKEN_LEEWAY));
            Date notAfter = Date.from(now.plus(ProtocolLimits.TLS_VALIDITY));

            X500Name authorityName = new X500Name("CN=OpenShell launch CA " + sessionId);
            X509v3CertificateBuilder authority = new JcaX509v3CertificateBuilder(
                    authorityName, serial(), notBefore, notAfter, authorityName, authorityKeys.getPublic());
            authority.addExtension(Extension.basicConstraints, true, new BasicConstraints(0));
            authority.addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.keyCertSign));
            X509Certificate authorityCertificate = sign(authority, authorityKeys.getPrivate());

            X509v3CertificateBuilder leaf = new JcaX509v3CertificateBuilder(
                    authorityName, serial(), notBefore, notAfter, new X500Name("CN=" + serverName),
                    leafKeys.getPublic());
            leaf.addExtension(Extension.basicConstraints, true, new BasicConstraints(false));
            leaf.addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.digitalSignature));
            leaf.addExtension(Extension.extendedKeyUsage, false, new ExtendedKeyUsage(KeyPurposeId.id_kp_serverAuth));
            leaf.addExtension(Extension.subjectAlternativeName, false,
                    new GeneralNames(new GeneralName(GeneralName.dNSName, serverName)));
            X509Certificate leafCertificate = sign(leaf, authorityKeys.getPrivate());
            // authorityKeys goes out of scope here: the CA private key is never stored or returned.
            return new LaunchTls(
                    new RuntimeTlsIdentity(serverName, leafKeys.getPrivate(), List.of(leafCertificate, authorityCertificate)),
                    new TlsPin(serverName, authorityCertificate));
        } catch (GeneralSecurityException | OperatorCreationException | CertIOException e) {
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "cannot issue launch TLS material", e);
        }
    }

    private static X509Certificate sign(X509v3CertificateBuilder builder, PrivateKey key)
            throws OperatorCreationException, GeneralSecurityException {
        return new JcaX509CertificateConverter()
                .getCertificate(builder.build(new JcaContentSignerBuilder("SHA256withECDSA").build(key)));
    }

    private static BigInteger serial() {
        return new BigInteger(127, RANDOM).add(BigInteger.ONE);
    }
}
