package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import openshell.isolation.BackendException;
import openshell.isolation.WorkloadTrust;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The generated bundles and environment; the real bind mounts are exercised by tests/sandbox. */
class TrustStoreViewTest {
    /** A self-signed CA made with keytool for this test. */
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

    @TempDir
    Path dir;

    @Test
    void everyExistingBundleIsCoveredOnceWithTheSystemCasFollowedByTheInterceptionCa() throws IOException {
        Path runtime = Files.createDirectory(dir.resolve("runtime"));
        Path debian = Files.writeString(dir.resolve("ca-certificates.crt"), "-----BEGIN CERTIFICATE-----\nSYSTEM\n"
                + "-----END CERTIFICATE-----");
        Path alias = Files.createSymbolicLink(dir.resolve("ca-bundle.crt"), debian);
        Path fedora = Files.writeString(dir.resolve("tls-ca-bundle.pem"), "");
        Path missing = dir.resolve("cert.pem");
        List<String> covered = new ArrayList<>();
        TrustStoreView view = new TrustStoreView(runtime, List.of(missing, debian, alias, fedora),
                (file, target) -> covered.add(file.getFileName() + "->" + target.getFileName()));

        TrustStoreView.Installed installed = view.install(WorkloadTrust.ofPem(CA));

        assertEquals(List.of("trust-0.pem->ca-certificates.crt", "trust-1.pem->tls-ca-bundle.pem"), covered);
        assertEquals(List.of(debian, alias, fedora), installed.covered());
        String first = Files.readString(runtime.resolve("trust-0.pem"));
        assertTrue(first.startsWith("-----BEGIN CERTIFICATE-----\nSYSTEM\n-----END CERTIFICATE-----\n"
                + "# added by openshell-sandbox for this sandbox only: [CN=isolation test CA]\n-----BEGIN"), first);
        assertTrue(first.endsWith(CA), first);
        assertEquals("rw-r--r--", java.nio.file.attribute.PosixFilePermissions.toString(
                Files.getPosixFilePermissions(runtime.resolve("trust-0.pem"))));
        assertTrue(Files.readString(runtime.resolve("trust-1.pem")).startsWith("# added by openshell-sandbox"));
        for (String variable : TrustStoreView.VARIABLES) {
            assertEquals(debian.toString(), installed.environment().get(variable), variable);
        }
    }

    @Test
    void noSystemTrustStoreFailsClosed() {
        TrustStoreView view = new TrustStoreView(dir, List.of(dir.resolve("none.crt")), (file, target) -> {
            throw new AssertionError("nothing may be covered");
        });
        BackendException e = assertThrows(BackendException.class, () -> view.install(WorkloadTrust.ofPem(CA)));
        assertEquals(BackendException.Kind.FAILED, e.kind());
        assertTrue(e.getMessage().contains("no system trust store"), e.getMessage());
        assertThrows(BackendException.class, () -> view.install(WorkloadTrust.none()));
    }

    @Test
    void aSystemBundleAtTheBoundIsReadAndOneByteMoreFails() throws IOException {
        Path big = dir.resolve("big.crt");
        try (var out = Files.newOutputStream(big)) {
            byte[] line = "A".repeat(1023).concat("\n").getBytes(java.nio.charset.StandardCharsets.US_ASCII);
            for (long written = 0; written < TrustStoreView.MAX_SYSTEM_BUNDLE_BYTES; written += line.length) {
                out.write(line);
            }
        }
        assertEquals(TrustStoreView.MAX_SYSTEM_BUNDLE_BYTES, Files.size(big));
        assertTrue(TrustStoreView.bundle(big, WorkloadTrust.ofPem(CA)).endsWith(CA));
        Files.writeString(big, "\n", java.nio.file.StandardOpenOption.APPEND);
        BackendException e = assertThrows(BackendException.class, () -> TrustStoreView.bundle(big, WorkloadTrust.ofPem(CA)));
        assertTrue(e.getMessage().contains("larger than"), e.getMessage());
    }

    @Test
    void theCallersOwnValueWins() {
        Map<String, String> added = Map.of("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt");
        assertEquals(Map.of("SSL_CERT_FILE", "/mine", "A", "b"),
                TrustStoreView.merged(Map.of("SSL_CERT_FILE", "/mine", "A", "b"), added));
        assertEquals(Map.of("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt", "A", "b"),
                TrustStoreView.merged(Map.of("A", "b"), added));
    }
}
