package openshell.isolation;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class WorkloadTrustTest {
    /** A self-signed CA (basic constraints CA:true), made with keytool for this test. */
    static final String CA = """
            -----BEGIN CERTIFICATE-----
            MIIBYjCCAQigAwIBAgIIJhWATrqYFc4wCgYIKoZIzj0EAwMwHDEaMBgGA1UEAxMR
            aXNvbGF0aW9uIHRlc3QgQ0EwIBcNMjYxMTI5MTcwNTE4WhgPMjEyNjExMDUxNzA1
            MThaMBwxGjAYBgNVBAMTEWlzb2xhdGlvbiB0ZXN0IENBMFkwEwYHKoZIzj0CAQYI
            KoZIzj0DAQcDQgAEZqyLwxUnaZ1FlujrjTMzcxF6YvencOvNr+8AGAKnxSiN84gf
            EfqCRBZvKV80U70gN4yy/NywELzbIT8DksWCEKMyMDAwHQYDVR0OBBYEFCMMAv4E
            EcVSv1RtnGn/meZLDWpcMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwMDSAAw
            RQIgHz8Yzpu+bWq2qiLyhWPuyA+F0YmzIx8H2OSdWZNxerECIQCo2ROR8/IC+l/l
            jiIz4OK31cyyom6byO2cRsPqQLgqZw==
            -----END CERTIFICATE-----
            """;
    /** A self-signed end-entity certificate: not a CA. */
    static final String LEAF = """
            -----BEGIN CERTIFICATE-----
            MIIBQDCB6KADAgECAgkA1j/pM703XOswCgYIKoZIzj0EAwMwFDESMBAGA1UEAxMJ
            bGVhZi50ZXN0MCAXDTI2MTEyOTE3MDUyMloYDzIxMjYxMTA1MTcwNTIyWjAUMRIw
            EAYDVQQDEwlsZWFmLnRlc3QwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAQ/MZll
            oEriMZ/+qEu4zCPP9J1+VrEUxaz2o5AYxTMNV+8G9YuCGpP82A8hrgv10N5CVOZE
            jlnLIw9A6+3vuaJ3oyEwHzAdBgNVHQ4EFgQUmQ2/880fvj/PzjeD9c/VflSIWjMw
            CgYIKoZIzj0EAwMDRwAwRAIgULv9VSZZf8UdZXSE4HxE7R1rH4H8phTmoLs4tETC
            Z/0CIF54Gg9wLYYqlyUT/Z3/qhjYnb2+l9z8xaP8GG2rEall
            -----END CERTIFICATE-----
            """;

    @Test
    void aCaCertificateIsAcceptedAndKeptAsPem() {
        WorkloadTrust trust = WorkloadTrust.ofPem(CA);
        assertEquals(1, trust.certificates());
        assertEquals(CA, trust.pem());
        assertEquals("CN=isolation test CA", trust.parse().getFirst().getSubjectX500Principal().getName());
        assertTrue(WorkloadTrust.ofPem("").isEmpty());
        assertTrue(WorkloadTrust.none().isEmpty());
    }

    @Test
    void theSizeBoundIsInclusive() {
        String atBound = CA + "\n".repeat(WorkloadTrust.MAX_PEM_BYTES - CA.getBytes(StandardCharsets.US_ASCII).length);
        assertEquals(WorkloadTrust.MAX_PEM_BYTES, atBound.length());
        assertEquals(1, WorkloadTrust.ofPem(atBound).certificates());
        BackendException e = assertThrows(BackendException.class, () -> WorkloadTrust.ofPem(atBound + "\n"));
        assertEquals(BackendException.Kind.INVALID, e.kind());
        assertTrue(e.getMessage().contains("exceeds " + WorkloadTrust.MAX_PEM_BYTES), e.getMessage());
    }

    @Test
    void theCertificateCountBoundIsInclusive() {
        assertEquals(WorkloadTrust.MAX_CERTIFICATES,
                WorkloadTrust.ofPem(CA.repeat(WorkloadTrust.MAX_CERTIFICATES)).certificates());
        BackendException e = assertThrows(BackendException.class,
                () -> WorkloadTrust.ofPem(CA.repeat(WorkloadTrust.MAX_CERTIFICATES + 1)));
        assertTrue(e.getMessage().contains("more than " + WorkloadTrust.MAX_CERTIFICATES), e.getMessage());
    }

    @Test
    void onlyCaCertificatesInPemAreAccepted() {
        assertTrue(assertThrows(BackendException.class, () -> WorkloadTrust.ofPem(LEAF)).getMessage()
                .contains("CA certificates only"));
        assertTrue(assertThrows(BackendException.class, () -> WorkloadTrust.ofPem(CA + LEAF)).getMessage()
                .contains("CA certificates only"));
        assertThrows(BackendException.class, () -> WorkloadTrust.ofPem("not a certificate"));
        assertThrows(BackendException.class, () -> WorkloadTrust.ofPem(
                "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"));
        assertThrows(BackendException.class, () -> WorkloadTrust.ofPem(CA.replace("MIIB", "MIIB\u00e9")));
    }

    @Test
    void aContextCarriesItsTrustAndDefaultsToNone() {
        SandboxContext context = new SandboxContext(new SandboxId("trust-1"), SandboxSessionId.fresh(),
                PolicySnapshot.of(1, "version: 1\n".getBytes(StandardCharsets.UTF_8)), AgentSpec.of(java.util.List.of("/bin/true")),
                new WorkloadIdentity(1000, 1000, java.util.List.of()));
        assertTrue(context.trust().isEmpty());
        WorkloadTrust trust = WorkloadTrust.ofPem(CA);
        assertEquals(trust, context.withTrust(trust).trust());
        assertThrows(BackendException.class, () -> context.withTrust(null));
    }
}
