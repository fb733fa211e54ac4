package openshell.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** An idle call's reader waits longer and longer between looks, up to its bound, never past it. */
class LinkCallIdleTest {
    @Test
    void idleWaitsDoubleUpToTheBound() {
        List<Long> waits = new ArrayList<>();
        Duration wait = Duration.ofMillis(200);
        for (int i = 0; i < 7; i++) {
            wait = LinkCall.idleLonger(wait);
            waits.add(wait.toMillis());
        }
        assertEquals(List.of(400L, 800L, 1600L, 2000L, 2000L, 2000L, 2000L), waits);
        assertEquals(LinkCall.IDLE_POLL_MAX, LinkCall.idleLonger(LinkCall.IDLE_POLL_MAX));
        assertEquals(LinkCall.IDLE_POLL_MAX, LinkCall.idleLonger(LinkCall.IDLE_POLL_MAX.minusMillis(1)));
    }
}
