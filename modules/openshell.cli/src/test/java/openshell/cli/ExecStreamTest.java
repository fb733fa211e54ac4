package openshell.cli;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/**
 * When the CLI takes an exec's connection as lost: only after a gateway that announced heartbeats
 * missed more than {@link ExecStream#MAX_MISSED_HEARTBEATS} of them; never for a gateway that
 * announced none (a quiet command may be quiet for hours).
 */
class ExecStreamTest {
    private static final long HEARTBEAT = TimeUnit.SECONDS.toNanos(10);
    private static final long LAST = 5_000_000_000L;

    @Test
    void aConnectionIsLostOnlyPastTheMissedHeartbeatsBound() {
        long bound = ExecStream.MAX_MISSED_HEARTBEATS * HEARTBEAT;
        assertFalse(ExecStream.lost(LAST, HEARTBEAT, LAST + HEARTBEAT), "one heartbeat late");
        assertFalse(ExecStream.lost(LAST, HEARTBEAT, LAST + bound), "at the bound");
        assertTrue(ExecStream.lost(LAST, HEARTBEAT, LAST + bound + 1), "past the bound");
    }

    @Test
    void aGatewayThatAnnouncedNoHeartbeatIsNeverTakenAsLost() {
        assertFalse(ExecStream.lost(LAST, 0, LAST + TimeUnit.DAYS.toNanos(1)));
    }

    @Test
    void theClockWrappingDoesNotMakeAConnectionLost() {
        long last = Long.MAX_VALUE - HEARTBEAT;
        assertFalse(ExecStream.lost(last, HEARTBEAT, last + 2 * HEARTBEAT), "nanoTime may wrap");
    }
}
