package openshell.linux;

/**
 * How a child process ended, as {@code waitid} reports it.
 *
 * @param exitCode the exit code if it exited, else -1
 * @param signal   the signal that killed it, else 0
 */
public record ChildExit(int exitCode, int signal) {
    /** @return whether it exited normally */
    public boolean exited() {
        return signal == 0;
    }

    @Override
    public String toString() {
        return signal == 0 ? "exit " + exitCode : "killed by signal " + signal;
    }
}
