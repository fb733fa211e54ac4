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

    private static void check(int rc, String call) {
        if (rc != 0) {
            throw new LinuxException(call, Native.getLastError(), "");
        }
    }
}
