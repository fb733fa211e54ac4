/**
 * The policy of a sandbox: its YAML document, validation that reports every problem with its
 * YAML path and line, the static sections the launcher applies at creation (filesystem, Landlock,
 * process) and the decision engine the supervisor asks about every connection, DNS name and HTTP
 * request. The engine is pure, deterministic and thread-safe; a policy generation is immutable so
 * a reload swaps it atomically, and an invalid document never becomes a {@code Policy}.
 *
 * <p>Start at {@link openshell.policy.Policy#parse} and {@link openshell.policy.PolicyGeneration}.
 * Destination addresses are classified by {@link openshell.policy.AddressClass}.
 *
 * <h2>Limits</h2>
 * <table>
 * <caption>Bounds owned by this module (constants on {@link openshell.policy.Policy})</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code MAX_DOCUMENT_BYTES}</td><td>1 MiB</td><td>rejected before parsing</td></tr>
 * <tr><td>{@code MAX_NESTING_DEPTH}</td><td>32</td><td>rejected (YAML problem)</td></tr>
 * <tr><td>{@code MAX_ALIASES}</td><td>16 aliases to collections</td><td>rejected (YAML problem)</td></tr>
 * <tr><td>{@code MAX_NODES}</td><td>200,000 nodes read, aliases counted each time</td><td>rejected, reading stops</td></tr>
 * <tr><td>{@code MAX_NETWORK_POLICIES}</td><td>256 blocks</td><td>rejected</td></tr>
 * <tr><td>{@code MAX_ENDPOINTS}</td><td>256 per block</td><td>rejected</td></tr>
 * <tr><td>{@code MAX_BINARIES}</td><td>256 per block</td><td>rejected</td></tr>
 * <tr><td>{@code MAX_RULES}</td><td>256 rules and 256 deny rules per endpoint</td><td>rejected</td></tr>
 * <tr><td>{@code MAX_PORTS}</td><td>256 per endpoint</td><td>rejected</td></tr>
 * <tr><td>{@code MAX_FILESYSTEM_PATHS}</td><td>256 read-only and read-write together</td><td>rejected</td></tr>
 * <tr><td>{@code MAX_NAME_LENGTH}</td><td>63 characters per block name</td><td>rejected</td></tr>
 * <tr><td>{@code MAX_PATH_LENGTH}</td><td>4096 characters per filesystem or binary path</td><td>rejected</td></tr>
 * <tr><td>{@code MAX_PATH_PATTERN_LENGTH}</td><td>1024 characters per rule path</td><td>rejected</td></tr>
 * <tr><td>{@code MAX_METHOD_LENGTH}</td><td>32 characters per HTTP method</td><td>rejected in a rule; the request is denied (MALFORMED_REQUEST)</td></tr>
 * <tr><td>{@code MAX_REQUEST_TARGET_LENGTH}</td><td>8192 characters per HTTP request target</td><td>the request is denied (MALFORMED_REQUEST)</td></tr>
 * <tr><td>{@code MAX_QUERY_CONDITIONS}</td><td>32 parameters named in one rule's {@code query}</td><td>rejected</td></tr>
 * <tr><td>{@code MAX_QUERY_PARAMETERS}</td><td>256 parameters decoded from one request's query</td><td>the request is denied (MALFORMED_REQUEST), only when a rule reads the query</td></tr>
 * <tr><td>{@code WorkloadPaths.MAX_SYMLINK_HOPS}</td><td>40 symlinks followed per binary path</td><td>the path is matched as written</td></tr>
 * </table>
 * A wildcard host has at least three labels ({@code HostNames.MIN_WILDCARD_LABELS}, upstream's
 * rule). The schema is upstream OpenShell's version 1; {@code docs/policy.md} is its reference.
 * Host names follow DNS: at most 63 characters per label and 253 per name, in policies and in
 * requests; a longer name is rejected in a policy and denied (MALFORMED_REQUEST) in a request.
 */
module openshell.policy {
    requires transitive openshell.isolation;
    requires org.yaml.snakeyaml;

    exports openshell.policy;
}
