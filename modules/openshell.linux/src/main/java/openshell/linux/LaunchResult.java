package openshell.linux;

/** What the parent learns from the launcher at each stage of a launch. */
public sealed interface LaunchResult {
    /**
     * Every control is in force; the target waits for {@link LauncherProcess#acknowledge}.
     *
     * @param listener the seccomp listener for the workload process (now the parent's)
     * @param landlock what Landlock enforces (check {@link LandlockOutcome#complete()} for best effort)
     */
    record Ready(SeccompListener listener, LandlockOutcome landlock) implements LaunchResult {
    }

    /**
     * The target has been {@code execve}d.
     *
     * @param pid its process id
     */
    record Started(int pid) implements LaunchResult {
    }

    /**
     * A step failed; the target did not run.
     *
     * @param step   the step
     * @param errno  its errno (0 if the failure was not a kernel error)
     * @param detail what happened
     */
    record Failed(LaunchStep step, int errno, String detail) implements LaunchResult {
    }
}
