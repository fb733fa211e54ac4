package openshell.sandbox;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
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
    private final Cover cover;

    TrustStoreView(Path runtimeDirectory, List<Path> candidates, Cover cover) {
        this.runtimeDirectory = runtimeDirectory;
        this.candidates = List.copyOf(candidates);
        this.cover = cover;
    }

    /**
     * The view of this process's mount namespace over {@link #SYSTEM_BUNDLES}.
     *
     * @param runtimeDirectory a directory only the runtime writes, for the generated files
     * @return the view
     */
    static TrustStoreView system(Path runtimeDirectory) {
        return new TrustStoreView(runtimeDirectory, SYSTEM_BUNDLES, TrustStoreView::mountReadOnly);
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
        Map<String, String> environment = new LinkedHashMap<>();
        for (String variable : VARIABLES) {
            environment.put(variable, covered.getFirst().toString());
        }
        return new Installed(List.copyOf(covered), Map.copyOf(environment));
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
