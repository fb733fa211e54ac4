package openshell.cli;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The gateway's recorded start still names it after the kernel's boot time moved by whole seconds. */
class GatewayStartTest {
    private static final long STARTED = 1_796_096_351_940L;

    @Test
    void aStartReadUpToTheSlackAwayIsTheSameGateway() {
        long slack = Main.START_SLACK.toMillis();
        // Seen here: the gateway wrote ...351940, and a later CLI read ...352940 for the same process.
        assertTrue(Main.sameStart(STARTED, STARTED + 1000));
        assertTrue(Main.sameStart(STARTED, STARTED + slack));
        assertTrue(Main.sameStart(STARTED, STARTED - slack));
        assertFalse(Main.sameStart(STARTED, STARTED + slack + 1));
        assertFalse(Main.sameStart(STARTED, STARTED - slack - 1));
    }

    @Test
    void anUnknownStartNeverMatchesARecordedOne() {
        assertFalse(Main.sameStart(STARTED, -1L));
    }
}
