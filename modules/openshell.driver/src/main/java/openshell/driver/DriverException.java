package openshell.driver;

import java.util.Objects;

/** The driver SPI's one unchecked exception; a failed call changed nothing it did not undo. */
public final class DriverException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** Why a driver call failed. */
    public enum Kind {
        /** Bad input: options, ids, state that this driver did not write. */
        INVALID,
        /** The host lacks what the driver needs (a kernel feature, an engine, a binary). */
        UNAVAILABLE,
        /** The operation was attempted and failed; what it had done was undone. */
        FAILED,
        /** The sandbox's resources are gone. */
        NOT_FOUND
    }

    private final Kind kind;

    /**
     * @param kind    why
     * @param message what happened and what to do, never a secret
     */
    public DriverException(Kind kind, String message) {
        super(message);
        this.kind = Objects.requireNonNull(kind);
    }

    /**
     * @param kind    why
     * @param message what happened and what to do, never a secret
     * @param cause   the underlying failure
     */
    public DriverException(Kind kind, String message, Throwable cause) {
        super(message, cause);
        this.kind = Objects.requireNonNull(kind);
    }

    /** @return why */
    public Kind kind() {
        return kind;
    }

    static DriverException invalid(String message) {
        return new DriverException(Kind.INVALID, message);
    }
}
