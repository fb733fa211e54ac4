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

    /** A keystore of {@code type} holding the test CA as {@code alias}, stored with "changeit". */
    private Path keystore(String name, String type, String alias) throws Exception {
        java.security.KeyStore store = java.security.KeyStore.getInstance(type);
        store.load(null, null);
        store.setCertificateEntry(alias, WorkloadTrust.ofPem(CA).parse().getFirst());
        Path file = dir.resolve(name);
        Files.createDirectories(file.getParent());
        try (var out = Files.newOutputStream(file)) {
            store.store(out, "changeit".toCharArray());
        }
        return file;
    }

    private static java.security.KeyStore read(byte[] bytes, char[] password) throws Exception {
        java.security.KeyStore store = java.security.KeyStore.getInstance("PKCS12");
        store.load(new java.io.ByteArrayInputStream(bytes), password);
        return store;
    }

    /**
     * Java ignores the PEM bundle: a JDK's JKS or PKCS12 cacerts is rewritten with its entries and
     * the interception CA, and the copy loads with "changeit", no password or any other one.
     */
    @Test
    void javaKeystoresKeepTheirEntriesAndAddTheCaLoadableWithAnyPassword() throws Exception {
        for (String type : List.of("JKS", "PKCS12")) {
            Path original = keystore(type + "-cacerts", type, "debian-root");
            byte[] copy = TrustStoreView.keystore(original, WorkloadTrust.ofPem(CA));
            for (char[] password : java.util.Arrays.asList(null, "changeit".toCharArray(), "other".toCharArray())) {
                java.security.KeyStore store = read(copy, password);
                assertEquals(List.of("debian-root", "openshell-sandbox-0"),
                        java.util.Collections.list(store.aliases()).stream().sorted().toList(), type);
                assertTrue(store.isCertificateEntry("openshell-sandbox-0"), type);
            }
        }
        Path garbage = Files.writeString(dir.resolve("garbage"), "not a keystore");
        BackendException e = assertThrows(BackendException.class,
                () -> TrustStoreView.keystore(garbage, WorkloadTrust.ofPem(CA)));
        assertTrue(e.getMessage().contains("not a JKS or PKCS12 keystore"), e.getMessage());
    }

    @Test
    void aJavaKeystoreAtTheBoundIsReadAndOneByteMoreFails() throws Exception {
        Path big = dir.resolve("big-cacerts");
        try (var out = Files.newOutputStream(big)) {
            out.write(new byte[(int) TrustStoreView.MAX_JAVA_KEYSTORE_BYTES]);
        }
        BackendException at = assertThrows(BackendException.class, () -> TrustStoreView.keystore(big, WorkloadTrust.ofPem(CA)));
        assertTrue(at.getMessage().contains("not a JKS or PKCS12"), "read whole at the bound: " + at.getMessage());
        Files.write(big, new byte[1], java.nio.file.StandardOpenOption.APPEND);
        BackendException past = assertThrows(BackendException.class, () -> TrustStoreView.keystore(big, WorkloadTrust.ofPem(CA)));
        assertTrue(past.getMessage().contains("larger than"), past.getMessage());
    }

    /**
     * Each distinct Java keystore is covered once (a JDK's cacerts linked to the shared one is the
     * shared one), at most MAX_JAVA_KEYSTORES of them; the PEM environment is unchanged.
     */
    @Test
    void distinctJavaKeystoresAreCoveredOnceUpToTheBound() throws Exception {
        Path runtime = Files.createDirectory(dir.resolve("runtime"));
        Path pem = Files.writeString(dir.resolve("ca-certificates.crt"), "");
        Path shared = keystore("etc/java/cacerts", "JKS", "shared-root");
        Path jvm = Files.createDirectories(dir.resolve("jvm"));
        Path linked = Files.createDirectories(jvm.resolve("a-linked/lib/security")).resolve("cacerts");
        Files.createSymbolicLink(linked, shared);
        for (int i = 0; i < TrustStoreView.MAX_JAVA_KEYSTORES; i++) {
            keystore("jvm/jdk-" + (char) ('b' + i) + "/lib/security/cacerts", "PKCS12", "own-root");
        }
        List<Path> candidates = TrustStoreView.javaKeystores(List.of(shared, dir.resolve("etc/none/cacerts")),
                List.of(jvm, dir.resolve("no-such-home")));
        assertEquals(2 + 2 * (1 + TrustStoreView.MAX_JAVA_KEYSTORES), candidates.size(), candidates.toString());
        List<String> covered = new ArrayList<>();
        TrustStoreView view = new TrustStoreView(runtime, List.of(pem), candidates,
                (file, target) -> covered.add(file.getFileName() + "->" + dir.relativize(target)));

        TrustStoreView.Installed installed = view.install(WorkloadTrust.ofPem(CA));

        // The shared one, then 15 own ones: the 16th JDK's own keystore is beyond the bound.
        assertEquals(1 + TrustStoreView.MAX_JAVA_KEYSTORES, covered.size(), covered.toString());
        assertEquals("trust-java-0.p12->etc/java/cacerts", covered.get(1));
        assertEquals("trust-java-15.p12->jvm/jdk-p/lib/security/cacerts", covered.getLast());
        assertTrue(installed.covered().contains(linked), "the linked JDK counts as covered");
        assertTrue(!installed.covered().contains(dir.resolve("jvm/jdk-q/lib/security/cacerts")), "beyond the bound");
        assertEquals(pem.toString(), installed.environment().get("SSL_CERT_FILE"));
        assertTrue(read(Files.readAllBytes(runtime.resolve("trust-java-0.p12")), null).containsAlias("shared-root"));
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
