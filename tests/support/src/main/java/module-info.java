/**
 * What the black-box suites and the benchmarks share to keep to the network rule (they talk only to
 * loopback): {@link openshell.tests.support.LoopbackResolver}, the DNS server a suite starts on
 * loopback for its supervisors ({@code --upstream-resolver}) instead of the host's resolver, and
 * {@link openshell.tests.support.LoopbackRule}, the checks that a suite runs where only loopback
 * exists and that its supervisors dialled nothing else. One copy, so a suite cannot drift from it.
 *
 * <h2>Limits</h2>
 * <table>
 * <caption>Bounds owned by this module</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code LoopbackResolver.ANSWER_TTL_SECONDS}</td><td>30 s</td><td>the resolver's answers say so</td></tr>
 * </table>
 */
module openshell.tests.support {
    requires openshell.isolation;

    exports openshell.tests.support;
}
