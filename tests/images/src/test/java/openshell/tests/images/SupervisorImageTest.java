package openshell.tests.images;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.lang.classfile.ClassFile;
import java.lang.constant.ClassDesc;
import java.lang.constant.ConstantDescs;
import java.lang.constant.MethodTypeDesc;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The openshell-supervisor image: its JDK modules, what it needs from the host, JNA, its launcher,
 * and its program. The program, {@code openshell.supervisor.SupervisorMain}, arrives with the mains
 * branch: until then {@link #theImageStartsSupervisorMain} fails and says so.
 */
class SupervisorImageTest {
    private static final String NAME = "openshell-supervisor";
    private static final String MAIN = "openshell.supervisor.SupervisorMain";

    /** What the JVM prints once it has read the image's compiler directives. */
    private static final String DIRECTIVES_ADDED = "2 compiler directives added";

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
    void everyNativeLibraryComesFromTheImageOrTheCLibrary() throws Exception {
        Path image = ImageFiles.image(NAME);
        // openshell.linux's relay and socket calls go through JNA; its library sits in lib/jna,
        // where jna.boot.library.path points (never unpacked to a temporary directory).
        assertTrue(Files.isRegularFile(image.resolve("lib/jna/libjnidispatch.so")), "no JNA native library in lib/jna");
        // getsockopt(SO_PEERCRED) through java.lang.foreign (openshell.protocol), everything else through JNA.
        List<String> nativeAccess = Files.readAllLines(image.resolve("conf/" + NAME + ".args")).stream()
                .filter(l -> l.contains("enable-native-access")).toList();
        assertEquals(List.of("--enable-native-access=openshell.protocol", "--enable-native-access=com.sun.jna"), nativeAccess);
        Set<String> inImage = new TreeSet<>();
        List<Path> elves = ImageFiles.elfFiles(image);
        elves.forEach(f -> inImage.add(f.getFileName().toString()));
        assertTrue(inImage.containsAll(Set.of("java", "libjvm.so", "libjnidispatch.so")), inImage.toString());
        for (Path elf : elves) {
            ImageFiles.Run run = ImageFiles.run(image, List.of("objdump", "-p", elf.toString()));
            assertEquals(0, run.status(), run.toString());
            for (String line : run.out().lines().filter(l -> l.trim().startsWith("NEEDED")).toList()) {
                String needed = line.trim().split("\\s+")[1];
                assertTrue(ImageFiles.C_LIBRARY.contains(needed) || inImage.contains(needed), elf + " needs " + needed);
            }
        }
    }

    /** The plain jna jar (automatic module com.sun.jna): jna-jpms's descriptor would link java.desktop. */
    @Test
    void theImageCarriesThePlainJnaJar() throws IOException {
        try (Stream<Path> jars = Files.list(ImageFiles.image(NAME).resolve("app"))) {
            List<String> jna = jars.map(p -> p.getFileName().toString()).filter(n -> n.startsWith("jna")).toList();
            assertEquals(1, jna.size(), jna.toString());
            assertTrue(jna.getFirst().matches("jna-[0-9.]+\\.jar"), jna.toString());
        }
        assertFalse(ImageFiles.releaseModules(ImageFiles.image(NAME)).contains("java.desktop"));
    }

    /**
     * com.sun.jna loads its native library in the image, with the image's own options and the
     * supervisor's module graph: a probe class (generated here, on the class path) prints
     * {@code Native.POINTER_SIZE}, which JNA's class initialization asks libjnidispatch.so (from
     * lib/jna) for. (JNA's own
     * main, {@code com.sun.jna.Native}, cannot run here: its AWT methods name java.desktop.)
     */
    @Test
    void jnaLoadsItsNativeLibraryWithTheImageOptions(@TempDir Path probe) throws Exception {
        Path image = ImageFiles.image(NAME);
        ClassDesc printStream = ClassDesc.of("java.io.PrintStream");
        Files.write(probe.resolve("JnaProbe.class"), ClassFile.of().build(ClassDesc.of("JnaProbe"), c -> c
                .withFlags(ClassFile.ACC_PUBLIC)
                .withMethodBody("main", MethodTypeDesc.of(ConstantDescs.CD_void, ConstantDescs.CD_String.arrayType()),
                        ClassFile.ACC_PUBLIC | ClassFile.ACC_STATIC, code -> code
                                .getstatic(ClassDesc.of("java.lang.System"), "out", printStream)
                                .getstatic(ClassDesc.of("com.sun.jna.Native"), "POINTER_SIZE", ConstantDescs.CD_int)
                                .invokevirtual(printStream, "println", MethodTypeDesc.of(ConstantDescs.CD_void, ConstantDescs.CD_int))
                                .return_())));
        List<String> command = javaWithImageOptions(image);
        command.addAll(List.of("--add-modules=openshell.supervisor", "-cp", probe.toString(), "JnaProbe"));
        ImageFiles.Run run = ImageFiles.run(image, command);
        assertEquals(0, run.status(), run.toString());
        assertEquals("8", run.out().trim(), run.toString());
        // No restricted-method warning: the image grants com.sun.jna native access. The only VM
        // output is the directives' count, which the image sends to stderr (never stdout).
        assertEquals(DIRECTIVES_ADDED + "\n", run.err(), run.toString());
    }

    /**
     * The supervisor compiles with C1 only, except the JDK's crypto and TLS code, which keeps C2
     * (its intrinsics: AES-GCM, GHASH, SHA): tests/perf/README.md, "The JIT and the soak's ports".
     */
    @Test
    void onlyCryptoAndTlsCodeReachesC2() throws Exception {
        Path image = ImageFiles.image(NAME);
        assertTrue(Files.isRegularFile(image.resolve("conf/" + NAME + ".jit.json")), "the image's compiler directives");
        List<String> command = javaWithImageOptions(image);
        command.addAll(List.of("-XX:+CompilerDirectivesPrint", "-version"));
        ImageFiles.Run run = ImageFiles.run(image, command);
        assertEquals(0, run.status(), run.toString());
        String printed = run.out() + run.err();
        assertTrue(printed.contains(DIRECTIVES_ADDED), printed);
        int crypto = printed.indexOf("matching: sun/security/*.*, com/sun/crypto/provider/*.*");
        int rest = printed.indexOf("matching: *.*");
        assertTrue(crypto >= 0 && rest > crypto, printed);
        // Each directive prints its C1 block, then its C2 block: C2 stays for crypto, is excluded for the rest.
        String cryptoC2 = printed.substring(printed.indexOf("c2 directives:", crypto), rest);
        assertTrue(cryptoC2.contains("Exclude:false"), cryptoC2);
        String restC2 = printed.substring(printed.indexOf("c2 directives:", rest));
        assertTrue(restC2.contains("Exclude:true"), restC2);
    }

    /**
     * The connect path (our code, JNA, protobuf, NIO and java.*) compiles at the default thresholds
     * while the rest (Helidon, TLS) keeps the global scaling of 10 that keeps the start cheap: a
     * supervisor of one sandbox among 20 sees too few connects to reach scaled thresholds in a
     * soak (tests/perf/README.md, "Compile thresholds by package in the supervisor"). Run without
     * the image's {@code quiet}, the JVM lists every command it parsed.
     */
    @Test
    void theConnectPathsPackagesCompileAtTheDefaultThresholds() throws Exception {
        Path image = ImageFiles.image(NAME);
        List<String> command = javaWithImageOptions(image);
        assertTrue(command.remove("-XX:CompileCommand=quiet"), "the image's options keep the JVM quiet about its commands");
        assertTrue(command.contains("-XX:CompileThresholdScaling=10"), command.toString());
        command.add("-version");
        ImageFiles.Run run = ImageFiles.run(image, command);
        assertEquals(0, run.status(), run.toString());
        for (String scaled : List.of("openshell/*", "com/sun/jna/*", "com/google/protobuf/*", "sun/nio/*", "java/*")) {
            String parsed = "CompileCommand: CompileThresholdScaling " + scaled + ".* double CompileThresholdScaling = 0.100000";
            assertTrue(run.out().contains(parsed) || run.err().contains(parsed), scaled + " not scaled to 0.1: " + run);
        }
    }

    /**
     * A moved image starts with its cache and loads nothing from where it was built: the build's
     * image is hidden under an empty tmpfs, as it is absent in a container. Without arguments
     * the supervisor stops at its usage error, after its first step: refusing a module loaded from
     * outside its image's {@code app/} (exit 70), which a cache trained with the build directory's
     * module path did (tests/perf/README.md, "a moved image").
     */
    @Test
    void aMovedImageLoadsItsModulesFromItself() throws Exception {
        ImageFiles.Run run = ImageFiles.runMovedWithTheBuildsImageHidden(ImageFiles.image(NAME),
                List.of("/usr/bin/unshare", "--user", "--map-root-user", "--mount"), List.of("@conf/" + NAME + ".args"));
        assertFalse(run.err().contains("refusing to start"), run.toString());
        assertEquals(64, run.status(), run.toString());
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

    /** The image's java with its JVM options, without the supervisor's main module and class (which come last). */
    private static List<String> javaWithImageOptions(Path image) throws IOException {
        List<String> command = new ArrayList<>();
        command.add(image.resolve("bin/java").toString());
        for (String line : Files.readAllLines(image.resolve("conf/" + NAME + ".args"))) {
            if (line.equals("-m")) {
                break;
            }
            command.add(line);
        }
        return command;
    }
}
