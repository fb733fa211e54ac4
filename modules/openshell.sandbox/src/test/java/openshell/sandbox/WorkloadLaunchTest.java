package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import openshell.isolation.BackendException;
import openshell.linux.LauncherProcess;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WorkloadLaunchTest {

    @Test
    void theLauncherIsTheNamedNativeProgramAndTakesNoArguments() throws IOException {
        LauncherProcess.Command command = WorkloadLaunch.command();
        Path launcher = Path.of(command.executable());
        assertEquals(Path.of(System.getProperty(WorkloadLaunch.LAUNCHER_PROPERTY)), launcher);
        byte[] head = Files.readAllBytes(launcher);
        assertTrue(head.length > 4 && head[0] == 0x7f && head[1] == 'E' && head[2] == 'L' && head[3] == 'F',
                "an ELF program, not a script");
        assertEquals(List.of(launcher.toString()), command.argv(), "everything comes in the plan, nothing on the command line");
    }

    @Test
    void aMissingOrNonExecutableLauncherIsAClearError(@TempDir Path dir) throws IOException {
        Path notExecutable = Files.writeString(dir.resolve("openshell-launcher"), "#!/bin/sh\n");
        for (Path path : List.of(dir.resolve("missing"), notExecutable, dir)) {
            BackendException e = assertThrows(BackendException.class,
                    () -> WorkloadLaunch.command(Optional.of(path.toString()), Path.of("/nonexistent")));
            assertEquals(BackendException.Kind.UNAVAILABLE, e.kind());
            assertTrue(e.getMessage().contains(path.toString()) && e.getMessage().contains(WorkloadLaunch.IMAGE_LAUNCHER),
                    e.getMessage());
        }
        // Without the property: the image's place under java.home.
        Files.createDirectories(dir.resolve("lib"));
        Path image = Files.copy(Path.of(System.getProperty(WorkloadLaunch.LAUNCHER_PROPERTY)), dir.resolve(WorkloadLaunch.IMAGE_LAUNCHER));
        assertEquals(image.toString(), WorkloadLaunch.command(Optional.empty(), dir).executable());
        BackendException none = assertThrows(BackendException.class, () -> WorkloadLaunch.command(Optional.empty(), Path.of("/nonexistent")));
        assertTrue(none.getMessage().contains("/nonexistent/" + WorkloadLaunch.IMAGE_LAUNCHER), none.getMessage());
    }
}
