/**
 * The conformance kit every isolation backend must pass: one JUnit 5 check per promise of the
 * contract, including the six invariants, so a new topology proves itself against the same
 * bar as the others instead of its own tests.
 *
 * <p>A backend plugs in with one class that implements
 * {@link openshell.isolation.conformance.ConformanceTarget}: it says how to launch a fresh
 * boundary and supplies the probes the invariant checks run inside it. A check whose probe is
 * missing fails and says why; nothing is skipped. The same target, registered with
 * {@code provides openshell.isolation.conformance.ConformanceTarget with ...}, runs from the
 * command line:
 * <pre>{@code
 * java -p <module path> -m openshell.isolation.conformance/openshell.isolation.conformance.launcher.ConformanceMain --backend <name>
 * }</pre>
 *
 * <h2>Limits</h2>
 * <table>
 * <caption>Bounds owned by this module (constants of {@code IsolationConformance})</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code WAIT}</td><td>30 s</td><td>the awaited event (exit, pending open, end of stream) did not happen: the check fails</td></tr>
 * <tr><td>{@code TERMINATE_BOUND}</td><td>10 s</td><td>a descendant still alive after its process's terminate(): the check fails</td></tr>
 * <tr><td>{@code CHECK_BOUND}</td><td>120 s</td><td>the whole check is interrupted and fails</td></tr>
 * <tr><td>{@code QUIET_WINDOW}</td><td>1 s</td><td>nothing that must not happen happened: the check goes on</td></tr>
 * <tr><td>{@code MAX_PROBE_OUTPUT}</td><td>64 KiB</td><td>a probe stream longer than this fails the check</td></tr>
 * <tr><td>{@code FORWARD_PAYLOAD}</td><td>64 KiB</td><td>bytes sent through a port forward and expected back</td></tr>
 * <tr><td>{@code SUPERVISOR_LOSS_SLACK}</td><td>10 s</td><td>added to the backend's own bound before invariant 6 fails</td></tr>
 * </table>
 */
module openshell.isolation.conformance {
    requires transitive openshell.isolation;
    requires transitive org.junit.jupiter.api;
    requires org.junit.platform.launcher;

    exports openshell.isolation.conformance;
    // JUnit instantiates the command-line runner's test class and extension reflectively.
    opens openshell.isolation.conformance.launcher to org.junit.platform.commons;

    uses openshell.isolation.conformance.ConformanceTarget;
}
