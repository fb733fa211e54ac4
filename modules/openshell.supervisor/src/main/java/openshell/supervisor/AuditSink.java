package openshell.supervisor;

/**
 * Where the one JSON line per decision goes (a file, the gateway session, a test's list). A sink
 * must not block for long: it is called on the decision path.
 */
@FunctionalInterface
interface AuditSink {
    /**
     * @param line one complete JSON object, no newline; never contains a secret
     */
    void record(String line);

    /** @return a sink that writes each line to the {@code openshell.audit} System.Logger at INFO */
    static AuditSink logger() {
        System.Logger log = System.getLogger("openshell.audit");
        return line -> log.log(System.Logger.Level.INFO, line);
    }
}
