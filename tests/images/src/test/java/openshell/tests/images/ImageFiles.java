package openshell.tests.images;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/** What the image tests read and run: the built image, its files, and programs with bounded waits. */
final class ImageFiles {
    /** Longest wait for one run of the image or a build tool (a loaded 2-core machine). */
    static final Duration WAIT = Duration.ofSeconds(120);
    /** The C library's own shared objects: the only libraries an image may take from the host. */
    static final Set<String> C_LIBRARY = Set.of("libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0",
            "librt.so.1", "ld-linux-x86-64.so.2");

    private ImageFiles() {
    }

    /** @return the image {@code jlink/<name>} built, e.g. {@code openshell-sandbox} */
    static Path image(String name) {
        Path image = jlink().resolve(name).resolve("target").resolve(name);
        assertTrue(Files.isDirectory(image.resolve("bin")), "the build made no image at " + image
                + ": the jlink modules link it before this module's tests (./mvnw -B verify)");
        return image;
    }

    /** @return a file of the image's committed recipe, {@code jlink/<name>/src/image/<file>} */
    static Path source(String name, String file) {
        return jlink().resolve(name).resolve("src/image").resolve(file);
    }

    private static Path jlink() {
        try {
            return Path.of(System.getProperty("openshell.jlink.dir")).toRealPath();
        } catch (IOException e) {
            return fail("no jlink/ directory: " + e);
        }
    }

    /** The modules the image's {@code release} file lists. */
    static Set<String> releaseModules(Path image) throws IOException {
        for (String line : Files.readAllLines(image.resolve("release"))) {
            if (line.startsWith("MODULES=")) {
                return new TreeSet<>(List.of(line.substring("MODULES=".length()).replace("\"", "").trim().split("\\s+")));
            }
        }
        return fail("no MODULES line in " + image.resolve("release"));
    }

    /** Non-comment, non-blank lines of a committed list. */
    static Set<String> committedList(Path file) throws IOException {
        Set<String> lines = new TreeSet<>();
        for (String line : Files.readAllLines(file)) {
            String entry = line.replaceAll("#.*", "").trim();
            if (!entry.isEmpty()) {
                lines.add(entry);
            }
        }
        return lines;
    }

    /** Every ELF file of the image. */
    static List<Path> elfFiles(Path image) throws IOException {
        List<Path> elves = new ArrayList<>();
        try (Stream<Path> files = Files.walk(image)) {
            for (Path file : files.filter(Files::isRegularFile).toList()) {
                byte[] head = new byte[4];
                try (var in = Files.newInputStream(file)) {
                    if (in.read(head) == 4 && head[0] == 0x7f && head[1] == 'E' && head[2] == 'L' && head[3] == 'F') {
                        elves.add(file);
                    }
                }
            }
        }
        return elves;
    }

    /** The result of a finished program. */
    record Run(int status, String out, String err) {
        @Override
        public String toString() {
            return "status " + status + "\nstdout: " + out + "\nstderr: " + err;
        }
    }

