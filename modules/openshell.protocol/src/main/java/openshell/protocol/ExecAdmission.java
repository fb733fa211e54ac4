package openshell.protocol;

import java.time.Clock;
import java.time.Instant;

import openshell.protocol.wire.ExecRequest;

/**
 * The admission rule of exec: a request past its deadline is refused, never started late.
 * An unknown outcome is no reason to retry under a new id: the caller replays the same id.
 */
public final class ExecAdmission {
    private ExecAdmission() {
    }

    /**
     * Refuses an exec whose admission deadline has passed (or is missing).
     *
     * @param request the exec request
     * @param clock   the runtime's clock
     */
    public static void admit(ExecRequest request, Clock clock) {
        long deadline = request.getAdmissionDeadlineEpochMillis();
        if (deadline <= 0) {
            throw new ProtocolException(Refusal.INVALID_ARGUMENT, "exec without an admission deadline");
        }
        Instant now = clock.instant();
        if (!now.isBefore(Instant.ofEpochMilli(deadline))) {
            throw new ProtocolException(Refusal.EXEC_EXPIRED, "admission deadline " + Instant.ofEpochMilli(deadline)
                    + " passed at " + now);
        }
    }
}
