/**
 * The Sandbox Protocol: one authenticated gRPC connection between a supervisor and the
 * sandbox runtime it drives, over HTTP/2 and TLS 1.3, on a Unix socket or TCP, dialed by
 * either side.
 *
 * <h2>Who may use it</h2>
 * This module exports nothing publicly. Its API lives in package {@code openshell.protocol}
 * and its generated messages and stubs in {@code openshell.protocol.wire}; both are
 * exported, qualified, to {@code openshell.sandbox} (serves {@code RuntimeEndpoint}) and
 * {@code openshell.supervisor} (opens {@code SupervisorEndpoint}/{@code SupervisorLink}).
 * {@code openshell.gateway} receives both packages: it mints each launch's bundles with
 * {@code LaunchBundles} (TLS material and the token pair) over its persisted signing key
 * ({@code TokenIssuer.of}), refreshes tokens, and serves the supervisor session
 * ({@code session.proto}: one outbound stream per supervisor, whose stubs both ends need,
 * which is why it lives here; the supervisor dials it with {@code GatewayConnection}, whose calls
 * are this module's reassembling calls, because Helidon 4.1.7's gRPC client fails on any message
 * split across HTTP/2 frames). {@code exec.proto} (package {@code openshell.protocol.exec}) is
 * the users' streamed exec, one bidirectional gRPC stream per exec, exported only to
 * {@code openshell.gateway} (serves it) and {@code openshell.cli} (calls it). The friends are compiled after this
 * module, so javac cannot see them here: hence {@code @SuppressWarnings("module")}.
 *
 * <h2>Roles</h2>
 * The runtime is always the TLS server (a per-launch CA, its private key discarded after it
 * signs the one leaf for {@code sandbox.<session-id>.openshell.internal}; TLS 1.3 only);
 * the supervisor is always the caller that pins that CA and presents the sandbox-audience
 * bearer token on every call and every stream. {@link openshell.protocol.Initiator} only
 * decides who listens. New launches should use runtime-initiated links: then nothing in
 * the sandbox listens at all. With supervisor-initiated TCP the runtime's listener is
 * reachable from the sandbox network namespace; a workload can connect but cannot pass
 * TLS-pinned bearer checks, can hold at most a pre-auth slot for the handshake timeout,
 * and can never evict an authenticated link (see the bounds).
 *
 * <h2>How it sits on Helidon 4.1.7</h2>
 * Helidon's WebServer only accepts from its own TCP {@code ServerSocket}, and its gRPC
 * client opens a new TCP connection per call; neither serves a Unix socket or a socket the
 * other side dialed. So this module owns the sockets and feeds them to Helidon's public
 * SPIs: on the runtime side each link is a {@code ConnectionContext} handed to Helidon's
 * {@code Http2ConnectionSelector} with Helidon's gRPC sub-protocol and a {@code GrpcRouting}
 * of grpc-java {@code BindableService}s; on the supervisor side each link is one Helidon
 * {@code Http2ClientConnection} and calls are its streams, exposed as a grpc-java
 * {@code Channel} for generated stubs. Helidon 4.1.7 defects worked around here:
 * <ul>
 * <li>server-side {@code Metadata} carries header names instead of values: the bearer token
 *     is read from the HTTP/2 headers in front of the gRPC selector ({@code CallScope});</li>
 * <li>custom trailer metadata cannot be sent: refusal reasons lead the status description;</li>
 * <li>a finished gRPC call never frees its HTTP/2 stream slot ({@code GrpcProtocolHandler}
 *     reports HALF_CLOSED_LOCAL, so {@code Http2ServerStream} never reaches CLOSED and
 *     {@code Http2Connection} never removes it), which ended a link after about 1,024
 *     calls and streams: {@code StreamRelease} tracks both halves of each stream and reports
 *     CLOSED once both ended, and the supervisor always ends its half, also after the
 *     runtime's trailers (fixed upstream in 4.5.0);</li>
 * <li>one stream past the server's limit closes the whole connection (REFUSED_STREAM is
 *     raised as a connection error): the supervisor keeps to its own bound, below the
 *     runtime's by a slack;</li>
 * <li>every cancelled gRPC stream counts as a "rapid reset" and the count never restarts,
 *     so Helidon's CVE-2023-44487 guard closed a link after 100 cancels: it is off, and
 *     unauthenticated links are bounded by their stream count instead;</li>
 * <li>RST_STREAM is not passed to the gRPC call, and the reset stream's task waits for
 *     request data forever: {@code ResetTap} sees the supervisor's resets in the bytes
 *     Helidon reads and ends the stream's request half just before each, so the task wakes
 *     and {@code CancelBridge} cancels the call ({@code onCancel}, {@code isCancelled()});
 *     nothing more is written on the stream. The supervisor sends no RST_STREAM once it
 *     ended its half, and keeps a reset stream known for a few seconds, since Helidon's
 *     client fails its connection on frames for a stream it no longer knows;</li>
 * <li>stream tasks still waiting when a link closes are interrupted;</li>
 * <li>the client's {@code sendPing()} writes one shared static frame whose payload the
 *     first write consumes, so every later keepalive ping went out broken and an idle link
 *     died of PEER_SILENT: the supervisor writes a fresh PING frame each time, through the
 *     same lock as every other frame.</li>
 * </ul>
 *
 * <h2>Unix peers</h2>
 * Before TLS, a Unix link's peer is checked with {@code SO_PEERCRED}: its user (the JDK's
 * {@code UnixDomainPrincipal}) and, with {@code UnixPeerPolicy.processTree}, that the process
 * which connected descends from the one its driver started. The JDK does not give the pid, so
 * {@code PeerCredentials} reads it from the channel's descriptor: a JVM that checks process
 * trees runs with {@code --add-exports=java.base/sun.nio.ch=openshell.protocol} and
 * {@code --enable-native-access=openshell.protocol} (the supervisor image's options), and
 * without them refuses to set the check up rather than skip it. The runtime cannot check its
 * supervisor this way (the supervisor is outside the sandbox's pid namespace: its pid reads 0);
 * it relies on its 0700 run directory and on the pinned TLS plus bearer token.
 *
 * <h2>Minting and BouncyCastle</h2>
 * {@code LaunchTls.issue} (the per-launch CA and its leaf, behind {@code LaunchBundles.mint})
 * builds certificates with BouncyCastle; nothing else here uses it. The requirement is
 * {@code static}: the sandbox runtime only reads bundles and serves, so its image carries no
 * BouncyCastle (9.4 MiB of jars and, through their descriptors, {@code java.sql} and
 * {@code java.naming}). A module that mints must require {@code org.bouncycastle.pkix} and
 * {@code org.bouncycastle.provider} itself ({@code openshell.gateway} does; the supervisor does
 * for its interception authority), or BouncyCastle is not in its module graph and minting fails
 * with {@code NoClassDefFoundError}. The runtime's bundle check of the session's server name
 * lives apart from {@code LaunchTls} so that it never links the minting class.
 *
 * <h2>Tokens</h2>
 * ES256 (P-256), not EdDSA: helidon-security-jwt 4.1.7 has no OKP key type, so it can
 * neither sign nor verify Ed25519. Every rejection has its own
 * {@link openshell.protocol.Refusal}.
 *
 * <h2>Bounds</h2>
 * <table>
 * <caption>Limits of the Sandbox Protocol (constants in {@code ProtocolLimits})</caption>
 * <tr><th>Constant</th><th>Value</th><th>Owner</th><th>At the bound</th></tr>
 * <tr><td>HANDSHAKE_TIMEOUT</td><td>5 s</td><td>runtime link</td>
 *     <td>a link without TLS plus one valid token by then is closed (HANDSHAKE_TIMEOUT)</td></tr>
 * <tr><td>MAX_PRE_AUTH_CONNECTIONS</td><td>32</td><td>runtime endpoint</td>
 *     <td>the oldest unauthenticated link is closed to admit the new one; authenticated links
 *     are never counted or evicted</td></tr>
 * <tr><td>MAX_PEER_ANCESTRY</td><td>32</td><td>Unix listener with {@code UnixPeerPolicy.processTree}</td>
 *     <td>a peer more generations below the expected root (or not under it) is refused
 *     (PEER_REFUSED) before TLS</td></tr>
 * <tr><td>MAX_CONTROL_CONNECTIONS</td><td>128</td><td>runtime endpoint</td>
 *     <td>the next authenticated link is refused (CONNECTION_LIMIT) and closed</td></tr>
 * <tr><td>MAX_CONTROL_MESSAGE_BYTES</td><td>1 MiB</td><td>both ends</td>
 *     <td>larger messages are refused before sending and on receipt</td></tr>
 * <tr><td>STREAM_WINDOW_BYTES</td><td>1 MiB</td><td>runtime (HTTP/2 settings)</td>
 *     <td>a stream's sender blocks until its reader consumes</td></tr>
 * <tr><td>CreditedStream.MAX_IN_FLIGHT</td><td>31 messages</td><td>sender of each relay and process-I/O
 *     direction</td><td>the sender waits for a grant from the receiver (sent on the reverse direction
 *     of the same stream once the receiver delivered the messages); a peer beyond it fails the
 *     stream (RESOURCE_EXHAUSTED). Receivers deliver on the stream's own thread, never Helidon's,
 *     so a stalled relay holds at most this many messages and never the link's reader</td></tr>
 * <tr><td>CreditedStream.MAX_CHUNK_BYTES</td><td>16 KiB</td><td>relay and process-I/O senders</td>
 *     <td>a larger payload fails the stream on receipt</td></tr>
 * <tr><td>CreditedStream.FRAME_CHUNK_BYTES</td><td>16,376 bytes</td><td>the runtime's relay reader</td>
 *     <td>a chunk of it makes a message of exactly one MAX_FRAME_BYTES frame</td></tr>
 * <tr><td>CREDITED_STREAM_WINDOW_BYTES</td><td>512 KiB</td><td>supervisor (WINDOW_UPDATE when a Relay or
 *     AttachProcess call opens)</td><td>holds MAX_IN_FLIGHT messages of MAX_CHUNK_BYTES with their framing,
 *     so the runtime's sender waits on credits, never on Helidon's flow control (which fails a write
 *     after 100 ms without a window update); other calls keep the HTTP/2 default of 64 KiB</td></tr>
 * <tr><td>LINK_WINDOW_BYTES</td><td>16 MiB</td><td>every client connection (WINDOW_UPDATE after the
 *     preface)</td><td>what all streams together may have in flight towards the client; each
 *     stream stays bounded by its own window</td></tr>
 * <tr><td>StreamWindows.RETURN_DIVISOR</td><td>4</td><td>every client connection</td>
 *     <td>read bytes go back to a stream's or the connection's window once a quarter of it gathered
 *     (the calls return windows themselves: Helidon 4.1.7's client lost a stream's updates while a
 *     newer stream was open)</td></tr>
 * <tr><td>MAX_FRAME_BYTES</td><td>16 KiB</td><td>both ends</td>
 *     <td>bulk data is split so one frame never holds the writer long</td></tr>
 * <tr><td>MAX_PRE_AUTH_STREAMS</td><td>16</td><td>runtime link</td>
 *     <td>a link without a valid token yet is closed (CONNECTION_LIMIT) when it opens one
 *     more stream</td></tr>
 * <tr><td>MAX_CONCURRENT_STREAMS</td><td>1024</td><td>supervisor link</td>
 *     <td>calls and streams open at once; the next call fails alone with RESOURCE_EXHAUSTED,
 *     the link and its streams carry on. Finished streams free their slot: a link carries
 *     any number of calls and streams in its life.</td></tr>
 * <tr><td>STREAM_RELEASE_SLACK</td><td>256</td><td>runtime (HTTP/2 settings)</td>
 *     <td>the runtime admits MAX_CONCURRENT_STREAMS plus this, for slots freed just after the
 *     supervisor saw the stream end; past it Helidon closes the link</td></tr>
 * <tr><td>LinkCall.IDLE_POLL_MAX</td><td>2 s</td><td>supervisor link</td>
 *     <td>an idle call's reader looks at whether its own side ended it (a closed link wakes it at once)</td></tr>
 * <tr><td>RESET_GRACE</td><td>5 s</td><td>supervisor link</td>
 *     <td>a stream the supervisor reset is forgotten; frames for it before then are dropped</td></tr>
 * <tr><td>ForgottenStreamTap.MAX_FORGOTTEN_STREAMS</td><td>1024</td><td>every client connection</td>
 *     <td>late WINDOW_UPDATE, RST_STREAM and DATA for the last this many closed streams are
 *     dropped before Helidon's client (which fails the link on them); dropped DATA is given
 *     back to the connection window</td></tr>
 * <tr><td>KEEPALIVE_INTERVAL</td><td>5 s</td><td>supervisor link</td>
 *     <td>an HTTP/2 PING after this much read silence</td></tr>
 * <tr><td>KEEPALIVE_TIMEOUT</td><td>10 s</td><td>both ends</td>
 *     <td>a link whose peer was heard nowhere for this long is closed (PEER_SILENT): a read on the
 *     link, or the peer's frames on the link's descriptor lane ({@code SupervisorLink.heard},
 *     {@code RuntimeEndpoint.linkHeard})</td></tr>
 * <tr><td>LEDGER_CAPACITY</td><td>4096</td><td>ControlLedger (one per generation)</td>
 *     <td>the oldest request id is forgotten</td></tr>
 * <tr><td>EXEC_ADMISSION_WINDOW</td><td>30 s</td><td>caller of exec</td>
 *     <td>an exec past its deadline is refused (EXEC_EXPIRED), never started late</td></tr>
 * <tr><td>MAX_VERIFIED_TOKENS</td><td>16</td><td>each TokenVerifier</td>
 *     <td>the least recently used verified token is forgotten and its signature checked again
 *     when next presented (time and epoch are checked on every use)</td></tr>
 * <tr><td>TOKEN_MIN/MAX_LIFETIME, TOKEN_LEEWAY</td><td>1 min / 1 h, 30 s</td>
 *     <td>issuer and verifier</td><td>TOKEN_BAD_LIFETIME, TOKEN_EXPIRED, TOKEN_NOT_YET_VALID</td></tr>
 * <tr><td>TLS_VALIDITY</td><td>2 days</td><td>LaunchTls</td><td>the launch's certificates expire</td></tr>
 * <tr><td>LaunchBundles.MAX_BUNDLE_BYTES</td><td>1 MiB</td><td>minting and both mains</td>
 *     <td>a larger launch bundle is neither minted nor read (BUNDLE_INVALID)</td></tr>
 * <tr><td>LaunchBundles.MAX_LATE_ARGUMENT_BYTES</td><td>4,096 bytes</td><td>both mains, as warm spares</td>
 *     <td>longer late arguments are refused (BUNDLE_INVALID), the main exits 64</td></tr>
 * <tr><td>LaunchBundles.MAX_HOST_ALIASES</td><td>256</td><td>minting and the supervisor main</td>
 *     <td>more operator host aliases are neither minted nor read (BUNDLE_INVALID)</td></tr>
 * <tr><td>LaunchBundles.MAX_UPSTREAM_AUTHORITIES</td><td>64</td><td>minting and the supervisor main</td>
 *     <td>more upstream trust anchors are neither minted nor read (BUNDLE_INVALID)</td></tr>
 * <tr><td>DescriptorLane.MAX_BODY_BYTES</td><td>16 KiB</td><td>both ends of the descriptor lane</td>
 *     <td>a larger announcement goes on the PendingConnections stream; a larger frame received
 *     closes the lane connection</td></tr>
 * <tr><td>DescriptorLane.TOKEN_BYTES, KEY_BYTES</td><td>16, 32 bytes</td><td>both ends of the
 *     descriptor lane</td><td>a frame of another length does not decode (INVALID_ARGUMENT)</td></tr>
 * <tr><td>DescriptorLane.MAX_PATH_BYTES</td><td>107 bytes</td><td>both ends of the descriptor lane</td>
 *     <td>no lane: everything goes over the link</td></tr>
 * </table>
 */
