package openshell.tests.sandbox;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;

/**
 * A throwaway upstream CA and one server certificate for the given names, made with the JDK's
 * keytool (no other tool needed): what an operator passes as an upstream trust anchor.
 */
record DemoPki(X509Certificate ca, SSLContext server) {
    private static final String PASSWORD = "changeit";

    static DemoPki create(Path dir, String... names) throws Exception {
        String keytool = Path.of(System.getProperty("java.home"), "bin", "keytool").toString();
        String ca = dir.resolve("ca.p12").toString();
        String server = dir.resolve("server.p12").toString();
        keytool(keytool, "-genkeypair", "-keystore", ca, "-alias", "ca", "-keyalg", "EC", "-groupname", "secp256r1",
                "-dname", "CN=OpenShell test upstream CA", "-ext", "bc:c", "-validity", "2");
        keytool(keytool, "-genkeypair", "-keystore", server, "-alias", "server", "-keyalg", "EC", "-groupname", "secp256r1",
                "-dname", "CN=" + names[0], "-validity", "2");
        keytool(keytool, "-certreq", "-keystore", server, "-alias", "server", "-file", dir.resolve("server.csr").toString());
        String san = List.of(names).stream().map(n -> "dns:" + n).collect(Collectors.joining(","));
        keytool(keytool, "-gencert", "-keystore", ca, "-alias", "ca", "-infile", dir.resolve("server.csr").toString(),
                "-outfile", dir.resolve("server.pem").toString(), "-rfc", "-validity", "2",
                "-ext", "san=" + san, "-ext", "eku=serverAuth");
        keytool(keytool, "-exportcert", "-keystore", ca, "-alias", "ca", "-rfc", "-file", dir.resolve("ca.pem").toString());
        keytool(keytool, "-importcert", "-noprompt", "-keystore", server, "-alias", "ca", "-file", dir.resolve("ca.pem").toString());
        keytool(keytool, "-importcert", "-keystore", server, "-alias", "server", "-file", dir.resolve("server.pem").toString());
        X509Certificate certificate;
        try (InputStream in = new ByteArrayInputStream(Files.readAllBytes(dir.resolve("ca.pem")))) {
            certificate = (X509Certificate) CertificateFactory.getInstance("X.509").generateCertificate(in);
        }
        return new DemoPki(certificate, serverContext(dir.resolve("server.p12")));
    }

    private static void keytool(String... command) throws Exception {
        List<String> argv = new ArrayList<>(List.of(command));
        argv.addAll(List.of("-storepass", PASSWORD));
        Process p = new ProcessBuilder(argv).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            fail("keytool failed: " + argv + "\n" + out);
        }
    }

    private static SSLContext serverContext(Path p12) throws Exception {
        KeyStore store = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(p12)) {
            store.load(in, PASSWORD.toCharArray());
        }
        KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keys.init(store, PASSWORD.toCharArray());
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(keys.getKeyManagers(), null, null);
        return context;
    }
}
