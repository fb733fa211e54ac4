package openshell.images;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The container recipes against the images the build made. No container engine runs here, so
 * each Dockerfile is checked for what an engine would need (its context exists, every file its
 * entry point names is in that context, nothing is pulled or downloaded), and the sandbox's entry
 * point is run the way an engine runs it: chrooted into a rootfs that holds only glibc (no shell),
 * in fresh namespaces, working directory as WORKDIR says.
 */
class ImageRecipesTest {
    /** Longest wait for the rootfs recipe (Debian packages) or one run of an image. */
    private static final Duration WAIT = Duration.ofSeconds(180);
    /** Bases a recipe may start from: nothing that must be pulled from a registry. */
    private static final Set<String> BASES = Set.of("scratch", "${WORKLOAD_IMAGE}", "openshell/glibc:bookworm");
    /** What would fetch from the internet (package managers go through apt's own sources). */
    private static final Pattern DOWNLOAD = Pattern.compile("\\b(curl|wget|git clone|ADD\\s+https?:)|https?://", Pattern.CASE_INSENSITIVE);

    private static Path repository() {
        return Path.of(System.getProperty("openshell.repository")).normalize();
    }

    private static List<Recipe> recipes() throws IOException {
        try (Stream<Path> files = Files.list(repository().resolve("images/docker"))) {
            List<Recipe> recipes = new ArrayList<>();
            for (Path file : files.filter(f -> f.getFileName().toString().endsWith(".Dockerfile")).sorted().toList()) {
                recipes.add(Recipe.read(file));
            }
            assertEquals(3, recipes.size(), "sandbox-layered, sandbox-runtime and supervisor");
            return recipes;
        }
    }

    @Test
    void everyRecipeBuildsFromAnImageOfTheBuildAndCopiesItWhole() throws IOException {
        for (Recipe recipe : recipes()) {
            Path context = repository().resolve(recipe.context());
            assertTrue(Files.isRegularFile(context.resolve("release")) && Files.isDirectory(context.resolve("bin")),
                    recipe.file() + ": its context " + context + " is not a runtime image of this build");
            List<String> copies = recipe.all("COPY");
            assertEquals(1, copies.size(), recipe.file() + ": one COPY, the whole image");
            String[] copy = copies.getFirst().split("\\s+");
            assertEquals(".", copy[0], recipe.file() + ": copies the whole context");
            assertTrue(copy[1].matches("/opt/openshell/(sandbox|supervisor)"), recipe.file() + ": copies to " + copy[1]);
            assertEquals(copy[1], recipe.last("WORKDIR").orElseThrow(),
                    recipe.file() + ": WORKDIR must be the image's directory (the argument file's paths are relative)");
        }
    }

    @Test
    void entryPointsAreExecFormAndNameOnlyFilesOfTheImage() throws IOException {
        for (Recipe recipe : recipes()) {
            List<String> entry = recipe.entryPoint();
            assertFalse(entry.isEmpty(), recipe.file() + ": ENTRYPOINT must be exec form (a workload may have no shell)");
            String home = recipe.last("WORKDIR").orElseThrow();
            Path context = repository().resolve(recipe.context());
            assertEquals(home + "/bin/java", entry.getFirst(), recipe.file().toString());
            assertTrue(Files.isExecutable(context.resolve("bin/java")), recipe.file().toString());
            String name = Path.of(recipe.context()).getFileName().toString();
            assertEquals(List.of(home + "/bin/java", "-XX:AOTCache=lib/" + name + ".aot", "@conf/" + name + ".args"), entry,
                    recipe.file() + ": the same JVM options as bin/" + name);
            assertTrue(Files.isRegularFile(context.resolve("conf/" + name + ".args")), recipe.file().toString());
            String launcher = Files.readString(context.resolve("bin/" + name));
            if (launcher.contains("-XX:AOTCache=")) {
                assertTrue(Files.isRegularFile(context.resolve("lib/" + name + ".aot")), recipe.file().toString());
            } else {
                // Only the supervisor, until SupervisorMain exists (its image test fails loudly meanwhile).
                assertEquals("openshell-supervisor", name, recipe.file() + ": the image has no AOT cache");
            }
        }
    }

