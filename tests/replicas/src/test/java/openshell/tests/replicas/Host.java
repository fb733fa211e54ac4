package openshell.tests.replicas;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * What the replicas on this one host share: this test's module path copied where every sandbox
 * uid can read it, the process driver's launchers for the supervisor and sandbox runtime mains
 * (the way the e2e suite gives them), a run root short enough for the supervisor socket's
 * {@code sun_path}, and the process driver's state directory, which replicas on one host share so
 * that any of them can clean up what another's driver made.
 *
 * @param work       this suite's folder
 * @param modulePath the readable copy of the module path
 * @param runRoot    the process driver's run root
 * @param driverState the drivers' shared state directory
 * @param settings   the gateway's {@code --driver-setting} values
 */
record Host(Path work, String modulePath, Path runRoot, Path driverState, Map<String, String> settings) {
    static Host create() throws Exception {
        Path work = Path.of(System.getProperty("openshell.replicas.work"));
        Files.createDirectories(work);
        Files.setPosixFilePermissions(work, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path bin = work.resolve("bin");
        Files.createDirectories(bin);
        Files.setPosixFilePermissions(bin, PosixFilePermissions.fromString("rwxr-xr-x"));
        String modulePath = readableModulePath(work);
        Path supervisor = script(bin, "supervisor", "exec " + java(" -p " + modulePath,
                "openshell.supervisor/openshell.supervisor.SupervisorMain") + " \"$@\"\n");
        Path runtime = script(bin, "runtime", "exec " + java(nativeLauncherOption(bin) + " -p " + modulePath,
                "openshell.sandbox/openshell.sandbox.SandboxMain") + " \"$@\"\n");
        Path runRoot = Files.createTempDirectory(Path.of("/tmp"), "osrep");
        Files.setPosixFilePermissions(runRoot, PosixFilePermissions.fromString("rwx--x--x"));
        Path driverState = Files.createTempDirectory(work, "drivers");
        return new Host(work, modulePath, runRoot, driverState, Map.of("supervisor.launcher", supervisor.toString(),
                "runtime.launcher", runtime.toString(), "run.root", runRoot.toString(), "state.root", driverState.toString()));
    }

    /** Removes the run root and the drivers' state (after the sandboxes were deleted). */
    void remove() throws java.io.IOException {
        for (Path dir : List.of(runRoot, driverState)) {
            try (var files = Files.walk(dir)) {
                files.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
            }
        }
    }

    /** @return the java command line that runs a main of the module path with the given options */
    static String java(String options, String main) {
        return ProcessHandle.current().info().command().orElseThrow()
                + " --enable-native-access=com.sun.jna,openshell.protocol --add-exports=java.base/sun.nio.ch=openshell.protocol"
                + " -Djna.boot.library.path=" + System.getProperty("openshell.replicas.jna")
                + " -Djna.nounpack=true -Djna.noclasspath=true --add-modules ALL-MODULE-PATH" + options + " -m " + main;
    }

    private static Path script(Path dir, String name, String body) throws Exception {
        Path script = dir.resolve(name);
        Files.writeString(script, "#!/bin/sh\n" + body);
        Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("rwxr-xr-x"));
        return script;
    }

    private static String readableModulePath(Path dir) throws Exception {
        Path lib = dir.resolve("lib");
        Files.createDirectories(lib);
        Files.setPosixFilePermissions(lib, PosixFilePermissions.fromString("rwxr-xr-x"));
        List<String> entries = new ArrayList<>();
        for (String entry : System.getProperty("jdk.module.path").split(File.pathSeparator)) {
            Path source = Path.of(entry);
            if (!Files.isRegularFile(source)) {
                continue;
            }
            Path copy = lib.resolve(source.getFileName());
            Files.copy(source, copy, StandardCopyOption.REPLACE_EXISTING);
            Files.setPosixFilePermissions(copy, PosixFilePermissions.fromString("rw-r--r--"));
            entries.add(copy.toString());
        }
        return String.join(File.pathSeparator, entries);
    }

    private static String nativeLauncherOption(Path dir) throws Exception {
        Path built = Path.of(System.getProperty("openshell.replicas.launcher"));
        if (!Files.isExecutable(built)) {
            throw new IllegalStateException("the native workload launcher " + built + " is missing: build modules/openshell.linux first");
        }
        Path copy = dir.resolve("openshell-launcher");
        Files.copy(built, copy, StandardCopyOption.REPLACE_EXISTING);
        Files.setPosixFilePermissions(copy, PosixFilePermissions.fromString("rwxr-xr-x"));
        return " -Dopenshell.launcher=" + copy;
    }
}
