package openshell.protocol;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** The warm spare's rehearsal runs the real launch code through and leaves nothing behind. */
class LaunchRehearsalTest {
    @Test
    void theRehearsalCompletesAndLeavesNoTemporaryFile() throws Exception {
        Path tmp = Path.of(System.getProperty("java.io.tmpdir"));
        long before = rehearsalDirectories(tmp);
        assertDoesNotThrow(LaunchRehearsal::run);
        assertDoesNotThrow(LaunchRehearsal::run, "a second rehearsal in one JVM");
        assertEquals(before, rehearsalDirectories(tmp));
    }

    @Test
    void withoutTheCertificateBuilderTheCryptoAloneIsRehearsed() {
        assertDoesNotThrow(LaunchRehearsal::crypto);
    }

    private static long rehearsalDirectories(Path tmp) throws Exception {
        try (Stream<Path> files = Files.list(tmp)) {
            return files.filter(p -> p.getFileName().toString().startsWith("openshell-rehearsal")).count();
        }
    }
}