    @Test
    void nothingIsPulledOrDownloaded() throws IOException {
        for (Recipe recipe : recipes()) {
            for (String from : recipe.all("FROM")) {
                assertTrue(BASES.contains(from.trim()), recipe.file() + ": FROM " + from + " would be pulled from a registry");
            }
            assertTrue(recipe.all("RUN").isEmpty() && recipe.all("ADD").isEmpty(), recipe.file() + ": no RUN or ADD");
            assertFalse(DOWNLOAD.matcher(String.join("\n", recipe.all("FROM"))).find(), recipe.file().toString());
        }
        String rootfs = Files.readString(repository().resolve("images/rootfs/glibc-rootfs.sh"));
        String code = rootfs.lines().filter(l -> !l.trim().startsWith("#")).reduce("", (a, b) -> a + b + "\n");
        assertFalse(DOWNLOAD.matcher(code).find(), "glibc-rootfs.sh must take packages from apt only");
        assertTrue(code.contains("apt-get download libc6 libgcc-s1"), code);
        assertTrue(Files.readString(repository().resolve("images/docker/supervisor.Dockerfile"))
                .contains("images/rootfs/glibc-rootfs.sh"), "the supervisor's base names its recipe");
    }

    @Test
    void theSandboxEntryPointRunsItsHealthProbeInARootfsOfOnlyGlibc() throws Exception {
        Path work = Path.of(System.getProperty("openshell.images.work"));
        deleteTree(work);
        Files.createDirectories(work);
        Path tar = work.resolve("glibc.tar");
        Run recipe = run(work, List.of("sh", repository().resolve("images/rootfs/glibc-rootfs.sh").toString(), tar.toString()));
        assertEquals(0, recipe.status(), "the glibc rootfs recipe failed (it needs the Debian package mirror):\n" + recipe);
        Path root = work.resolve("root");
        Files.createDirectories(root);
        assertEquals(0, run(work, List.of("tar", "-C", root.toString(), "-xf", tar.toString())).status());
        assertFalse(Files.exists(root.resolve("bin/sh")) || Files.exists(root.resolve("usr/bin/sh")), "the rootfs has a shell");
        // What an engine adds to every container: /proc, and an /etc/resolv.conf to cover.
        Files.createDirectories(root.resolve("proc"));
        Files.writeString(root.resolve("etc/resolv.conf"), "nameserver 192.0.2.1\n");
        Recipe layered = recipes().stream().filter(r -> r.file().getFileName().toString().equals("sandbox-layered.Dockerfile"))
                .findFirst().orElseThrow();
        String home = layered.last("WORKDIR").orElseThrow();
        linkTree(repository().resolve(layered.context()), root.resolve(home.substring(1)));
        // The engine's part, done with the host's tools: the rootfs becomes a mount point of its own
        // (as after pivot_root) with /proc in it; then chroot and WORKDIR, and the entry point runs.
        List<String> command = new ArrayList<>(List.of("/usr/bin/unshare", "--user", "--map-root-user", "--net", "--mount",
                "--pid", "--fork", "/bin/sh", "-c", "set -e; root=$1; home=$2; shift 2; mount --bind \"$root\" \"$root\"; "
                        + "mount -t proc proc \"$root/proc\"; exec /usr/bin/unshare --root=\"$root\" --wd=\"$home\" \"$@\"",
                "engine", root.toString(), home));
        List<String> entry = layered.entryPoint();
        command.add(entry.getFirst());
        command.add("-XX:AOTMode=on"); // fail rather than run without the cache
        command.addAll(entry.subList(1, entry.size()));
        command.add("--check");
        Run check = run(work, command);
        assertEquals(0, check.status(), check.toString());
        assertTrue(check.out().startsWith("{\"check\":\"passed\""), check.toString());
        assertEquals("", check.err(), "no warning (native access, AOT cache): " + check);
        deleteTree(work);
    }

    private record Run(int status, String out, String err) {
    }

    private static Run run(Path directory, List<String> command) throws IOException, InterruptedException {
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
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
            return fail("output of " + command + " unreadable", e);
        }
    }

    private static CompletableFuture<String> drain(InputStream stream) {
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

    /** The image inside the rootfs: hard links (same bytes and times, which the AOT cache checks) or copies. */
    private static void linkTree(Path from, Path to) throws IOException {
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

    private static void deleteTree(Path root) throws IOException {
        if (Files.exists(root, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            try (Stream<Path> files = Files.walk(root)) {
                for (Path file : files.sorted(Comparator.reverseOrder()).toList()) {
                    Files.delete(file);
                }
            }
        }
    }
}
