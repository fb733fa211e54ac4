package openshell.isolation;

/**
 * How a process ended: an exit code or a signal, never confused with one another (a shell's
 * 128+n convention is not applied).
 */
public sealed interface ExitStatus {
    /**
     * Exited with a code.
     *
     * @param code 0..255
     */
    record Exited(int code) implements ExitStatus {
        /** Validates the code. */
        public Exited {
            if (code < 0 || code > 255) {
                throw BackendException.invalid("exit code out of range: " + code);
            }
        }
    }

    /**
     * Killed by a signal.
     *
     * @param signal the signal number, 1..64
     */
    record Signaled(int signal) implements ExitStatus {
        /** Validates the signal. */
        public Signaled {
            if (signal < 1 || signal > 64) {
                throw BackendException.invalid("signal out of range: " + signal);
            }
        }
    }
}
