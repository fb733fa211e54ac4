package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.zip.ZipFile;
import openshell.linux.LauncherProcess;
import org.junit.jupiter.api.Test;

class WorkloadLaunchTest {

    @Test
    void theLauncherGetsOnlyItsOwnModulesAndItsOptions() throws IOException {
        LauncherProcess.Command command = WorkloadLaunch.command();
        List<String> path = command.modulePath();
        // One location per launcher module, each where this JVM loaded it from: nothing else of
        // the runtime's module path (automatic modules would all join the launcher's graph).
        assertEquals(WorkloadLaunch.LAUNCHER_MODULES.size(), path.size(), path.toString());
        List<String> classes = List.of("openshell/linux/WorkloadLauncher.class", "com/sun/jna/Native.class");
        for (int i = 0; i < path.size(); i++) {
            Path location = Path.of(path.get(i));
            assertTrue(holds(location, classes.get(i)), location + " should hold " + classes.get(i));
        }
        List<String> argv = command.argv();
        assertEquals(WorkloadLaunch.LAUNCHER_JVM_OPTIONS, argv.subList(1, 1 + WorkloadLaunch.LAUNCHER_JVM_OPTIONS.size()));
        assertTrue(argv.contains("-Xint") && argv.contains("-Xmx32m"), argv.toString());
    }

    private static boolean holds(Path location, String entry) throws IOException {
        if (Files.isDirectory(location)) {
            return Files.isRegularFile(location.resolve(entry));
        }
        try (ZipFile jar = new ZipFile(location.toFile())) {
            return jar.getEntry(entry) != null;
        }
    }
}
