package openshell.sandbox;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.KeyStore;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import openshell.isolation.BackendException;
import openshell.isolation.WorkloadTrust;

/**
 * The workload's view of its system trust store: for each common CA bundle path that exists, a
 * generated bundle (what the workload saw there, then the supervisor's interception CA)
 * bind-mounted read-only over it in the runtime's mount namespace, which the workload shares and
 * cannot change (no capabilities), made private first so nothing leaks to the host; plus the
 * environment variables that point OpenSSL, curl, Python requests and Node at the first one.
 * Java reads neither: each distinct Java keystore (the distributions' shared one, and each JDK's
 * own cacerts) is covered the same way with a copy that also trusts the added certificates.
 * Installed once, at startAgent, before any workload process exists.
 */
final class TrustStoreView {
    /** Where distributions keep the PEM bundle most TLS clients read by default, first the preferred one. */
    static final List<Path> SYSTEM_BUNDLES = List.of(
            Path.of("/etc/ssl/certs/ca-certificates.crt"),            // Debian, Ubuntu, Alpine, Arch
            Path.of("/etc/pki/tls/certs/ca-bundle.crt"),              // Fedora, RHEL, CentOS
            Path.of("/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"), // RHEL 7+
            Path.of("/etc/ssl/ca-bundle.pem"),                        // openSUSE
            Path.of("/etc/pki/tls/cacert.pem"),                       // OpenELEC
            Path.of("/etc/ssl/cert.pem"));                            // Alpine, BSD-derived layouts
    /** Variables set in the agent's and every exec's environment (an explicit value of the caller wins). */
    static final List<String> VARIABLES = List.of("SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE",
            "NODE_EXTRA_CA_CERTS");
    /** Largest system bundle read (Debian's is about 220 KB); a larger one fails the install. */
    static final long MAX_SYSTEM_BUNDLE_BYTES = 8L * 1024 * 1024;
    /**
     * Java's trust stores: distributions' shared keystores, which JDKs link their own
     * {@code lib/security/cacerts} to (Debian's and Temurin's packages here both do), then each
     * JDK's own under {@link #JDK_HOMES}. Java ignores the PEM bundle and its variables.
     */
    static final List<Path> JAVA_KEYSTORES = List.of(
            Path.of("/etc/ssl/certs/java/cacerts"),                   // Debian, Ubuntu, Alpine
            Path.of("/etc/pki/ca-trust/extracted/java/cacerts"),      // Fedora, RHEL
            Path.of("/etc/pki/java/cacerts"));                        // RHEL's compatibility link
    /** Directories whose subdirectories are JDKs with their own {@code lib/security/cacerts}. */
    static final List<Path> JDK_HOMES = List.of(Path.of("/usr/lib/jvm"), Path.of("/opt/java"), Path.of("/usr/java"));
    /**
     * Distinct Java keystores covered at most; a JDK beyond it keeps its own and does not trust the
     * interception CA (its TLS then fails, which is closed, not open).
     */
    static final int MAX_JAVA_KEYSTORES = 16;
    /** Largest Java keystore read (a JDK's is about 200 KB); a larger one fails the install. */
    static final long MAX_JAVA_KEYSTORE_BYTES = 8L * 1024 * 1024;
    /** The password every JDK's cacerts is published with; the generated stores load with any. */
    static final String DEFAULT_KEYSTORE_PASSWORD = "changeit";

    static final long MS_RDONLY = 1;
    static final long MS_REMOUNT = 32;
    static final long MS_BIND = 4096;
    static final long MS_REC = 16384;
    static final long MS_PRIVATE = 1L << 18;

    /** Covers one target with one generated file; the real one mounts, tests record. */
    @FunctionalInterface
    interface Cover {
        void bindReadOnly(Path file, Path target);
    }

    /**
     * What an install did.
     *
     * @param covered     the trust-store paths now showing a generated bundle
     * @param environment the variables to add to every workload process
     */
    record Installed(List<Path> covered, Map<String, String> environment) {
    }

    private final Path runtimeDirectory;
    private final List<Path> candidates;
    private final List<Path> javaCandidates;
    private final Cover cover;

    TrustStoreView(Path runtimeDirectory, List<Path> candidates, Cover cover) {
        this(runtimeDirectory, candidates, List.of(), cover);
    }

