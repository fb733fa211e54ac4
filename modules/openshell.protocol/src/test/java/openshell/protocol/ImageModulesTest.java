package openshell.protocol;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The image's own modules: this test runs on the module path, so its modules have file locations. */
class ImageModulesTest {
    @Test
    void aJvmThatIsNotAnImageIsNotChecked(@TempDir Path home) {
        assertDoesNotThrow(() -> ImageModules.check(home));
    }

    @Test
    void aModuleLoadedFromOutsideTheImagesAppIsRefusedByName(@TempDir Path home) throws IOException {
        assertTrue(ImageModules.class.getModule().isNamed(), "the protocol's tests run on the module path");
        Files.createDirectory(home.resolve("app"));
        IOException e = assertThrows(IOException.class, () -> ImageModules.check(home));
        assertTrue(e.getMessage().contains("outside this image's app/"), e.getMessage());
        assertTrue(e.getMessage().startsWith("module "), e.getMessage());
    }

    @Test
    void modulesUnderTheImagesAppAreAccepted(@TempDir Path home) throws IOException {
        // app/ resolves to the root, under which every module of this JVM lies.
        Files.createSymbolicLink(home.resolve("app"), Path.of("/"));
        assertDoesNotThrow(() -> ImageModules.check(home));
    }
}
