package openshell.protocol;

import java.util.Objects;

/**
 * The one unchecked exception of the Sandbox Protocol. Callers branch on {@link #refusal()},
 * never on the message, so every refusal has its own stable reason.
 */
public final class ProtocolException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final Refusal refusal;

    /**
     * A refusal with a human-readable detail (never a secret).
     *
     * @param refusal why
     * @param detail  what, for logs and error replies
     */
    public ProtocolException(Refusal refusal, String detail) {
        super(refusal + ": " + detail);
        this.refusal = Objects.requireNonNull(refusal);
    }

    /**
     * A refusal caused by a lower-level failure.
     *
     * @param refusal why
     * @param detail  what
     * @param cause   the failure underneath
     */
    public ProtocolException(Refusal refusal, String detail, Throwable cause) {
        super(refusal + ": " + detail, cause);
        this.refusal = Objects.requireNonNull(refusal);
    }

    /**
     * The reason, stable across releases.
     *
     * @return the reason
     */
    public Refusal refusal() {
        return refusal;
    }
}