    TrustStoreView(Path runtimeDirectory, List<Path> candidates, List<Path> javaCandidates, Cover cover) {
        this.runtimeDirectory = runtimeDirectory;
        this.candidates = List.copyOf(candidates);
        this.javaCandidates = List.copyOf(javaCandidates);
        this.cover = cover;
    }

    /**
     * The view of this process's mount namespace over {@link #SYSTEM_BUNDLES}.
     *
     * @param runtimeDirectory a directory only the runtime writes, for the generated files
     * @return the view
     */
    static TrustStoreView system(Path runtimeDirectory, RuntimePrivilege privilege) {
        if (privilege.canMount()) {
            return system(runtimeDirectory);
        }
        return new TrustStoreView(runtimeDirectory, SYSTEM_BUNDLES, List.of(), null);
    }

    /** The file a runtime that cannot mount gives its workload ({@link #installBeside}). */
    static final String BESIDE_FILE = "workload-trust.pem";

    /**
     * Where a runtime without CAP_SYS_ADMIN (a container's PID 1) puts the workload's bundle: made
     * empty at start, so the workload's Landlock read-only rules can name it before the first
     * launch; filled at startAgent.
     *
     * @param runtimeDirectory the runtime's private directory
     * @return the (empty) file
     */
    static Path besideFile(Path runtimeDirectory) throws IOException {
        Path file = runtimeDirectory.resolve(BESIDE_FILE);
        Files.write(file, new byte[0]);
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-r--r--"));
        return file;
    }

    /**
     * Without a mount, nothing covers the image's own trust store: the generated bundle (the
     * image's first system bundle, if it has one, then the added certificates) is written to
     * {@link #BESIDE_FILE} and only the variables point at it. Clients that honour them (OpenSSL's
     * SSL_CERT_FILE, curl, Python requests, Node) trust the interception CA; one that reads a fixed
     * path or a Java keystore does not, and its intercepted TLS fails (closed, never open).
     */
    private Installed installBeside(WorkloadTrust trust) {
        Path file = runtimeDirectory.resolve(BESIDE_FILE);
        Path system = candidates.stream().filter(Files::isRegularFile).findFirst().orElse(null);
        String text;
        if (system != null) {
            text = bundle(system, trust);
        } else {
            StringBuilder out = new StringBuilder("# added by openshell-sandbox for this sandbox only (the image has no system bundle):");
            trust.parse().forEach(c -> out.append(" [").append(c.getSubjectX500Principal().getName()).append(']'));
            text = out.append('\n').append(trust.pem()).toString();
        }
        try {
            Files.writeString(file, text, StandardCharsets.US_ASCII);
        } catch (IOException e) {
            throw failed("cannot write " + file, e);
        }
        Map<String, String> environment = new LinkedHashMap<>();
        for (String variable : VARIABLES) {
            environment.put(variable, file.toString());
        }
        return new Installed(List.of(file), Map.copyOf(environment));
    }

    static TrustStoreView system(Path runtimeDirectory) {
        return new TrustStoreView(runtimeDirectory, SYSTEM_BUNDLES, javaKeystores(JAVA_KEYSTORES, JDK_HOMES),
                TrustStoreView::mountReadOnly);
    }

    /**
     * @param shared the distributions' shared keystores
     * @param homes  directories of JDKs
     * @return the shared keystores, then each JDK's {@code lib/security/cacerts} (and a JRE's), in name order
     */
    static List<Path> javaKeystores(List<Path> shared, List<Path> homes) {
        List<Path> out = new ArrayList<>(shared);
        for (Path home : homes) {
            if (!Files.isDirectory(home)) {
                continue;
            }
            try (var jdks = Files.list(home)) {
                jdks.sorted().limit(MAX_JAVA_KEYSTORES * 4L).forEach(jdk -> {
                    out.add(jdk.resolve("lib/security/cacerts"));
                    out.add(jdk.resolve("jre/lib/security/cacerts"));
                });
            } catch (IOException e) {
                // An unreadable directory holds no JDK this workload can run either.
            }
        }
        return List.copyOf(out);
    }

