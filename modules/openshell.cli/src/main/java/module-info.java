/**
 * The {@code openshell} command. For sandboxes it uses only the gateway's public REST API (and
 * starts the gateway program as a separate process), so everything it does can be done with curl
 * too, except the streamed exec ({@code sandbox exec}, {@code sandbox connect}): one
 * bidirectional gRPC stream (HTTP/2) per exec, the gateway's {@code SandboxExec} service, with the
 * API token in its first frame (grpcurl can drive it). Why HTTP/2 and not
 * WebSocket: Helidon 4.1.7 has no WebSocket modules in our mirror, and the gRPC stack is already
 * proven here. Ctrl-C on a PTY is a key the remote terminal turns into SIGINT; on pipes it
 * ends the CLI and the gateway terminates the command's whole tree. Both directions are flow-controlled by credit (see {@code ExecStream}); the exit
 * code arrives after all output. {@code sandbox forward} relays each connection to a local
 * loopback listener over the same stream, started with a port instead of a command, to that port
 * on the sandbox's own loopback. {@code policy check} and {@code policy explain} use the policy engine locally, because
 * checking a policy must not need a running gateway.
 *
 * <p>The command line ({@code Usage}, {@code GlobalOptions}): {@code -h}/{@code --help} on every
 * command prints its usage on stdout (exit 0); a usage error prints the usage of the command it was
 * given to on stderr (exit 2); {@code --state}, {@code -o}/{@code --output text|json} may stand
 * anywhere before {@code --}, and with {@code -o json} a command prints one JSON document on stdout,
 * an error too ({@code {"error": REASON, "message": ..., "exitCode": N}}, the gateway's error shape).
 * Progress and the CLI's own messages go to stderr, each on a line of its own.
 *
 * <p>Exit codes: 0 success (for explain: allowed); 1 the operation failed (for check: the policy
 * has problems); 2 usage error; 3 the gateway is not running or not reachable; 4 no such sandbox;
 * 5 explain: denied; {@code exec}, {@code connect} and {@code run} exit with the command's code.
 *
 * <table>
 * <caption>Bounds of the streamed exec</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code ExecStream.OUTPUT_WINDOW}</td><td>16 KiB</td><td>the gateway waits until the CLI wrote output out</td></tr>
 * <tr><td>{@code ExecStream.STDIN_CHUNK}</td><td>8 KiB</td><td>stdin is sent in chunks of at most this</td></tr>
 * <tr><td>{@code ExecStream.START_TIMEOUT_SECONDS}</td><td>60 s</td><td>the exec fails (exit 1) if not started</td></tr>
 * <tr><td>{@code ExecStream.MAX_MISSED_HEARTBEATS}</td><td>6 (60 s at the gateway's 10 s)</td><td>a gateway silent longer is taken as a lost connection: the exec ends from this side, exit 1 with the reason</td></tr>
 * <tr><td>{@code PortForward.MAX_CONNECTIONS}</td><td>32</td><td>{@code sandbox forward} closes a further local connection at once, with a line on stderr</td></tr>
 * <tr><td>{@code LocalTerminal.RESIZE_POLL_MILLIS}</td><td>500 ms</td><td>a resize reaches the remote terminal within this</td></tr>
 * <tr><td>{@code LocalTerminal.STTY_TIMEOUT_SECONDS}</td><td>5 s</td><td>stty is killed; no raw mode or size</td></tr>
 * </table>
 *
 * <table>
 * <caption>Bounds of the command line</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code SandboxLogView.MAX_SINCE}</td><td>36,500 days</td><td>a {@code sandbox logs --since} further back is a usage error (exit 2)</td></tr>
 * <tr><td>{@code GatewayStartLog.MAX_READ_BYTES}</td><td>64 KiB of the end of {@code gateway.log}</td><td>a gateway that did not start is quoted from at most this much of what its start wrote</td></tr>
 * <tr><td>{@code GatewayStartLog.TAIL_LINES}</td><td>3 lines</td><td>without a line of the gateway's own, its last lines are quoted</td></tr>
 * </table>
 */
module openshell.cli {
    requires io.helidon.common;
    requires io.helidon.http;
    requires io.helidon.webclient;
    requires io.helidon.webclient.api;
    requires jakarta.json;
    requires openshell.policy;
    // The streamed exec: exec.proto's stubs (exported to this module only) over Helidon's gRPC client.
    requires openshell.protocol;
    requires io.helidon.webclient.grpc;
    requires io.helidon.common.tls;
    requires io.grpc;
    requires io.grpc.stub;
    requires com.google.protobuf;
    // Deliberately no jdk.unsupported: with it in the graph protobuf uses sun.misc.Unsafe and the
    // JDK prints a warning onto the remote command's stderr (so no sun.misc.Signal: see LocalTerminal).
    requires java.logging;
}
