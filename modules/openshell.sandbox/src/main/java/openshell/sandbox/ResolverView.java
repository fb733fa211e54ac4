package openshell.sandbox;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import openshell.linux.LinuxException;

/**
 * The workload's view of {@code /etc/resolv.conf}: a generated file naming only the DNS relay,
 * bind-mounted read-only over the real one in the runtime's own mount namespace (which the
 * workload shares and cannot change: it has no capabilities). Mount propagation is made private
 * first, so nothing of this leaks to the host.
 */
final class ResolverView {
    /** What the workload's resolver reads. */
    static final String CONTENT = "# written by openshell-sandbox: every query goes to the runtime's relay\n"
            + "nameserver 127.0.0.53\noptions edns0 trust-ad\n";
    static final long MS_RDONLY = 1;
    static final long MS_REMOUNT = 32;
    static final long MS_BIND = 4096;
    static final long MS_REC = 16384;
    static final long MS_PRIVATE = 1L << 18;

    static {
        Native.register(ResolverView.class, NativeLibrary.getInstance("libc.so.6"));
    }

    private ResolverView() {
    }

    private static native int mount(String source, String target, String type, long flags, String data);

    /**
     * Installs the view in the calling thread's mount namespace.
     *
     * @param runtimeDirectory a directory only the runtime writes, for the generated file
     * @param target           normally {@code /etc/resolv.conf}
     * @return the generated file
     */
    static Path install(Path runtimeDirectory, Path target) throws IOException {
        Path file = runtimeDirectory.resolve("resolv.conf");
        Files.writeString(file, CONTENT, StandardCharsets.US_ASCII);
        if (!Files.exists(target)) {
            throw new LinuxException("resolver view", 2, target + " does not exist to be covered");
        }
        check(mount(null, "/", null, MS_REC | MS_PRIVATE, null), "mount(/, MS_REC|MS_PRIVATE)");
        check(mount(file.toString(), target.toString(), null, MS_BIND, null), "mount(bind " + target + ")");
        check(mount(null, target.toString(), null, MS_BIND | MS_REMOUNT | MS_RDONLY, null), "mount(remount ro " + target + ")");
        return file;
    }

    /**
     * Where the runtime cannot mount (a container's PID 1 without capabilities): the engine must
     * already have written the view ({@code --dns 127.0.0.53}); anything else is refused, so a
     * workload never silently asks a resolver the runtime does not answer for.
     *
     * @param target normally {@code /etc/resolv.conf}
     * @return the nameservers it names (only the relay)
     * @throws LinuxException naming what the file says instead
     */
    static java.util.List<String> verify(Path target) throws IOException {
        if (!Files.isRegularFile(target)) {
            throw new LinuxException("resolver view", 2, target + " does not exist: the engine must write it naming only 127.0.0.53");
        }
        java.util.List<String> servers = Files.readAllLines(target, StandardCharsets.US_ASCII).stream()
                .map(String::strip).filter(l -> l.startsWith("nameserver"))
                .map(l -> l.substring("nameserver".length()).strip()).toList();
        if (!servers.equals(java.util.List.of("127.0.0.53"))) {
            throw new LinuxException("resolver view", 22, target + " names nameservers " + servers
                    + "; this runtime cannot cover it (no CAP_SYS_ADMIN), so the engine must name only 127.0.0.53 (docker --dns 127.0.0.53)");
        }
        return servers;
    }

    private static void check(int rc, String call) {
        if (rc != 0) {
            throw new LinuxException(call, Native.getLastError(), "");
        }
    }
}