    /**
     * Generates and covers every existing candidate; fails closed (nothing is started) if none
     * exists or one cannot be read or covered.
     *
     * @param trust the CA certificates to add (not empty)
     * @return what was covered and the environment to add
     * @throws BackendException FAILED naming the path and the reason
     */
    Installed install(WorkloadTrust trust) {
        if (trust.isEmpty()) {
            throw new BackendException(BackendException.Kind.INVALID, "no workload trust to install");
        }
        if (cover == null) {
            return installBeside(trust);
        }
        // Two names for one file (a distribution's compatibility symlink) get one generated bundle.
        Set<Path> real = new LinkedHashSet<>();
        List<Path> covered = new ArrayList<>();
        for (Path candidate : candidates) {
            if (!Files.isRegularFile(candidate)) {
                continue;
            }
            try {
                Path target = candidate.toRealPath();
                covered.add(candidate);
                real.add(target);
            } catch (IOException e) {
                throw failed("cannot resolve " + candidate, e);
            }
        }
        if (real.isEmpty()) {
            throw new BackendException(BackendException.Kind.FAILED, "the workload has no system trust store to add the "
                    + "interception CA to (none of " + candidates + " exists)");
        }
        int n = 0;
        for (Path target : real) {
            Path file = runtimeDirectory.resolve("trust-" + (n++) + ".pem");
            try {
                Files.writeString(file, bundle(target, trust), StandardCharsets.US_ASCII);
                Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-r--r--"));
            } catch (IOException e) {
                throw failed("cannot write " + file, e);
            }
            cover.bindReadOnly(file, target);
        }
        covered.addAll(installJava(trust));
        Map<String, String> environment = new LinkedHashMap<>();
        for (String variable : VARIABLES) {
            environment.put(variable, covered.getFirst().toString());
        }
        return new Installed(List.copyOf(covered), Map.copyOf(environment));
    }

    /**
     * Covers each distinct existing Java keystore (up to {@link #MAX_JAVA_KEYSTORES}) with a copy
     * that also trusts the added certificates.
     *
     * @return the candidates now covered
     */
    private List<Path> installJava(WorkloadTrust trust) {
        Set<Path> real = new LinkedHashSet<>();
        List<Path> covered = new ArrayList<>();
        for (Path candidate : javaCandidates) {
            if (!Files.isRegularFile(candidate)) {
                continue;
            }
            Path target;
            try {
                target = candidate.toRealPath();
            } catch (IOException e) {
                throw failed("cannot resolve " + candidate, e);
            }
            if (real.contains(target) || real.size() < MAX_JAVA_KEYSTORES) {
                real.add(target);
                covered.add(candidate);
            }
        }
        int n = 0;
        for (Path target : real) {
            Path file = runtimeDirectory.resolve("trust-java-" + (n++) + ".p12");
            try {
                Files.write(file, keystore(target, trust));
                Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-r--r--"));
            } catch (IOException e) {
                throw failed("cannot write " + file, e);
            }
            cover.bindReadOnly(file, target);
        }
        return covered;
    }

    /**
     * The Java keystore at {@code target} (JKS or PKCS12, as JDKs publish them) with the added
     * certificates as trusted entries, as PKCS12 without integrity or encryption, like a JDK's own
     * cacerts: it then loads with whatever password a client passes, or none.
     */
    static byte[] keystore(Path target, WorkloadTrust trust) {
        byte[] original;
        try (InputStream in = Files.newInputStream(target)) {
            original = in.readNBytes((int) MAX_JAVA_KEYSTORE_BYTES + 1);
        } catch (IOException e) {
            throw failed("cannot read " + target, e);
        }
        if (original.length > MAX_JAVA_KEYSTORE_BYTES) {
            throw new BackendException(BackendException.Kind.FAILED, target + " is larger than "
                    + MAX_JAVA_KEYSTORE_BYTES + " bytes");
        }
        try {
            KeyStore system = load(target, original);
            // Read at each store: certificates in the clear and no MAC, as in a JDK's own cacerts.
            System.setProperty("keystore.pkcs12.certProtectionAlgorithm", "NONE");
            System.setProperty("keystore.pkcs12.macAlgorithm", "NONE");
            KeyStore out = KeyStore.getInstance("PKCS12");
            out.load(null, null);
            for (String alias : java.util.Collections.list(system.aliases())) {
                if (system.isCertificateEntry(alias)) {
                    out.setCertificateEntry(alias, system.getCertificate(alias));
                }
            }
            int n = 0;
            for (var certificate : trust.parse()) {
                String alias;
                do {
                    alias = "openshell-sandbox-" + n++;
                } while (out.containsAlias(alias));
                out.setCertificateEntry(alias, certificate);
            }
            var bytes = new java.io.ByteArrayOutputStream();
            out.store(bytes, DEFAULT_KEYSTORE_PASSWORD.toCharArray());
            return bytes.toByteArray();
        } catch (java.security.GeneralSecurityException | IOException e) {
            throw new BackendException(BackendException.Kind.FAILED, "trust store view: cannot rewrite the Java keystore "
                    + target + ": " + e.getMessage(), e);
        }
    }

