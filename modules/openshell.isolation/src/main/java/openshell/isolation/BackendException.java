package openshell.isolation;

import java.util.Objects;

/**
 * The one unchecked exception of the isolation contract. Its {@link Kind} tells the caller what
 * may be retried: nothing here ever advances a boundary's state or authorizes anything.
 */
public final class BackendException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** Why a call failed. */
    public enum Kind {
        /** The request is malformed or made in the wrong state; retrying it unchanged will fail again. */
        INVALID,
        /** The request is well formed but refused (policy, ownership, identity). */
        DENIED,
        /** A dependency (kernel feature, engine, channel) is not available; the state is unchanged. */
        UNAVAILABLE,
        /** The operation was attempted and failed; the state is unchanged. */
        FAILED,
        /** The boundary, process or handle has ended; nothing more can be done with it. */
        TERMINATED
    }

    private final Kind kind;

    /**
     * A failure of the given kind.
     *
     * @param kind    what kind of failure
     * @param message what happened, for a human
     */
    public BackendException(Kind kind, String message) {
        super(kind + ": " + Objects.requireNonNull(message, "message"));
        this.kind = Objects.requireNonNull(kind, "kind");
    }

    /**
     * A failure of the given kind with its cause.
     *
     * @param kind    what kind of failure
     * @param message what happened, for a human
     * @param cause   the underlying failure
     */
    public BackendException(Kind kind, String message, Throwable cause) {
        super(kind + ": " + Objects.requireNonNull(message, "message"), cause);
        this.kind = Objects.requireNonNull(kind, "kind");
    }

    /** @return the kind of failure */
    public Kind kind() {
        return kind;
    }

    static BackendException invalid(String message) {
        return new BackendException(Kind.INVALID, message);
    }

    static <T> T require(T value, String name) {
        if (value == null) {
            throw invalid(name + " must not be null");
        }
        return value;
    }
}
