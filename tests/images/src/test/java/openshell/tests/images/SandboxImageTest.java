package openshell.tests.images;

import static openshell.tests.images.ImageFiles.WAIT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The openshell-sandbox image as the drivers use it: its JDK modules, what it needs from the host,
 * its health probe through the launcher and without a shell, its AOT cache wherever it is
 * mounted, and SIGTERM.
 */
class SandboxImageTest {
    private static final String NAME = "openshell-sandbox";
    /** Fresh user, network and mount namespaces, as the process driver gives the runtime. */
    private static final List<String> FENCED = List.of("/usr/bin/unshare", "--user", "--map-root-user", "--net", "--mount");

    @Test
    void theImageLinksExactlyTheCommittedJdkModules() throws IOException {
        Set<String> expected = ImageFiles.committedList(ImageFiles.source(NAME, "jdk-modules.txt"));
        assertEquals(expected, ImageFiles.releaseModules(ImageFiles.image(NAME)),
                "the image's JDK modules changed (a new dependency?): review, then update src/image/jdk-modules.txt");
    }

    @Test
    void theImageJavaHasOnlyTheReleaseModules() throws Exception {
        Path image = ImageFiles.image(NAME);
        ImageFiles.Run run = ImageFiles.run(image, List.of(image.resolve("bin/java").toString(), "--list-modules"));
        assertEquals(0, run.status(), run.toString());
        Set<String> listed = new TreeSet<>();
        run.out().lines().map(l -> l.replaceAll("@.*", "").trim()).filter(l -> !l.isEmpty()).forEach(listed::add);
        assertEquals(ImageFiles.releaseModules(image), listed);
    }

    @Test
    void jdepsFindsNothingOutsideTheImage() throws Exception {
        Path image = ImageFiles.image(NAME);
        ImageFiles.Run run = ImageFiles.run(image, List.of(Path.of(System.getProperty("java.home"), "bin", "jdeps").toString(),
                "--print-module-deps", "--ignore-missing-deps", "--multi-release", "25", "--module-path", "app",
                "--add-modules", "ALL-MODULE-PATH"));
        assertEquals(0, run.status(), run.toString());
        Set<String> needed = new TreeSet<>(Arrays.asList(run.out().trim().split(",")));
        Set<String> linked = ImageFiles.releaseModules(image);
        assertTrue(linked.containsAll(needed), "jdeps needs " + needed + ", the image has " + linked);
    }

    @Test
    void everyNativeLibraryComesFromTheImageOrTheCLibrary() throws Exception {
        Path image = ImageFiles.image(NAME);
        Set<String> inImage = new TreeSet<>();
        List<Path> elves = ImageFiles.elfFiles(image);
        elves.forEach(f -> inImage.add(f.getFileName().toString()));
        assertTrue(inImage.containsAll(Set.of("java", "libjvm.so", "libjnidispatch.so", "openshell-launcher")), inImage.toString());
        for (Path elf : elves) {
            ImageFiles.Run run = ImageFiles.run(image, List.of("objdump", "-p", elf.toString()));
            assertEquals(0, run.status(), run.toString());
            for (String line : run.out().lines().filter(l -> l.trim().startsWith("NEEDED")).toList()) {
                String needed = line.trim().split("\\s+")[1];
                assertTrue(ImageFiles.C_LIBRARY.contains(needed) || inImage.contains(needed),
                        elf + " needs " + needed + ", which is neither in the image nor part of the C library");
            }
        }
    }

    /** The workload launcher runs in the workload's mount namespace: static, it needs not even the C library. */
    @Test
    void theWorkloadLauncherIsAStaticProgramInTheImage() throws Exception {
        Path launcher = ImageFiles.image(NAME).resolve("lib/openshell-launcher");
        assertTrue(Files.isRegularFile(launcher) && Files.isExecutable(launcher), launcher.toString());
        ImageFiles.Run run = ImageFiles.run(ImageFiles.image(NAME), List.of("objdump", "-p", launcher.toString()));
        assertEquals(0, run.status(), run.toString());
        assertTrue(run.out().lines().noneMatch(l -> l.trim().startsWith("NEEDED")), "a static program needs no library: " + run.out());
        assertTrue(run.out().lines().noneMatch(l -> l.trim().startsWith("INTERP")), "a static program needs no ld.so: " + run.out());
    }

    @Test
    void theLauncherUsesNoProgramFromTheHost() throws IOException {
        List<String> code = Files.readAllLines(ImageFiles.image(NAME).resolve("bin/" + NAME)).stream()
                .filter(l -> !l.trim().startsWith("#") && !l.isBlank()).toList();
        // Builtins only: case, cd, unset, exec, echo, exit. Any other word at a command position
        // would be looked up on the host's PATH.
        Set<String> builtins = Set.of("case", "esac", "cd", "unset", "exec", "echo", "exit", "*/*)", "*)");
        for (String line : code) {
            String first = line.trim().split("\\s+")[0];
            assertTrue(builtins.contains(first) || first.startsWith("bin=") || first.equals(";;"),
                    "launcher line does not start with a shell builtin: " + line);
        }
        assertTrue(code.contains("exec bin/java -XX:AOTCache=lib/" + NAME + ".aot @conf/" + NAME + ".args \"$@\""), code.toString());
    }

