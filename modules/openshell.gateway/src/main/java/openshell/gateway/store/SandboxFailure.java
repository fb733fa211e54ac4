package openshell.gateway.store;

import java.time.Instant;
import java.util.Objects;

/**
 * Why and when the gateway recorded a launch of a sandbox FAILED: what it observed, in the
 * driver's words, so {@code sandbox list} and {@code get} say more than the state.
 *
 * @param runtimeGeneration the launch that failed
 * @param cause             what was observed, at most {@link #MAX_CAUSE_CHARS}
 * @param failedAt          when the gateway recorded it
 */
public record SandboxFailure(long runtimeGeneration, String cause, Instant failedAt) {
    /** Longest cause kept (the column's width); a longer one is cut. */
    public static final int MAX_CAUSE_CHARS = 4096;

    /** Rejects null and cuts the cause to {@link #MAX_CAUSE_CHARS}. */
    public SandboxFailure {
        Objects.requireNonNull(cause, "cause");
        Objects.requireNonNull(failedAt, "failedAt");
        if (cause.length() > MAX_CAUSE_CHARS) {
            cause = cause.substring(0, MAX_CAUSE_CHARS - 1) + "…";
        }
    }
}
