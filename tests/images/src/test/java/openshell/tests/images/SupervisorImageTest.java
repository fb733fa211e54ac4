package openshell.tests.images;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * The openshell-supervisor image: its JDK modules, what it needs from the host, its launcher, and
 * its program. The program, {@code openshell.supervisor.SupervisorMain}, arrives with the mains
 * branch: until then {@link #theImageStartsSupervisorMain} fails and says so.
 */
class SupervisorImageTest {
    private static final String NAME = "openshell-supervisor";
    private static final String MAIN = "openshell.supervisor.SupervisorMain";

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
        assertTrue(ImageFiles.releaseModules(image).containsAll(needed), "jdeps needs " + needed);
    }

    @Test
    void theSupervisorCarriesNoNativeCodeOfItsOwn() throws Exception {
        Path image = ImageFiles.image(NAME);
        assertTrue(Files.notExists(image.resolve("lib/jna")), "the supervisor needs no JNA");
        // Its one native call is getsockopt(SO_PEERCRED) through java.lang.foreign, for the runtime's pid.
        List<String> nativeAccess = Files.readAllLines(image.resolve("conf/" + NAME + ".args")).stream()
                .filter(l -> l.contains("enable-native-access")).toList();
        assertEquals(List.of("--enable-native-access=openshell.protocol"), nativeAccess);
        Set<String> inImage = new TreeSet<>();
        List<Path> elves = ImageFiles.elfFiles(image);
        elves.forEach(f -> inImage.add(f.getFileName().toString()));
        for (Path elf : elves) {
            ImageFiles.Run run = ImageFiles.run(image, List.of("objdump", "-p", elf.toString()));
            assertEquals(0, run.status(), run.toString());
            for (String line : run.out().lines().filter(l -> l.trim().startsWith("NEEDED")).toList()) {
                String needed = line.trim().split("\\s+")[1];
                assertTrue(ImageFiles.C_LIBRARY.contains(needed) || inImage.contains(needed), elf + " needs " + needed);
            }
        }
    }

    @Test
    void theModuleGraphResolves() throws Exception {
        Path image = ImageFiles.image(NAME);
        ImageFiles.Run run = ImageFiles.run(image, List.of(image.resolve("bin/java").toString(), "--module-path=app",
                "--add-modules", "openshell.supervisor", "--validate-modules"));
        assertEquals(0, run.status(), run.toString());
    }

    @Test
    void theImageStartsSupervisorMain() throws Exception {
        Path image = ImageFiles.image(NAME);
        // --dry-run: the JVM starts and loads the main class, then stops before main.
        ImageFiles.Run run = ImageFiles.run(image, List.of(image.resolve("bin/java").toString(), "--dry-run",
                "@conf/" + NAME + ".args"));
        if (run.status() != 0) {
            fail(MAIN + " IS NOT IN THIS BUILD: the supervisor image cannot start. It lands with the mains "
                    + "branch (issue 6); this image test, the /healthz smoke and the AOT training run need it.\n" + run);
        }
        assertTrue(Files.isRegularFile(image.resolve("lib/" + NAME + ".aot")),
                "SupervisorMain exists but the build trained no AOT cache (jlink/openshell-supervisor/src/image/train.sh)");
        String launcher = Files.readString(image.resolve("bin/" + NAME));
        assertTrue(launcher.contains("exec bin/java -XX:AOTCache=lib/" + NAME + ".aot @conf/" + NAME + ".args \"$@\""), launcher);
    }
}
