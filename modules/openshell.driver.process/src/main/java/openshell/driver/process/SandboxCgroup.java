package openshell.driver.process;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;

import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;
import openshell.isolation.SandboxId;

/**
 * The cgroup v2 directory delegated to one sandbox: created by the driver (host root), given to
 * the sandbox's mapped root, and entered by the runtime before it execs. Inside its user namespace
 * the runtime can then create its workload leaf and kill it with {@code cgroup.kill}; nothing
 * outside this directory is writable to it. Delete kills whatever is left and removes it.
 */
record SandboxCgroup(Path path) {
    /** Files the delegatee must own to manage its subtree (cgroup v2 delegation). */
    static final List<String> DELEGATED_FILES = List.of("cgroup.procs", "cgroup.threads", "cgroup.subtree_control");
    /** Prefix of every sandbox's cgroup directory under the cgroup2 mount. */
    static final String PREFIX = "openshell-";

    /** @return the cgroup2 mount point, if any */
    static Optional<Path> v2Root() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
                int dash = line.indexOf(" - ");
                if (dash > 0 && line.substring(dash + 3).startsWith("cgroup2 ")) {
                    return Optional.of(Path.of(line.split(" ")[4]));
                }
            }
            return Optional.empty();
        } catch (IOException e) {
            return Optional.empty();
        }
    }

    /** @return where the sandbox's cgroup is (whether or not it exists) */
    static Optional<SandboxCgroup> of(SandboxId id) {
        return named(PREFIX + id.value());
    }

    /**
     * @param name a directory name under the cgroup2 mount, {@link #PREFIX} first
     * @return where that cgroup is (whether or not it exists)
     */
    static Optional<SandboxCgroup> named(String name) {
        return v2Root().map(root -> new SandboxCgroup(root.resolve(name)));
    }

    /** @return the directory's name, which a topology records */
    String name() {
        return path.getFileName().toString();
    }

    /**
     * Creates (or reuses) the directory and delegates it to the sandbox's mapped root.
     *
     * @param owner the host uid (and gid) of the sandbox's root
     */
    void create(long owner) {
        try {
            if (!Files.isDirectory(path)) {
                Files.createDirectory(path);
            }
            chown(path, owner);
            for (String file : DELEGATED_FILES) {
                chown(path.resolve(file), owner);
            }
        } catch (IOException e) {
            throw new DriverException(Kind.UNAVAILABLE, "cannot delegate cgroup " + path + " to the sandbox: " + e.getMessage(), e);
        }
    }

    /** @return the command prefix that moves the started shell into this cgroup, then execs the rest */
    List<String> enterPrefix() {
        return List.of("/bin/sh", "-c", "echo $$ > \"$0\" && exec \"$@\"", path.resolve("cgroup.procs").toString());
    }

    /** Kills every process left in the cgroup tree and removes it (the trusted cleanup path). */
    void remove() {
        if (!Files.isDirectory(path)) {
            return;
        }
        try {
            Files.writeString(path.resolve("cgroup.kill"), "1");
        } catch (IOException e) {
            // Older kernels have no cgroup.kill; the pid namespace kill already ended everything.
        }
        try (Stream<Path> walk = Files.walk(path)) {
            // Deepest directories first; cgroup directories are removed with rmdir, their files go with them.
            for (Path dir : walk.filter(Files::isDirectory).sorted((a, b) -> b.getNameCount() - a.getNameCount()).toList()) {
                removeDirectory(dir);
            }
        } catch (IOException e) {
            throw new DriverException(Kind.FAILED, "cannot remove cgroup " + path + ": " + e.getMessage(), e);
        }
    }

    private static void removeDirectory(Path dir) throws IOException {
        long deadline = System.nanoTime() + ProcessDriver.SUPERVISOR_KILL_TIMEOUT.toNanos();
        while (true) {
            try {
                Files.deleteIfExists(dir);
                return;
            } catch (java.nio.file.FileSystemException e) {
                // EBUSY while killed processes are still leaving the cgroup.
                if (System.nanoTime() > deadline) {
                    throw e;
                }
                try {
                    Thread.sleep(10);
                } catch (InterruptedException interrupted) {
                    Thread.currentThread().interrupt();
                    throw e;
                }
            }
        }
    }

    private static void chown(Path p, long owner) throws IOException {
        Files.setAttribute(p, "unix:uid", (int) owner);
        Files.setAttribute(p, "unix:gid", (int) owner);
    }
}
