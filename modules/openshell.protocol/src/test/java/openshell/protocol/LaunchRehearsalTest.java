package openshell.protocol;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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

    /** Longest wait for the priming thread in this test (it takes well under a second here). */
    private static final long PRIME_WAIT_SECONDS = 60;

    @Test
    void primingRunsEveryStepOnADaemonThreadThatEndsByItself() throws Exception {
        Thread prime = LaunchRehearsal.primeAhead();
        assertTrue(prime.isDaemon(), "a priming thread never holds the JVM open");
        assertEquals(LaunchRehearsal.PRIME_THREAD, prime.getName());
        assertTrue(prime.join(java.time.Duration.ofSeconds(PRIME_WAIT_SECONDS)), "the priming thread did not end");
        // Every step resolves (a renamed algorithm or a class gone from the image would only show here).
        assertEquals(java.util.Optional.empty(), LaunchRehearsal.prime());
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