    @Test
    void theHealthProbePassesThroughTheLauncherWithoutWarnings() throws Exception {
        Path image = ImageFiles.image(NAME);
        List<String> command = new ArrayList<>(FENCED);
        command.addAll(List.of(image.resolve("bin/" + NAME).toString(), "--check"));
        ImageFiles.Run run = ImageFiles.run(Path.of("/"), command);
        assertEquals(0, run.status(), run.toString());
        assertTrue(run.out().startsWith("{\"check\":\"passed\""), run.toString());
        assertTrue(run.out().contains("\"interfaces\":\"[lo]\",\"directEgressFailed\":true,\"dumpable\":false"), run.toString());
        // No restricted-method warning: com.sun.jna is the only module that needs native access.
        // No AOT warning: the cache was usable.
        assertEquals("", run.err(), run.toString());
    }

    @Test
    void theHealthProbeFailsWhereTheNetworkHasAWayOut() throws Exception {
        Path image = ImageFiles.image(NAME);
        ImageFiles.Run run = ImageFiles.run(Path.of("/"), List.of(image.resolve("bin/" + NAME).toString(), "--check"));
        assertEquals(70, run.status(), run.toString());
        assertTrue(run.err().contains("must hold only lo"), run.toString());
    }

    /**
     * A moved image runs with its cache, and loads nothing from where it was built: the build's
     * image is hidden under an empty tmpfs, as it would be absent in a container. The check
     * refuses a module loaded from outside the moved image's {@code app/}; a cache trained with
     * the build directory's module path failed this way (and, served, in Helidon's service lookup).
     */
    @Test
    void withoutAShellTheArgumentFileRunsAMovedImageWithItsAotCache() throws Exception {
        ImageFiles.Run run = ImageFiles.runMovedWithTheBuildsImageHidden(ImageFiles.image(NAME), FENCED,
                List.of("@conf/" + NAME + ".args", "--check"));
        assertEquals(0, run.status(), run.toString());
        assertTrue(run.out().startsWith("{\"check\":\"passed\""), run.toString());
    }

    @Test
    void theLauncherBecomesTheJvmInTheImageAndSigtermEndsIt() throws Exception {
        Path image = ImageFiles.image(NAME).toRealPath();
        // Without a launch bundle the runtime waits on standard input: a live process to stop.
        Process p = new ProcessBuilder(image.resolve("bin/" + NAME).toString(), "--sandbox", "sb-smoke", "--generation", "1",
                "--channel", "/nonexistent/channel.sock", "--bundle-stdin").start();
        var err = ImageFiles.drain(p.getErrorStream());
        try {
            Path proc = Path.of("/proc", Long.toString(p.pid()));
            // exec, not a child: the pid the driver holds is the JVM, so a signal reaches it.
            awaitExe(proc, image.resolve("bin/java"));
            assertEquals(image, Files.readSymbolicLink(proc.resolve("cwd")));
            String cmdline = new String(Files.readAllBytes(proc.resolve("cmdline")), StandardCharsets.UTF_8).replace('\0', ' ');
            assertTrue(cmdline.contains("-XX:AOTCache=lib/" + NAME + ".aot @conf/" + NAME + ".args --sandbox sb-smoke"), cmdline);
            assertFalse(p.waitFor(1, TimeUnit.SECONDS), "the runtime ended without its bundle: " + err.getNow(""));
            // -XX:-UsePerfData: no hsperfdata file in /tmp, which the workload would see.
            assertFalse(Files.exists(Path.of("/tmp", "hsperfdata_" + System.getProperty("user.name"), Long.toString(p.pid()))));
            p.toHandle().destroy(); // SIGTERM
            assertTrue(p.waitFor(WAIT.toSeconds(), TimeUnit.SECONDS), "no exit after SIGTERM");
            assertEquals(128 + 15, p.exitValue(), err.getNow(""));
            assertEquals(0, p.toHandle().descendants().count(), "a process outlived the runtime");
        } finally {
            p.destroyForcibly();
            p.getOutputStream().close();
        }
    }

    private static void awaitExe(Path proc, Path expected) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            try {
                if (Files.readSymbolicLink(proc.resolve("exe")).equals(expected)) {
                    return;
                }
            } catch (IOException e) {
                // Not readable yet, or gone: the next round or the deadline decides.
            }
            Thread.sleep(20);
        }
        org.junit.jupiter.api.Assertions.fail(proc + " never became " + expected);
    }
}
