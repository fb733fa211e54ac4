package openshell.isolation.conformance.selftest;

/** One deliberate fault of the plain backend, each breaking one promise of the contract. */
enum Defect {
    /** confirm() succeeds before the mediation source was taken. */
    CONFIRM_WITHOUT_MEDIATION,
    /** startAgent() does not consume the ready handle. */
    START_TWICE,
    /** attach() does not remember what is bound. */
    REATTACH,
    /** attach() ignores which backend the descriptor was verified for. */
    FOREIGN_DESCRIPTOR,
    /** awaitExit() answers differently after the first call. */
    UNSTABLE_WAIT,
    /** signal() after exit is silently ignored. */
    SIGNAL_AFTER_EXIT_IGNORED,
    /** Death by signal n is reported as exit code 128+n, as a shell would. */
    SHELL_STATUS,
    /** stderr is merged into stdout on a piped exec. */
    MERGED_STDERR,
    /** A process's terminate() kills the process but not what it started. */
    SHALLOW_TERMINATE,
    /** Terminating one boundary terminates every boundary of the backend. */
    SHARED_TERMINATE,
    /** The port forward drops the bytes sent into the boundary. */
    FORWARD_DROPS_BYTES,
    /** The target reuses one session id for every launch. */
    STALE_SESSION
}
