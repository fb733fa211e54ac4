package openshell.linux;

/** The launcher's steps, in the order it runs them; a failure names the step that failed. */
public enum LaunchStep {
    /** Receiving and decoding the plan. */
    PLAN,
    /** Entering the target namespaces (setns) or proving the launcher already runs in them. */
    NAMESPACES,
    /** Making stdin the controlling terminal. */
    TERMINAL,
    /** Applying resource limits. */
    RLIMITS,
    /** Emptying the capability bounding and ambient sets (needs CAP_SETPCAP, so before the uid change). */
    CAPABILITY_BOUNDING_SET,
    /** Supplementary groups, gid, uid. */
    IDENTITY,
    /** Emptying effective, permitted and inheritable sets, and proving nothing remains. */
    CAPABILITIES,
    /** Setting no_new_privs. */
    NO_NEW_PRIVS,
    /** Changing to the working directory. */
    WORKING_DIRECTORY,
    /** Enforcing Landlock. */
    LANDLOCK,
    /** Installing the seccomp filter with its listener. */
    SECCOMP,
    /** Handing the listener to the parent. */
    LISTENER_HANDOFF,
    /** Waiting for the parent's acknowledgement. */
    ACKNOWLEDGEMENT,
    /** {@code execve} of the target. */
    EXEC
}
