package openshell.cli;

/** The CLI's one unchecked exception: a message for the user and the process exit code. */
final class CliException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    static final int FAILED = 1;
    static final int USAGE = 2;
    static final int NO_GATEWAY = 3;
    static final int NOT_FOUND = 4;

    private final int exitCode;

    CliException(int exitCode, String message) {
        super(message);
        this.exitCode = exitCode;
    }

    int exitCode() {
        return exitCode;
    }
}