    /** Runs a program to its end (bounded by {@link #WAIT}), standard input closed. */
    static Run run(Path directory, List<String> command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).directory(directory.toFile()).start();
        p.getOutputStream().close();
        CompletableFuture<String> out = drain(p.getInputStream());
        CompletableFuture<String> err = drain(p.getErrorStream());
        if (!p.waitFor(WAIT.toSeconds(), TimeUnit.SECONDS)) {
            p.destroyForcibly();
            fail("no exit within " + WAIT + ": " + command);
        }
        try {
            return new Run(p.exitValue(), out.get(WAIT.toSeconds(), TimeUnit.SECONDS), err.get(WAIT.toSeconds(), TimeUnit.SECONDS));
        } catch (ExecutionException | TimeoutException e) {
            return fail("output of " + command + " unreadable", e);
        }
    }

    /** Reads a stream to its end on its own thread, so a chatty program never blocks on a full pipe. */
    static CompletableFuture<String> drain(InputStream stream) {
        CompletableFuture<String> text = new CompletableFuture<>();
        Thread.ofPlatform().daemon(true).name("drain").start(() -> {
            try (stream) {
                text.complete(new String(stream.readAllBytes(), StandardCharsets.UTF_8));
            } catch (IOException e) {
                text.completeExceptionally(e);
            }
        });
        return text;
    }

    /**
     * A process's resident pages of its image's AOT cache file, and how many of them are its own
     * copies. The rest are the file's pages in the page cache, which the kernel shares between every
     * process that maps the cache. (Private copies, not "dirty": right after a build the file's
     * pages are dirty in the page cache until written back, and still shared.)
     *
     * @param residentKib resident
     * @param privateKib  of those, copied into anonymous memory of this process
     */
    record CachePages(long residentKib, long privateKib) {
    }

    /**
     * @param pid   a running JVM of an image
     * @param cache the cache's file name, {@code openshell-<name>.aot}
     * @return its pages of that file, from {@code /proc/<pid>/smaps}
     */
    static CachePages cachePages(long pid, String cache) throws IOException {
        long resident = 0;
        long copied = 0;
        boolean inCache = false;
        for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "smaps"))) {
            if (line.matches("^[0-9a-f]+-[0-9a-f]+ .*")) {
                inCache = line.endsWith("/lib/" + cache);
            } else if (inCache && line.startsWith("Rss:")) {
                resident += kib(line);
            } else if (inCache && line.startsWith("Anonymous:")) {
                copied += kib(line);
            }
        }
        return new CachePages(resident, copied);
    }

    private static long kib(String smapsLine) {
        return Long.parseLong(smapsLine.split("\\s+")[1]);
    }

    /**
     * Runs a moved copy of an image (next to it, so the copy can be hard links) with the build's
     * image hidden under an empty tmpfs in a fresh mount namespace, as it is absent in a
     * container, and removes the copy.
     *
     * @param image   the build's image
     * @param unshare the namespaces to run in (a user and a mount namespace at least)
     * @param options what follows {@code <copy>/bin/java -XX:AOTMode=on -XX:AOTCache=lib/<name>.aot}
     */
    static Run runMovedWithTheBuildsImageHidden(Path image, List<String> unshare, List<String> options)
            throws IOException, InterruptedException {
        Path real = image.toRealPath();
        String name = real.getFileName().toString();
        Path moved = real.resolveSibling("moved-" + name);
        deleteTree(moved);
        copy(real, moved);
        List<String> command = new ArrayList<>(unshare);
        command.addAll(List.of("/bin/sh", "-c", "mount -t tmpfs tmpfs \"$0\" && exec \"$@\"", real.toString()));
        // AOTMode=on: fail rather than run without the cache.
        command.addAll(List.of(moved.resolve("bin/java").toString(), "-XX:AOTMode=on", "-XX:AOTCache=lib/" + name + ".aot"));
        command.addAll(options);
        try {
            return run(moved, command);
        } finally {
            deleteTree(moved);
        }
    }

    static void deleteTree(Path root) throws IOException {
        if (Files.exists(root)) {
            try (Stream<Path> files = Files.walk(root)) {
                for (Path file : files.sorted(java.util.Comparator.reverseOrder()).toList()) {
                    Files.delete(file);
                }
            }
        }
    }

    /** A copy of the image elsewhere (hard links where possible: the same bytes, another path). */
    static void copy(Path from, Path to) throws IOException {
        try (Stream<Path> files = Files.walk(from)) {
            for (Path source : files.toList()) {
                Path target = to.resolve(from.relativize(source).toString());
                if (Files.isDirectory(source)) {
                    Files.createDirectories(target);
                } else {
                    try {
                        Files.createLink(target, source);
                    } catch (IOException | UnsupportedOperationException e) {
                        Files.copy(source, target, java.nio.file.StandardCopyOption.COPY_ATTRIBUTES);
                    }
                }
            }
        }
    }
}