@SuppressWarnings("module")
module openshell.protocol {
    exports openshell.protocol to openshell.sandbox, openshell.supervisor, openshell.gateway;
    exports openshell.protocol.wire to openshell.sandbox, openshell.supervisor, openshell.gateway;
    // exec.proto: the users' streamed exec, served by the gateway, called by the CLI.
    exports openshell.protocol.exec to openshell.gateway, openshell.cli;

    requires io.helidon.webserver;
    requires io.helidon.webserver.http2;
    requires io.helidon.webserver.grpc;
    requires io.helidon.webclient.api;
    requires io.helidon.webclient.http2;
    requires io.helidon.http;
    requires io.helidon.http.http2;
    requires io.helidon.http.media;
    requires io.helidon.http.encoding;
    requires io.helidon.common;
    requires io.helidon.common.buffers;
    requires io.helidon.common.context;
    requires io.helidon.common.socket;
    requires io.helidon.common.tls;
    requires io.helidon.common.concurrency.limits;
    requires io.helidon.security.jwt;
    requires jakarta.json;
    requires io.grpc;
    requires io.grpc.stub;
    requires io.grpc.protobuf;
    requires com.google.protobuf;
    requires com.google.common;
    // Minting only (LaunchTls): the runtime's image leaves BouncyCastle out; minters require it.
    requires static org.bouncycastle.pkix;
    requires static org.bouncycastle.provider;
    requires jdk.net;

    // protobuf-java builds message accessors by reflection on the generated classes.
    opens openshell.protocol.wire to com.google.protobuf;
    opens openshell.protocol.exec to com.google.protobuf;
}
