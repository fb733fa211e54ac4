package openshell.supervisor;

/**
 * The supervisor's one unchecked exception: bad trusted configuration or input it refuses. A
 * message never contains a secret (credential values are never formatted into one).
 */
final class SupervisorException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    SupervisorException(String message) {
        super(message);
    }

    SupervisorException(String message, Throwable cause) {
        super(message, cause);
    }
}
