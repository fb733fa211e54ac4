package openshell.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** The confinement a runtime bundle carries: validated on both sides, refused when malformed, never root. */
class WorkloadConfinementTest {
    @Test
    void itRoundTripsThroughTheWireForm() {
        WorkloadConfinement c = new WorkloadConfinement(true, List.of("/usr"), List.of("/tmp"), true, true,
                Optional.of("games"), Optional.of("4322"));
        assertEquals(c, WorkloadConfinement.of(c.wire()));
        assertEquals(WorkloadConfinement.standard(), WorkloadConfinement.of(WorkloadConfinement.standard().wire()));
    }

    @Test
    void malformedConfinementsAreRefused() {
        for (Runnable bad : List.<Runnable>of(
                () -> new WorkloadConfinement(true, List.of("relative"), List.of(), false, false, Optional.empty(), Optional.empty()),
                () -> new WorkloadConfinement(true, List.of(), List.of("/"), false, false, Optional.empty(), Optional.empty()),
                () -> new WorkloadConfinement(false, List.of("/usr"), List.of(), false, false, Optional.empty(), Optional.empty()),
                () -> new WorkloadConfinement(false, List.of(), List.of(), false, false, Optional.of("root"), Optional.empty()),
                () -> new WorkloadConfinement(false, List.of(), List.of(), false, false, Optional.of("0"), Optional.empty()),
                () -> new WorkloadConfinement(false, List.of(), List.of(), false, false, Optional.empty(), Optional.of("99999999999")),
                () -> new WorkloadConfinement(true, java.util.Collections.nCopies(WorkloadConfinement.MAX_PATHS + 1, "/usr"),
                        List.of(), false, false, Optional.empty(), Optional.empty()))) {
            ProtocolException e = assertThrows(ProtocolException.class, bad::run);
            assertEquals(Refusal.BUNDLE_INVALID, e.refusal());
        }
    }
}
