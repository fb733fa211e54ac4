package openshell.isolation;

import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.security.cert.Certificate;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.Collection;
import java.util.List;

/**
 * CA certificates the workload must trust besides its own system trust store: the supervisor's
 * per-sandbox interception CA, so a client inside the sandbox accepts the certificates the
 * supervisor presents when it terminates TLS to inspect requests. A backend installs them in the
 * workload's trust store before the agent starts; they are never a way to trust anything else,
 * so only CA certificates are accepted, and only a bounded amount of PEM.
 */
public final class WorkloadTrust {
    /** Largest PEM text accepted (an EC CA certificate is about 700 bytes). */
    public static final int MAX_PEM_BYTES = 16 * 1024;
    /** Most certificates accepted. */
    public static final int MAX_CERTIFICATES = 8;

    private static final WorkloadTrust NONE = new WorkloadTrust("", 0);

    private final String pem;
    private final int certificates;

    private WorkloadTrust(String pem, int certificates) {
        this.pem = pem;
        this.certificates = certificates;
    }

    /** @return nothing to install */
    public static WorkloadTrust none() {
        return NONE;
    }

    /**
     * @param pem one or more PEM {@code CERTIFICATE} blocks, each a CA certificate; empty means none
     * @return the validated trust
     * @throws BackendException INVALID if the text is too large, not PEM X.509, or names a non-CA certificate
     */
    public static WorkloadTrust ofPem(String pem) {
        BackendException.require(pem, "workload trust PEM");
        if (pem.isEmpty()) {
            return NONE;
        }
        byte[] bytes = pem.getBytes(StandardCharsets.UTF_8);
        if (bytes.length > MAX_PEM_BYTES) {
            throw BackendException.invalid("workload trust PEM of " + bytes.length + " bytes exceeds " + MAX_PEM_BYTES);
        }
        if (!pem.chars().allMatch(c -> c == '\n' || c == '\r' || (c >= 0x20 && c < 0x7f))) {
            throw BackendException.invalid("workload trust PEM must be printable ASCII");
        }
        if (!pem.strip().startsWith("-----BEGIN CERTIFICATE-----")) {
            throw BackendException.invalid("workload trust PEM must start with a CERTIFICATE block");
        }
        Collection<? extends Certificate> parsed;
        try {
            parsed = CertificateFactory.getInstance("X.509").generateCertificates(new ByteArrayInputStream(bytes));
        } catch (CertificateException e) {
            throw BackendException.invalid("workload trust PEM is not X.509: " + e.getMessage());
        }
        if (parsed.isEmpty()) {
            throw BackendException.invalid("workload trust PEM holds no certificate");
        }
        if (parsed.size() > MAX_CERTIFICATES) {
            throw BackendException.invalid("workload trust PEM holds " + parsed.size() + " certificates, more than "
                    + MAX_CERTIFICATES);
        }
        for (Certificate c : parsed) {
            if (!(c instanceof X509Certificate x) || x.getBasicConstraints() < 0) {
                throw BackendException.invalid("workload trust PEM may hold CA certificates only");
            }
        }
        String text = pem.endsWith("\n") ? pem : pem + "\n";
        return new WorkloadTrust(text, parsed.size());
    }

    /** @return the PEM text (ends with a newline), empty when there is nothing to install */
    public String pem() {
        return pem;
    }

    /** @return whether there is nothing to install */
    public boolean isEmpty() {
        return certificates == 0;
    }

    /** @return how many CA certificates */
    public int certificates() {
        return certificates;
    }

    /** @return the certificates, parsed again (the PEM was validated on creation) */
    public List<X509Certificate> parse() {
        if (isEmpty()) {
            return List.of();
        }
        try {
            return CertificateFactory.getInstance("X.509")
                    .generateCertificates(new ByteArrayInputStream(pem.getBytes(StandardCharsets.US_ASCII))).stream()
                    .map(X509Certificate.class::cast).toList();
        } catch (CertificateException e) {
            throw new IllegalStateException("validated PEM no longer parses", e);
        }
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof WorkloadTrust t && t.pem.equals(pem);
    }

    @Override
    public int hashCode() {
        return pem.hashCode();
    }

    @Override
    public String toString() {
        return "WorkloadTrust[" + certificates + " CA certificate(s)]";
    }
}
