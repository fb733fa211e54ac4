package openshell.cli;

import java.util.Optional;

import jakarta.json.JsonObject;

/**
 * The CLI's one unchecked exception: a message for the user, the process exit code, and what
 * goes with it in the error document of {@code -o json} (a reason, and for some errors details
 * such as a refused policy's problems). A usage error also prints the command's usage.
 */
final class CliException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    static final int FAILED = 1;
    static final int USAGE = 2;
    static final int NO_GATEWAY = 3;
    static final int NOT_FOUND = 4;

    private final int exitCode;
    private final String reason;
    private final boolean showUsage;
    private final transient JsonObject details;

    CliException(int exitCode, String message) {
        this(exitCode, reasonOf(exitCode), message, false, null);
    }

    private CliException(int exitCode, String reason, String message, boolean showUsage, JsonObject details) {
        super(message);
        this.exitCode = exitCode;
        this.reason = reason;
        this.showUsage = showUsage;
        this.details = details;
    }

    /** A command line of the wrong shape: exit 2, and the command's usage is printed with the message. */
    static CliException usage(String message) {
        return new CliException(USAGE, "USAGE", message, true, null);
    }

    /**
     * An error the gateway answered, with its reason (its {@code error} field).
     *
     * @param details the gateway's whole error body, for the JSON error document
     */
    static CliException fromGateway(int exitCode, String reason, String message, JsonObject details) {
        return new CliException(exitCode, reason, message, false, details);
    }

    int exitCode() {
        return exitCode;
    }

    /** @return the error document's {@code error}: the gateway's reason, or the exit code's name */
    String reason() {
        return reason;
    }

    boolean showUsage() {
        return showUsage;
    }

    /** @return more of the error for the JSON document (a gateway's body), if any */
    Optional<JsonObject> details() {
        return Optional.ofNullable(details);
    }

    static String reasonOf(int exitCode) {
        return switch (exitCode) {
            case USAGE -> "USAGE";
            case NO_GATEWAY -> "NO_GATEWAY";
            case NOT_FOUND -> "NOT_FOUND";
            default -> "FAILED";
        };
    }
}
