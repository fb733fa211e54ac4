package openshell.tests.e2e;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The process driver's launchers, given the operator's way (environment variables of the CLI that
 * starts the gateway): scripts running the supervisor and sandbox runtime mains from this test's
 * own module path, in a directory every sandbox uid can read.
 */
final class Launchers {
    private Launchers() {
    }

    /** @return the environment naming plain launchers */
    static Map<String, String> environment() throws Exception {
        return environment(Optional.empty());
    }

    /**
     * @param bundles where a capturing supervisor launcher keeps a copy of each launch bundle it
     *                receives (an attacker's stolen copy, for the tests of old tokens); empty for
     *                the plain launcher
     * @return the environment naming the launchers
     */
    static Map<String, String> environment(Optional<Path> bundles) throws Exception {
        Path dir = Path.of(System.getProperty("openshell.e2e.launchers"));
        Files.createDirectories(dir);
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        String modulePath = readableModulePath(dir);
        Map<String, String> env = new LinkedHashMap<>();
        String supervisorMain = "openshell.supervisor/openshell.supervisor.SupervisorMain";
        env.put("OPENSHELL_SUPERVISOR_LAUNCHER", bundles.isPresent()
                ? script(dir, "supervisor-capturing", capturing(bundles.get(), java(modulePath, supervisorMain))).toString()
                : script(dir, "supervisor", "exec " + java(modulePath, supervisorMain) + " \"$@\"\n").toString());
        env.put("OPENSHELL_RUNTIME_LAUNCHER", script(dir, "runtime", "exec " + javaWith(nativeLauncherOption(dir) + " -p " + modulePath,
                "openshell.sandbox/openshell.sandbox.SandboxMain") + " \"$@\"\n").toString());
        return env;
    }

    /**
     * Reads the whole bundle into a private file first, then execs the supervisor with the file as
     * its standard input: the supervisor keeps the pid the driver recorded.
     */
    private static String capturing(Path bundles, String java) {
        return "umask 077\nb=" + bundles + "/bundle-$$\ncat > \"$b\"\nexec " + java + " \"$@\" < \"$b\"\n";
    }

    private static String java(String modulePath, String main) {
        return javaWith(" -p " + modulePath, main);
    }

    /** @param options the module path option and any others, each with a leading blank */
    private static String javaWith(String options, String main) {
        return ProcessHandle.current().info().command().orElseThrow() + " --enable-native-access=com.sun.jna,openshell.protocol --add-exports=java.base/sun.nio.ch=openshell.protocol"
                + " -Djna.boot.library.path=" + System.getProperty("openshell.e2e.jna")
                + " -Djna.nounpack=true -Djna.noclasspath=true --add-modules ALL-MODULE-PATH"
                + options + " -m " + main;
    }

    private static Path script(Path dir, String name, String body) throws Exception {
        Path script = dir.resolve(name);
        Files.writeString(script, "#!/bin/sh\n" + body);
        Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("rwxr-xr-x"));
        return script;
    }

    /**
     * This test's module path, copied where the sandbox's mapped uid can read it (the local Maven
     * repository under /root is private): the runtime starts inside the sandbox's user namespace.
     */
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

    /**
     * The build's native workload launcher, copied into {@code dir} where the sandbox's mapped
     * root can run it, as the runtime's {@code -Dopenshell.launcher} option.
     */
    static String nativeLauncherOption(Path dir) throws java.io.IOException {
        Path copy = dir.resolve("openshell-launcher");
        Files.copy(Path.of(System.getProperty("openshell.e2e.launcher")), copy, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        Files.setPosixFilePermissions(copy, PosixFilePermissions.fromString("rwxr-xr-x"));
        return " -Dopenshell.launcher=" + copy;
    }
}
