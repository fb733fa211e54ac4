/**
 * The gateway: the public API, sandbox records, admission, JWT minting and supervisor sessions.
 * Exports nothing; it is a program, not a library.
 *
 * <h2>Admission and launches</h2>
 * {@code POST /v1/sandboxes} validates the policy whole (every problem listed, nothing changed),
 * takes the driver from trusted configuration, never the request, and seals each launch with
 * {@code openshell.protocol.LaunchBundles} over the gateway's persistent ES256 key
 * ({@code <state>/signing-key}, 0600, generated at first start, never logged). Each launch has a
 * fresh session lineage and the next runtime generation; the record, descriptor, generation and
 * credential epoch are persisted, so a restarted gateway lists, stops, starts and deletes every
 * sandbox. Minting needs BouncyCastle, which {@code openshell.protocol} requires only statically
 * (the sandbox runtime, which never mints, leaves it out of its image): the gateway requires it
 * itself.
 *
 * <h2>Operator network</h2>
 * {@code --host-alias NAME=ADDRESS}, {@code --upstream-ca FILE} and
 * {@code --upstream-resolver ADDRESS:PORT} ({@code OperatorNetwork}) are trusted configuration:
 * every launch's supervisor bundle carries them, and no policy or request can add to them. An
 * alias lets a policy's name reach a chosen address (host loopback included); an upstream CA is
 * trusted for upstream TLS besides the system trust store; the resolver is the DNS server (UDP)
 * the supervisors ask instead of the host's, so tests and benchmarks resolve on loopback.
 *
 * <h2>Supervisor sessions</h2>
 * Each supervisor keeps one gRPC stream ({@code GatewaySession.Open}, HTTP/2 on the API port),
 * authenticated by its first message with the launch's gateway-audience token: signature, issuer,
 * audience, sandbox, generation and lineage must match the record and the epoch must be no lower
 * than the recorded one. Right after a hello the gateway refreshes the pair with the next epoch
 * (so an opening token is spent; after a restart the old lineage's tokens die at once), and again
 * {@code REFRESH_MARGIN} before expiry. Policy sets, exec and forward relays and logs travel on this stream.
 * Plain HTTP/2 suits a loopback gateway; a gateway on another host needs TLS in front.
 *
 * <h2>Gateway restarts</h2>
 * Nothing of a sandbox lives only in the gateway's memory: records, launch specifications,
 * policies and log lines are in the store, and supervisors and workloads are not children that die
 * with the gateway. After SIGTERM or SIGKILL a gateway started on the same state directory and
 * port (the address each supervisor's launch names) finds every sandbox as it was; each supervisor
 * reconnects on its own with its newest token, is refreshed to the next credential epoch at once,
 * and every older token stays refused. The runtime generation does not change: it is the same
 * launch.
 *
 * <h2>Observed failures</h2>
 * Nothing restarts a dead supervisor, so a sandbox whose parts die must say so. The observer
 * ({@code SandboxObserver}) asks the driver every {@code POLL_INTERVAL} what runs of each
 * PROVISIONING or RUNNING sandbox; {@code list} and {@code get} show that observation beside the
 * record, and a session whose supervisor is seen gone is ended at once. Once nothing of the
 * workload runs (a killed supervisor's runtime terminated it, the runtime or the namespaces died,
 * the agent exited) the record moves to FAILED with the cause and the time (kept beside it,
 * {@code SandboxFailure}), and the sandbox's log and the gateway's log say so. A workload that
 * nothing would end (supervisor and runtime gone, or still running past
 * {@code WORKLOAD_TERMINATION_BOUND}) is stopped by the trusted cleanup path first. A sandbox being
 * created, stopped, started or deleted is never judged ({@code Transitions}); a failure needs
 * {@code CONFIRMATIONS} observations of one record version and is written only if the record is
 * still that version, so a lifecycle operation of any replica wins. A store or driver error costs
 * one pass.
 *
 * <h2>Streamed exec: why a bidirectional HTTP/2 (gRPC) stream, not WebSocket</h2>
 * {@code openshell sandbox exec} and {@code sandbox connect} use {@code SandboxExec.Exec}
 * ({@code exec.proto}), one bidirectional gRPC stream per exec on the API port, authenticated
 * with the API token in its first frame (Helidon 4.1.7's gRPC server gives interceptors header
 * names instead of values, so a header cannot be checked). WebSocket was the other candidate, but
 * Helidon's WebSocket server and client do not exist for 4.1.7 in the mirror we build from, and
 * mixing Helidon versions is not an option; the HTTP/2 gRPC stack is already here, proven by the
 * supervisor sessions, and gives one full-duplex stream with typed frames (stdin, half-close,
 * resize, signal, output, credit, exit). The one-shot {@code POST /v1/sandboxes/{ref}/exec}
 * (NDJSON, whole stdin in the request) stays for curl. Every hop is flow-controlled by credit:
 * caller → gateway → supervisor for stdin (windows of {@code SessionExec.STDIN_WINDOW}; the
 * gateway forwards at once and never queues stdin), supervisor → gateway → caller for output (the
 * gateway queues at most {@code SessionExec.OUTPUT_WINDOW} per exec and returns credit to the
 * supervisor only once the bytes went out to the caller, which itself grants credit as it
 * consumes). A caller that disconnects, cancels or half-closes its stream before the exit
 * terminates the exec (its whole process tree); nothing detaches. A port forward
 * ({@code openshell sandbox forward}) is the same stream and the same session relay started with
 * {@code forward_port} instead of argv: its far end is one connection the supervisor opens through
 * the running boundary to that port on the sandbox's own loopback, never any other address, and it
 * counts against the same per-session bound as execs.
 *
 * <h2>Replicas</h2>
 * Several gateways may share one PostgreSQL database; each has a stable replica id
 * ({@code <state>/replica-id}) and records its API address there. Each sandbox is managed by
 * one replica at a time, the holder of its lease ({@code LeaseStore}: holder, expiry, and a
 * fencing epoch that rises each time the lease changes hands, all by compare-and-set in the
 * database). Only the holder observes the sandbox, calls its driver, refreshes its tokens and
 * keeps its supervisor's session, checking its grant right before each of these; it judges its
 * lease lapsed {@code Replicas.SAFETY_MARGIN} before the stored expiry, so it has stopped before
 * another replica may take over. A new sandbox is leased to the replica that creates it; leases
 * nobody holds are taken by whichever replica looks first. Any replica answers every API call:
 * reads come from the store, and what must run at the manager (get with its observation, stop,
 * start, delete, policy set, the one-shot exec) is relayed to it ({@code Forwarding}), and so is a
 * streamed exec whose session is there ({@code ExecEndpoint}). The
 * replicas must share the API token, the signing key and the secret box key (the state
 * directory's {@code api-token}, {@code signing-key} and {@code secrets.key}). The embedded H2
 * store serves one gateway: a second one on the same file does not start and names the first.
 *
 * <table>
 * <caption>Bounds owned by the replicas</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code LeaseStore.LEASE_DURATION}</td><td>15 s from the last acquisition or renewal</td><td>the lease is expired at that instant: any replica may take it, with the next epoch</td></tr>
 * <tr><td>{@code Replicas.RENEW_PERIOD}</td><td>5 s between renewals (and looks for free leases)</td><td>the next pass renews</td></tr>
 * <tr><td>{@code Replicas.SAFETY_MARGIN}</td><td>5 s before the stored expiry, counted from when the renewal was sent</td><td>the holder stops acting on the sandbox and ends its session</td></tr>
 * <tr><td>{@code Replicas.TAKEOVER_BOUND}</td><td>20 s (lease plus one pass) after the holder's last renewal</td><td>another live replica manages the sandbox</td></tr>
 * <tr><td>{@code Replicas.MAX_ACQUIRED_PER_PASS}</td><td>256 free leases</td><td>the rest are taken by the next pass</td></tr>
 * <tr><td>{@code LeaseStore.MAX_API_URL_CHARS}</td><td>512</td><td>the replica does not start</td></tr>
 * <tr><td>{@code Forwarding.CONNECT_TIMEOUT}</td><td>5 s</td><td>503: the managing replica did not answer; retry</td></tr>
 * <tr><td>{@code Forwarding.ANSWER_TIMEOUT}</td><td>60 s until the managing replica's answer begins</td><td>503; retry</td></tr>
 * </table>
 *
 * <h2>Storage</h2>
 * Sandbox records live in an embedded H2 database under the state directory by default (zero
 * setup) or in PostgreSQL for several gateway replicas on one database. The schema is versioned;
 * a database with a newer schema than this gateway knows is refused, never written.
 *
 * <table>
 * <caption>Bounds owned by the store</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code SandboxRecord.MAX_DESCRIPTOR_BYTES}</td><td>64 KiB</td><td>refused, nothing written</td></tr>
 * <tr><td>{@code SandboxRecord.MAX_POLICY_BYTES}</td><td>1 MiB</td><td>refused, nothing written</td></tr>
 * <tr><td>{@code SandboxStore.MAX_SANDBOXES}</td><td>10,000</td><td>create refused</td></tr>
 * </table>
 *
 * <table>
 * <caption>Bounds owned by the API and the sessions</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code GatewayServer.MAX_REQUEST_BYTES}</td><td>64 KiB</td><td>413, nothing read</td></tr>
 * <tr><td>{@code OperatorNetwork.MAX_HOST_ALIASES}</td><td>256</td><td>the gateway does not start (exit 2)</td></tr>
 * <tr><td>{@code OperatorNetwork.MAX_UPSTREAM_AUTHORITIES}</td><td>64 certificates</td><td>the gateway does not start (exit 2)</td></tr>
 * <tr><td>{@code OperatorNetwork.MAX_AUTHORITY_FILE_BYTES}</td><td>256 KiB per {@code --upstream-ca} file</td><td>the gateway does not start (exit 2)</td></tr>
 * <tr><td>{@code LaunchSpec.MAX_PROVIDERS}</td><td>32</td><td>create refused (400)</td></tr>
 * <tr><td>{@code SandboxApi.MAX_EXEC_STDIN_BYTES}</td><td>32 KiB</td><td>exec refused (400)</td></tr>
 * <tr><td>{@code SandboxApi.EXEC_HEARTBEAT}</td><td>10 s</td><td>an empty {@code {}} line on a quiet exec stream</td></tr>
 * <tr><td>{@code ExecEndpoint.HEARTBEAT}</td><td>10 s</td><td>a {@code heartbeat} frame on a quiet gRPC exec stream, announced in {@code ExecStarted}</td></tr>
 * <tr><td>{@code SessionHub.HELLO_TIMEOUT}</td><td>10 s</td><td>a stream without a hello is closed</td></tr>
 * <tr><td>{@code SessionHub.POLICY_TIMEOUT}</td><td>30 s</td><td>policy set answers 503, nothing recorded</td></tr>
 * <tr><td>{@code SessionHub.ACK_TIMEOUT}</td><td>30 s</td><td>an unacknowledged refresh ends the session</td></tr>
 * <tr><td>{@code SessionHub.TOKEN_LIFETIME}</td><td>30 min</td><td>tokens expire; refreshed 10 min before</td></tr>
 * <tr><td>{@code SessionHub.MAX_EXECS_PER_SESSION}</td><td>64</td><td>the next exec is refused (429)</td></tr>
 * <tr><td>{@code SessionHub.MAX_EXEC_EVENTS}</td><td>256</td><td>the supervisor's stream waits up to 30 s, then the exec is abandoned</td></tr>
 * <tr><td>{@code SandboxLogs.MAX_LINES}</td><td>1000 per sandbox, in the store</td><td>the oldest line goes</td></tr>
 * <tr><td>{@code SandboxLogs.MAX_REMEMBERED_LOSSES}</td><td>10,000 sandboxes (the store's bound)</td><td>a further loss is reported on standard error but not announced in the sandbox's log</td></tr>
 * <tr><td>{@code SandboxLogs.APPEND_ATTEMPTS}</td><td>3 tries per batch of log lines</td><td>the lines are counted as lost, reported on standard error, and the sandbox's next kept line says how many</td></tr>
 * <tr><td>{@code LogWriter.MAX_PENDING_BATCHES}</td><td>1024 batches of supervisors' log lines waiting for the store (written by one thread of their own, never on a session's thread)</td><td>the batch is counted as lost like a refused one</td></tr>
 * <tr><td>{@code LogWriter.MAX_PENDING_CHARS}</td><td>4 Mi characters of queued log lines (each counted as kept, at most {@code MAX_LINE_CHARS})</td><td>the batch is counted as lost like a refused one</td></tr>
 * <tr><td>{@code LogWriter.DRAIN_WAIT}</td><td>10 s at gateway stop</td><td>batches still queued are counted as lost, reported on standard error</td></tr>
 * <tr><td>{@code SessionExec.OUTPUT_WINDOW}</td><td>256 KiB per exec</td><td>the supervisor waits for credit; exceeding it loses and terminates the exec</td></tr>
 * <tr><td>{@code SessionExec.STDIN_WINDOW}</td><td>16 KiB per exec (inside HTTP/2's 64 KiB window: see the class)</td><td>the caller waits for credit; exceeding it ends the stream with an error and terminates the exec</td></tr>
 * <tr><td>{@code ExecEndpoint.DEFAULT_CLIENT_OUTPUT_WINDOW}</td><td>256 KiB</td><td>the gateway waits for the caller's credit</td></tr>
 * <tr><td>{@code ExecEndpoint.MAX_CLIENT_OUTPUT_WINDOW}</td><td>4 MiB</td><td>a larger announced window is capped</td></tr>
 * <tr><td>{@code SandboxLogs.MAX_LINE_CHARS}</td><td>4096</td><td>the line is cut</td></tr>
 * </table>
 *
 * <table>
 * <caption>Bounds owned by the observer</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code SandboxObserver.POLL_INTERVAL}</td><td>1 s between passes</td><td>the next pass looks again</td></tr>
 * <tr><td>{@code SandboxObserver.CONFIRMATIONS}</td><td>2 failed observations of one record version</td><td>the record moves to FAILED (so within about 2 s of the workload's end)</td></tr>
 * <tr><td>{@code SandboxObserver.STATUS_TIMEOUT}</td><td>5 s per driver status; one question per sandbox outstanding</td><td>"cannot tell": nothing changes, the pass goes on</td></tr>
 * <tr><td>{@code SandboxObserver.MAX_OBSERVED_PER_PASS}</td><td>256 sandboxes</td><td>the rest are taken in turn by the next passes</td></tr>
 * <tr><td>{@code SandboxObserver.WORKLOAD_TERMINATION_BOUND}</td><td>45 s DEGRADED with the workload running (the runtime's 30 s bound plus a margin)</td><td>the gateway stops what is left and records FAILED</td></tr>
 * <tr><td>{@code SandboxObserver.CLOSE_WAIT}</td><td>10 s at gateway stop</td><td>a pass still running is abandoned, reported on standard output</td></tr>
 * <tr><td>{@code SandboxFailure.MAX_CAUSE_CHARS}</td><td>4096</td><td>the cause is cut</td></tr>
 * </table>
 */
module openshell.gateway {
    requires java.sql;
    // Relaying an API call (Forwarding) or a streamed exec (ExecEndpoint) to the replica that manages the sandbox.
    requires java.net.http;
    requires io.helidon.webclient.grpc;
    requires io.helidon.common.tls;
    requires openshell.driver;
    requires openshell.isolation;
    requires openshell.policy;
    requires openshell.protocol;
    // LaunchBundles.mint needs BouncyCastle, which openshell.protocol only requires statically.
    requires org.bouncycastle.pkix;
    requires org.bouncycastle.provider;
    requires io.helidon.webserver.grpc;
    requires io.grpc;
    requires io.grpc.stub;
    requires com.google.protobuf;
    requires io.helidon.common.config;
    requires io.helidon.http;
    requires io.helidon.webserver;
    requires jakarta.json;
    requires io.helidon.config;
    requires io.helidon.dbclient;
    requires io.helidon.dbclient.jdbc;
    requires io.helidon.dbclient.hikari;
    // Both JDBC drivers the store supports; required so they are resolved on the module path.
    requires com.h2database;
    requires org.postgresql.jdbc;
}
