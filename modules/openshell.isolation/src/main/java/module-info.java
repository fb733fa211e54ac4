/**
 * The Isolation Backend contract: one lifecycle that every sandbox topology (host processes,
 * containers, pods, VMs) implements, so the supervisor never branches on where a workload runs.
 *
 * <p>The lifecycle is a typestate: {@link openshell.isolation.IsolationBackend#attach attach}
 * gives a {@link openshell.isolation.BoundBoundary}, whose {@code confirm} gives a
 * {@link openshell.isolation.ReadyBoundary}, whose {@code startAgent} gives a
 * {@link openshell.isolation.RunningBoundary}. Each step consumes its handle; a consumed handle
 * rejects every call, and an error never advances state. Backends are found only through
 * {@link openshell.isolation.BackendRegistry} by exact name and version, never by fallback.
 *
 * <h2>Limits</h2>
 * <table>
 * <caption>Bounds owned by this module</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code TopologyDescriptor.MAX_PAYLOAD_BYTES}</td><td>64 KiB</td><td>INVALID</td></tr>
 * <tr><td>{@code SandboxId.MAX_LENGTH}</td><td>63</td><td>INVALID</td></tr>
 * <tr><td>{@code AgentSpec.MAX_ARGS} / {@code ExecSpec.MAX_ARGS}</td><td>4096</td><td>INVALID</td></tr>
 * <tr><td>{@code AgentSpec.MAX_ENV}</td><td>4096</td><td>INVALID</td></tr>
 * <tr><td>{@code BinaryIdentity.MAX_ANCESTORS}</td><td>64</td><td>INVALID</td></tr>
 * <tr><td>{@code WorkloadIdentity.MAX_GROUPS}</td><td>64</td><td>INVALID</td></tr>
 * <tr><td>{@code BinaryIdentity.MAX_CMDLINE}</td><td>256</td><td>INVALID</td></tr>
 * <tr><td>{@code Executable.MAX_PATH}</td><td>4096 (PATH_MAX)</td><td>INVALID</td></tr>
 * <tr><td>{@code ExecSpec.MAX_ADMISSION}</td><td>30 s (also the default)</td><td>INVALID when longer</td></tr>
 * <tr><td>{@code PolicySnapshot.MAX_DOCUMENT_BYTES}</td><td>1 MiB</td><td>INVALID</td></tr>
 * <tr><td>{@code WorkloadTrust.MAX_PEM_BYTES}</td><td>16 KiB</td><td>INVALID</td></tr>
 * <tr><td>{@code WorkloadTrust.MAX_CERTIFICATES}</td><td>8</td><td>INVALID</td></tr>
 * <tr><td>{@code PendingDnsQuery.MAX_MESSAGE_BYTES}</td><td>65535</td><td>INVALID; the query stays unanswered</td></tr>
 * <tr><td>{@code DnsMessage.MAX_QUERY_BYTES}</td><td>512</td><td>FORMERR</td></tr>
 * <tr><td>{@code SandboxSessionId.LENGTH}</td><td>26 (128 random bits)</td><td>any other length is INVALID</td></tr>
 * </table>
 */
// Friends are compiled after this module, so javac cannot see them here (lint "module").
@SuppressWarnings("module")
module openshell.isolation {
    exports openshell.isolation;
    exports openshell.isolation.spi;
    // The one DNS wire format of the modules that read or answer a workload's queries.
    exports openshell.isolation.dns to openshell.supervisor, openshell.sandbox, openshell.isolation.conformance,
            openshell.tests.support;

    uses openshell.isolation.spi.IsolationBackendProvider;
}
