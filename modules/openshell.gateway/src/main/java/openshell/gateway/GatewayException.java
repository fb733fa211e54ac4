package openshell.gateway;

import java.util.Objects;

/**
 * The gateway's one unchecked exception. Its {@link Reason} maps to an API status and tells the
 * caller whether anything changed (it never did).
 */
public final class GatewayException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** What went wrong; nothing was changed in any case. */
    public enum Reason {
        /** Malformed or out-of-bounds input. */
        INVALID,
        /** No such record. */
        NOT_FOUND,
        /** A concurrent change won, or a unique name is taken. */
        CONFLICT,
        /** A bound was reached. */
        EXHAUSTED,
        /** The database or another dependency cannot be used. */
        UNAVAILABLE,
        /** The database was written by a newer gateway. */
        INCOMPATIBLE
    }

    private final Reason reason;

    /**
     * @param reason  what went wrong
     * @param message for a human, never containing a secret
     */
    public GatewayException(Reason reason, String message) {
        super(message);
        this.reason = Objects.requireNonNull(reason);
    }

    /**
     * @param reason  what went wrong
     * @param message for a human, never containing a secret
     * @param cause   the underlying failure
     */
    public GatewayException(Reason reason, String message, Throwable cause) {
        super(message, cause);
        this.reason = Objects.requireNonNull(reason);
    }

    /** @return what went wrong */
    public Reason reason() {
        return reason;
    }
}
