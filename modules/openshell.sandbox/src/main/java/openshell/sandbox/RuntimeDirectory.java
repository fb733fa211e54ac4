package openshell.sandbox;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;

/**
 * Where the runtime writes the files it bind-mounts into its own view (the resolver file, the
 * trust bundles). A runtime rarely gets to remove them itself: a stopped or deleted sandbox's
 * runtime dies with its pid namespace (SIGKILL), so a directory in the host's temporary directory
 * outlived every sandbox (about 400 KB each). When the supervisor's channel is in a directory
 * private to the runtime (the process driver's per-sandbox run directory: owned by the runtime,
 * no access for anyone else, removed by the driver when the sandbox is deleted), the directory is
 * made there, and what an earlier runtime of the same sandbox left there is removed first.
 * Anywhere else (a container's own temporary directory) it is made in {@code java.io.tmpdir}.
 */
final class RuntimeDirectory {
    /** The name prefix of a runtime directory in a private channel directory. */
    static final String PREFIX = "runtime-";
    /** The name prefix in the temporary directory. */
    static final String TEMPORARY_PREFIX = "openshell-sandbox";

    private RuntimeDirectory() {
    }

    /**
     * Makes a fresh runtime directory.
     *
     * @param channel the supervisor's channel socket, if the link is a Unix socket
     * @param selfUid the runtime's effective uid
     * @return the directory, empty and owned by the runtime
     * @throws IOException when it cannot be made
     */
    static Path create(Optional<Path> channel, int selfUid) throws IOException {
        Optional<Path> home = channel.map(Path::toAbsolutePath).map(Path::getParent)
                .filter(dir -> privateTo(dir, selfUid));
        if (home.isEmpty()) {
            return Files.createTempDirectory(TEMPORARY_PREFIX);
        }
        try (DirectoryStream<Path> stale = Files.newDirectoryStream(home.get(), PREFIX + "*")) {
            for (Path dir : stale) {
                try {
                    remove(dir);
                } catch (IOException e) {
                    // Left for the driver's delete of the run directory; this launch does not depend on it.
                    System.err.println("openshell-sandbox: cannot remove an earlier runtime's " + dir + ": " + e.getMessage());
                }
            }
        }
        return Files.createTempDirectory(home.get(), PREFIX);
    }

    /**
     * Whether {@code dir} is a real directory (not a link) owned by {@code uid} that nobody else may
     * enter, list or write.
     */
    static boolean privateTo(Path dir, int uid) {
        try {
            Map<String, Object> a = Files.readAttributes(dir, "unix:isDirectory,uid,mode", LinkOption.NOFOLLOW_LINKS);
            int mode = (Integer) a.get("mode");
            return (Boolean) a.get("isDirectory") && (Integer) a.get("uid") == uid && (mode & 077) == 0;
        } catch (IOException | UnsupportedOperationException e) {
            return false;
        }
    }

    /**
     * Removes a runtime directory: every entry directly in it (none is a directory; links are
     * removed, not followed), then the directory.
     *
     * @throws IOException when something in it cannot be removed
     */
    static void remove(Path dir) throws IOException {
        if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
            Files.deleteIfExists(dir);
            return;
        }
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(dir)) {
            for (Path entry : entries) {
                Files.deleteIfExists(entry);
            }
        }
        Files.deleteIfExists(dir);
    }
}
