package openshell.isolation;

/** The signals a client may send to a workload process; numbers are Linux's. */
public enum ProcessSignal {
    /** Hang-up. */
    HUP(1),
    /** Interrupt (Ctrl-C). */
    INT(2),
    /** Quit. */
    QUIT(3),
    /** Kill; cannot be caught. */
    KILL(9),
    /** User signal 1. */
    USR1(10),
    /** User signal 2. */
    USR2(12),
    /** Polite termination. */
    TERM(15),
    /** Continue a stopped process. */
    CONT(18),
    /** Stop; cannot be caught. */
    STOP(19),
    /** Window size changed. */
    WINCH(28);

    private final int number;

    ProcessSignal(int number) {
        this.number = number;
    }

    /** @return the Linux signal number */
    public int number() {
        return number;
    }
}