    private static KeyStore load(Path target, byte[] original) throws java.security.GeneralSecurityException {
        // JDKs probe JKS and PKCS12 alike; "changeit" first, then none (a JKS loads without its integrity check).
        for (String type : List.of("PKCS12", "JKS")) {
            for (char[] password : java.util.Arrays.asList(DEFAULT_KEYSTORE_PASSWORD.toCharArray(), null)) {
                try {
                    KeyStore store = KeyStore.getInstance(type);
                    store.load(new java.io.ByteArrayInputStream(original), password);
                    if (store.size() > 0) {
                        return store;
                    }
                } catch (IOException | java.security.GeneralSecurityException e) {
                    // The next type or password.
                }
            }
        }
        throw new java.security.KeyStoreException("not a JKS or PKCS12 keystore with certificates: " + target);
    }

    /** The workload's current bundle at {@code target}, then the added certificates. */
    static String bundle(Path target, WorkloadTrust trust) {
        byte[] system;
        try (InputStream in = Files.newInputStream(target)) {
            system = in.readNBytes((int) MAX_SYSTEM_BUNDLE_BYTES + 1);
        } catch (IOException e) {
            throw failed("cannot read " + target, e);
        }
        if (system.length > MAX_SYSTEM_BUNDLE_BYTES) {
            throw new BackendException(BackendException.Kind.FAILED, target + " is larger than " + MAX_SYSTEM_BUNDLE_BYTES
                    + " bytes");
        }
        String text = new String(system, StandardCharsets.ISO_8859_1);
        StringBuilder out = new StringBuilder(text);
        if (!text.isEmpty() && !text.endsWith("\n")) {
            out.append('\n');
        }
        out.append("# added by openshell-sandbox for this sandbox only:");
        trust.parse().forEach(c -> out.append(" [").append(c.getSubjectX500Principal().getName()).append(']'));
        out.append('\n').append(trust.pem());
        return out.toString();
    }

    /**
     * @param environment the caller's environment
     * @param added       the view's variables
     * @return the caller's environment with each added variable it does not set itself
     */
    static Map<String, String> merged(Map<String, String> environment, Map<String, String> added) {
        if (added.isEmpty()) {
            return environment;
        }
        Map<String, String> out = new LinkedHashMap<>(environment);
        added.forEach(out::putIfAbsent);
        return out;
    }

    private static void mountReadOnly(Path file, Path target) {
        check(Libc.mount(null, "/", null, MS_REC | MS_PRIVATE, null), "mount(/, MS_REC|MS_PRIVATE)");
        check(Libc.mount(file.toString(), target.toString(), null, MS_BIND, null), "mount(bind " + target + ")");
        check(Libc.mount(null, target.toString(), null, MS_BIND | MS_REMOUNT | MS_RDONLY, null),
                "mount(remount ro " + target + ")");
    }

    /** mount(2), registered only when a real view is installed. */
    private static final class Libc {
        static {
            Native.register(Libc.class, NativeLibrary.getInstance("libc.so.6"));
        }

        private Libc() {
        }

        static native int mount(String source, String target, String type, long flags, String data);
    }

    private static void check(int rc, String call) {
        if (rc != 0) {
            throw new BackendException(BackendException.Kind.FAILED, "trust store view: " + call + " failed, errno "
                    + Native.getLastError());
        }
    }

    private static BackendException failed(String what, IOException e) {
        return new BackendException(BackendException.Kind.FAILED, "trust store view: " + what + ": " + e.getMessage(), e);
    }
}
