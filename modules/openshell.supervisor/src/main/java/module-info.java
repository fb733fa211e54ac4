/**
 * The supervisor: outside the workload, it decides every TCP connection and DNS query a sandbox
 * makes, by destination and by the identity of the binary that made it, then dials upstream
 * itself, enforces L7 HTTP rules on {@code rest} endpoints, injects credentials and audits every
 * decision. It is a program ({@code SupervisorMain}); it exports only {@code openshell.supervisor.spi},
 * the seam for the gateway's session client ({@code GatewaySessionClient}, loaded with
 * {@code ServiceLoader}). It consumes only the isolation contract's
 * {@code NetworkMediationSource}, so it mediates the same way for every backend.
 *
 * <h2>Mediation</h2>
 * A pending open is decided with the current policy generation on the host name this supervisor's
 * DNS plane answered for the address (its pin table), never on a name the workload claims; an
 * address with no pin is decided bare, which only IP-literal endpoints allow. Loopback,
 * link-local, unspecified and metadata addresses are never dialled, private ones only when the
 * exact host is declared; operator host aliases (trusted configuration, never policy) may name a
 * local service on purpose (a loopback target is answered to the workload as a stand-in address
 * from 198.18.0.0/15 or 2001:2::/48, since the sandbox's own loopback never leaves it, and dialled
 * at the target). Names no alias answers are resolved by the host's resolver, or by the operator's
 * DNS server when the bundle names one ({@code --upstream-resolver ADDRESS:PORT}, trusted
 * configuration like the aliases; {@code UpstreamResolver}): how tests keep every lookup on
 * loopback. A denial carries the isolation contract's reason: POLICY and
 * IDENTITY_UNRESOLVED from the engine, EXHAUSTED at a bound, TIMEOUT when the upstream handshake
 * exceeds the connect timeout, MEDIATION_UNAVAILABLE when the upstream refuses or fails (the
 * contract has no "connection refused"). One JSON audit line per decision goes to an
 * {@code AuditSink}: time, sandbox, generation, decision, cause, rule, binary path and digest,
 * ancestors, destination; never headers, query strings, bodies, command lines or secrets.
 * A policy reload is validated whole and swapped atomically; live relays
 * the new generation no longer allows are closed.
 *
 * <h2>Native relay</h2>
 * Over a Unix link the runtime can hand an allowed opaque ({@code tcp}) connection over: the
 * supervisor dials upstream with a raw socket, the runtime passes the loopback end the workload's
 * socket reached over the descriptor lane beside the link ({@code HandoffListener},
 * {@code SOCK_SEQPACKET} and {@code SCM_RIGHTS}, under a random token announced over the
 * authenticated link), and {@code SpliceRelay} moves the bytes between the two kernel sockets on
 * one thread: no relay byte crosses gRPC or a JVM. Admission, audit ({@code "relay":"native"}),
 * revocation and the relay bound are those of a relay over the link. {@code rest} connections
 * (inspected) and links without a lane keep the relay over the link.
 *
 * <p>The lane also carries the decisions of connects: the mediation sends a random lane key in
 * its PendingConnections request (over the authenticated link); a lane connection that presents
 * it may announce connects, and their denials and hand-offs go back on that connection
 * ({@code DescriptorLane}: the same PendingConnection and RelayDecision messages, one datagram
 * each), so a connect costs no gRPC stream. An allow relayed over the link still opens a Relay
 * stream. An announcement before the key, a wrong key, or any malformed frame closes the lane
 * connection, and the runtime fails the connects it announced there closed.
 *
 * <h2>L7, TLS and credentials</h2>
 * A {@code rest} connection is relayed one HTTP/1.1 request at a time (keep-alive and pipelining
 * kept in order); each request is decided with the current generation, its Host header must name
 * the admitted host, and anything ambiguous (request smuggling's material) is refused. A denial
 * answers 403 with a JSON body naming the rule. TLS on such a connection is terminated with a leaf
 * of the sandbox's own CA, created fresh per sandbox (its PEM is for the runtime to install in the
 * workload's trust store), and re-encrypted upstream with normal verification of the admitted name
 * against the JDK's default trust store. Credential placeholders in headers are replaced with the
 * secret only on admitted requests to a host the credential is bound to; anywhere else the request
 * is refused with 403. Secrets appear in no log, audit line or exception message.
 *
 * <h2>Limits</h2>
 * <table>
 * <caption>Bounds owned by this module</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code SandboxMediation.MAX_ACTIVE_RELAYS}</td><td>1024</td><td>the open is denied EXHAUSTED (EAGAIN)</td></tr>
 * <tr><td>{@code SandboxMediation.CONNECT_TIMEOUT}</td><td>10 s</td><td>the open is denied TIMEOUT (ETIMEDOUT)</td></tr>
 * <tr><td>{@code SandboxMediation.ACCEPT_POLL}</td><td>500 ms</td><td>the longest an accept loop takes to notice a close</td></tr>
 * <tr><td>{@code SandboxMediation.RELAY_BUFFER_BYTES}</td><td>16 KiB per direction</td><td>the relay waits for the reader (back-pressure)</td></tr>
 * <tr><td>{@code RemoteMediation.RELAY_LINGER}</td><td>10 s</td><td>a relay that ended in order (every byte and the half-close sent) cuts a workload that still keeps its side open</td></tr>
 * <tr><td>{@code SandboxMediation.HANDOFF_WAIT}</td><td>15 s</td><td>a handed-off connection whose socket did not arrive is dropped (the upstream socket closed)</td></tr>
 * <tr><td>{@code HandoffListener.MAX_CONNECTIONS}</td><td>2 lane connections</td><td>a further connection is closed at accept</td></tr>
 * <tr><td>{@code HandoffListener.POLL}, {@code READ_WAIT}</td><td>1 s, 5 s</td><td>the longest the accept loop outlives a close; a lane reader's wait between looks (a close shuts its connection down, which wakes it at once)</td></tr>
 * <tr><td>{@code HandoffListener.MAX_EXPECTED}</td><td>1024 decisions waiting for a socket</td><td>the open is denied EXHAUSTED</td></tr>
 * <tr><td>{@code DescriptorLane.TOKEN_BYTES}, {@code KEY_BYTES}</td><td>16, 32</td><td>a socket, failure or key frame of another length closes its lane connection</td></tr>
 * <tr><td>{@code DescriptorLane.MAX_BODY_BYTES}</td><td>16 KiB</td><td>a larger frame closes its lane connection (the runtime announces a larger connect on the stream)</td></tr>
 * <tr><td>{@code DnsPlane.MAX_IN_FLIGHT}</td><td>64 queries</td><td>the query is refused EXHAUSTED</td></tr>
 * <tr><td>{@code DnsPlane.RESOLVE_ATTEMPTS}</td><td>3, backoff {@code RETRY_BACKOFF} 100 ms doubling</td><td>SERVFAIL</td></tr>
 * <tr><td>{@code DnsPlane.RESOLVE_TIMEOUT}</td><td>5 s per attempt</td><td>the attempt counts as failed</td></tr>
 * <tr><td>{@code DnsPlane.ANSWER_TTL}</td><td>60 s</td><td>the pin lives TTL + {@code DnsPins.PIN_GRACE} (5 min), then the address is bare</td></tr>
 * <tr><td>{@code DnsPlane.MAX_ANSWERS}</td><td>16 addresses</td><td>further addresses are not answered (nor pinned)</td></tr>
 * <tr><td>{@code DnsPins.MAX_PINS}</td><td>4096 (address, name) pins</td><td>the oldest pin is forgotten</td></tr>
 * <tr><td>{@code DnsPins.MAX_NAMES_PER_ADDRESS}</td><td>8</td><td>the oldest name of that address is forgotten</td></tr>
 * <tr><td>{@code HttpParser.MAX_REQUEST_LINE_BYTES}</td><td>8234 (method 32 + target 8192 + 10)</td><td>414, connection closed</td></tr>
 * <tr><td>{@code HttpParser.MAX_HEADER_LINE_BYTES}</td><td>8 KiB</td><td>431, connection closed</td></tr>
 * <tr><td>{@code HttpParser.MAX_HEADERS}</td><td>100 fields (and trailer fields)</td><td>431, connection closed</td></tr>
 * <tr><td>{@code HttpParser.MAX_HEAD_BYTES}</td><td>64 KiB of header lines</td><td>431, connection closed</td></tr>
 * <tr><td>{@code HttpParser.MAX_CHUNK_LINE_BYTES}</td><td>1024</td><td>400, connection closed</td></tr>
 * <tr><td>{@code HttpParser.MAX_CHUNK_SIZE_DIGITS}</td><td>15 hex digits</td><td>400, connection closed</td></tr>
 * <tr><td>{@code HttpParser.MAX_CONTENT_LENGTH_DIGITS}</td><td>18 digits</td><td>400, connection closed</td></tr>
 * <tr><td>{@code HttpParser.MAX_STATUS_LINE_BYTES}</td><td>1024 (upstream)</td><td>502, connection closed</td></tr>
 * <tr><td>{@code HttpParser.MAX_INTERIM_RESPONSES}</td><td>8 (1xx) per request</td><td>connection closed</td></tr>
 * <tr><td>{@code InterceptionAuthority.MAX_LEAF_CERTIFICATES}</td><td>256 cached leaves</td><td>the least recently used is dropped and re-issued on demand</td></tr>
 * <tr><td>{@code InterceptionAuthority.CA_VALIDITY}</td><td>30 days</td><td>leaves end with the CA; a longer-lived sandbox must be restarted</td></tr>
 * <tr><td>{@code InterceptionAuthority.LEAF_RENEW_BEFORE}</td><td>1 day</td><td>a cached leaf closer to expiry is re-issued</td></tr>
 * <tr><td>{@code InterceptionAuthority.BACKDATE}</td><td>1 hour</td><td>certificates are valid from this long before issue (clock skew)</td></tr>
 * <tr><td>{@code HostAliases.MAX_ALIASES}</td><td>256</td><td>configuration refused</td></tr>
 * <tr><td>{@code UpstreamResolver.ANSWER_WAIT}</td><td>2 s for A and AAAA together</td><td>a transient failure: the DNS plane retries, then SERVFAIL</td></tr>
 * <tr><td>{@code Credentials.MAX_PROVIDERS}</td><td>64</td><td>configuration refused</td></tr>
 * <tr><td>{@code CredentialProvider.MAX_SECRET_BYTES}</td><td>8 KiB</td><td>configuration refused (value not echoed)</td></tr>
 * <tr><td>{@code CredentialProvider.MAX_HOSTS}</td><td>64 per provider</td><td>configuration refused</td></tr>
 * <tr><td>{@code SupervisorMain.ATTACH_WAIT}</td><td>120 s</td><td>the runtime did not dial in and attach: exit 70</td></tr>
 * <tr><td>{@code GatewaySession.RECONNECT_DELAY}</td><td>2 s</td><td>wait before the next session attempt</td></tr>
 * <tr><td>{@code GatewaySession.MAX_PENDING_LOG_LINES}</td><td>1,000 lines</td><td>agent log lines kept while no session is open; the oldest go, and one line says how many</td></tr>
 * <tr><td>{@code GatewaySession.LIVENESS_INTERVAL}</td><td>5 s</td><td>an empty log message on an idle session; a gateway
 *     gone without closing the stream (SIGKILL) is noticed by the failing write within about two intervals, and the
 *     session is opened again</td></tr>
 * <tr><td>{@code LaunchBundles.MAX_BUNDLE_BYTES}</td><td>1 MiB</td><td>exit 64, nothing started</td></tr>
 * <tr><td>{@code LaunchBundles.MAX_HOST_ALIASES} / {@code MAX_UPSTREAM_AUTHORITIES}</td><td>256 / 64</td><td>exit 64, nothing started</td></tr>
 * <tr><td>{@code OpenShellRuntimeBackend.CALL_DEADLINE}</td><td>30 s</td><td>a control call to the runtime fails UNAVAILABLE</td></tr>
 * <tr><td>{@code OpenShellRuntimeBackend.WAIT_ANSWER_MARGIN}</td><td>1 s (at most a quarter of the wait)</td><td>a wait
 *     asks the runtime to answer "still running" this much before its own deadline</td></tr>
 * <tr><td>{@code OpenShellRuntimeBackend.START_DEADLINE}</td><td>150 s (startAgent, exec)</td><td>the call fails UNAVAILABLE</td></tr>
 * <tr><td>{@code OpenShellRuntimeBackend.MAX_ATTACH_ATTEMPTS}</td><td>5 links</td><td>attach fails UNAVAILABLE (each link died before the runtime served it)</td></tr>
 * <tr><td>{@code RemoteMediation.MAX_QUEUED}</td><td>256 pending opens, 256 DNS queries</td><td>the next one is denied EXHAUSTED at once</td></tr>
 * <tr><td>{@code RemoteMediation.REOPEN_DELAY}</td><td>250 ms</td><td>a mediation stream that ended while the link is up is taken again after it</td></tr>
 * <tr><td>{@code RemoteMediation.MAX_REOPENS}</td><td>8 in a row without a message</td><td>the supervisor stops taking it again; the runtime's supervision-loss grace applies</td></tr>
 * <tr><td>{@code AgentLog.MAX_LINES_PER_SECOND}</td><td>100 lines of agent output to the gateway's log</td><td>more are counted and said in one line the next second</td></tr>
 * <tr><td>{@code AgentLog.MAX_LINE_BYTES}</td><td>4,096</td><td>a longer line is cut into lines of this many bytes</td></tr>
 * <tr><td>{@code AuditForward.MAX_LINES_PER_SECOND}</td><td>50 decisions a second to the gateway's sandbox log</td><td>more are held back (denials go first), counted and said in one line; the supervisor's own audit output keeps every one</td></tr>
 * <tr><td>{@code AuditForward.MAX_QUEUED}</td><td>1,000 decisions waiting to be sent</td><td>a further one is counted as held back</td></tr>
 * <tr><td>{@code AuditForward.FLUSH_INTERVAL}</td><td>200 ms</td><td>decisions go to the gateway in batches this far apart</td></tr>
 * <tr><td>{@code SupervisorMain.AGENT_LOG_DRAIN}</td><td>5 s after the agent's exit</td><td>lines not handed on by then are not sent</td></tr>
 * <tr><td>{@code InboundBytes.MAX_CHUNKS}</td><td>64 chunks (≤ 1 MiB) per stream</td><td>the link's reader waits for the consumer</td></tr>
 * </table>
 *
 * <h2>Backend for the sandbox runtime</h2>
 * {@code OpenShellRuntimeBackend} ({@code openshell-sandbox}, version 1) drives the runtime over
 * the Sandbox Protocol ({@code openshell.protocol}, a friend export): control calls are stamped
 * with a request id and digest, process I/O and mediation are streams.
 *
 * <h2>Native calls</h2>
 * {@code openshell.linux} (a friend export, over JNA) makes its native relay and socket calls.
 */
module openshell.supervisor {
    // The exported SPI's exec callback speaks the isolation contract's ExecSpec/ExecSession.
    requires transitive openshell.isolation;
    requires openshell.policy;
    requires openshell.linux;
    requires io.helidon.common;
    requires io.helidon.http;
    requires io.helidon.webserver;
    requires jakarta.json;
    requires org.bouncycastle.pkix;
    requires org.bouncycastle.provider;
    requires openshell.protocol;
    requires io.grpc;
    requires io.grpc.stub;
    requires com.google.protobuf;

    exports openshell.supervisor.spi;

    uses openshell.supervisor.spi.GatewaySessionClient;
    provides openshell.supervisor.spi.GatewaySessionClient with openshell.supervisor.SessionClientProvider;
    provides openshell.isolation.spi.IsolationBackendProvider with openshell.supervisor.OpenShellRuntimeBackend.Provider;
}
