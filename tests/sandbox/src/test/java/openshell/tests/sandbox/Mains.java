package openshell.tests.sandbox;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;

/** The two mains as the process driver starts them: launcher scripts over a module path the sandbox can read. */
final class Mains {
    private Mains() {
    }

    /**
     * The mains' module path, with every jar copied where the sandbox's mapped root can read it (the
     * local Maven repository is under root's 0700 home).
     */
    static String readableModulePath(Path lib) throws IOException {
        Files.setPosixFilePermissions(lib, PosixFilePermissions.fromString("rwxr-xr-x"));
        List<String> entries = new ArrayList<>();
        for (String entry : Files.readString(Path.of(System.getProperty("openshell.mains.module.path.file"))).strip()
                .split(java.io.File.pathSeparator)) {
            Path source = Path.of(entry);
            if (Files.isRegularFile(source)) {
                Path copy = lib.resolve(source.getFileName());
                Files.copy(source, copy, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
                Files.setPosixFilePermissions(copy, PosixFilePermissions.fromString("rw-r--r--"));
                entries.add(copy.toString());
            } else {
                entries.add(entry);
            }
        }
        return String.join(java.io.File.pathSeparator, entries);
    }

    static Path launcher(Path file, String modulePath, String mainModule) throws IOException {
        String script = "#!/bin/sh\nexec " + Path.of(System.getProperty("java.home"), "bin", "java")
                + " --enable-native-access=com.sun.jna,openshell.protocol --add-exports=java.base/sun.nio.ch=openshell.protocol -Djna.boot.library.path=" + System.getProperty("openshell.mains.jna.dir")
                + " -Djna.nounpack=true -Djna.noclasspath=true" + nativeLauncherOption(file)
                + " --add-modules ALL-MODULE-PATH -p " + modulePath + " -m " + mainModule + " \"$@\"\n";
        Files.writeString(file, script);
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rwxr-xr-x"));
        return file;
    }

    /**
     * The build's native workload launcher, copied beside {@code file} where the sandbox's mapped
     * root can run it, as the runtime's {@code -Dopenshell.launcher} option.
     */
    static String nativeLauncherOption(Path file) throws IOException {
        Path copy = file.resolveSibling("openshell-launcher");
        Files.copy(Path.of(System.getProperty("openshell.mains.launcher")), copy, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        Files.setPosixFilePermissions(copy, PosixFilePermissions.fromString("rwxr-xr-x"));
        return " -Dopenshell.launcher=" + copy;
    }
}
