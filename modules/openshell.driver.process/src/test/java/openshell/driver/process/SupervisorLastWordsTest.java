package openshell.driver.process;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * How a dead supervisor's end is told from its log for the sandbox's status (and so for the
 * cause the gateway records): only its last launch's words count, and a kill leaves none.
 */
class SupervisorLastWordsTest {
    @TempDir
    Path tmp;

    @Test
    void theAgentsExitOfTheLastLaunchIsTheCauseNotAnEarlierLaunchs() throws Exception {
        Path log = Files.writeString(tmp.resolve("supervisor.log"), """
                {"ready":true,"sandbox":"sb-x","generation":1}
                openshell-supervisor: the agent ended: Exited[code=3]
                openshell-supervisor: the descriptor lane carried 0 connects and 0 DNS queries
                {"ready":true,"sandbox":"sb-x","generation":2}
                openshell-supervisor: boundary failed: UNAVAILABLE link closed
                """);
        assertEquals("boundary failed: UNAVAILABLE link closed", ProcessDriver.lastWords(log));
    }

    @Test
    void aSupervisorKilledAfterAnEarlierLaunchEndedSaysNothingOfItsOwn() throws Exception {
        Path log = Files.writeString(tmp.resolve("supervisor.log"), """
                {"ready":true,"sandbox":"sb-x","generation":1}
                openshell-supervisor: the agent ended: Exited[code=0]
                {"ready":true,"sandbox":"sb-x","generation":2}
                """);
        assertEquals("without a word in its log (killed by a signal?)", ProcessDriver.lastWords(log));
    }

    @Test
    void onlyTheEndOfALongLogIsReadAndAMissingOneIsSaidSo() throws Exception {
        Path log = tmp.resolve("supervisor.log");
        Files.writeString(log, "x".repeat(ProcessDriver.LAST_WORDS_BYTES * 2) + "\nopenshell-supervisor: the agent ended: "
                + "Signaled[signal=9]\n");
        assertEquals("the agent ended: Signaled[signal=9]", ProcessDriver.lastWords(log));
        assertEquals("its log cannot be read", ProcessDriver.lastWords(tmp.resolve("absent.log")));
    }
}
