package openshell.gateway;

import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;

import com.google.protobuf.ByteString;
import io.grpc.Channel;
import io.grpc.stub.StreamObserver;
import io.helidon.common.tls.Tls;
import io.helidon.webclient.grpc.GrpcClient;
import openshell.gateway.store.SandboxRecord;
import openshell.protocol.exec.ExecClientFrame;
import openshell.protocol.exec.ExecServerFrame;
import openshell.protocol.exec.ExecStart;
import openshell.protocol.exec.ExecStarted;
import openshell.protocol.exec.SandboxExecGrpc;
import openshell.protocol.wire.RemoteExec;
import openshell.protocol.wire.RemoteExecEvent;
import openshell.protocol.wire.RemoteTerminalSize;

/**
 * The users' streamed exec ({@code exec.proto}): one bidirectional gRPC stream per exec, which
 * is the gateway's "exec with streamed I/O over HTTP/2". Each stream relays to one
 * {@link SessionExec} on the sandbox's supervisor session. Flow control is by credit on both
 * hops, so the gateway holds at most {@link SessionExec#OUTPUT_WINDOW} output bytes per exec
 * however slowly the caller reads, and forwards stdin at once (the caller may have at most
 * {@link SessionExec#STDIN_WINDOW} unacknowledged; more is a protocol error). The caller's output
 * window is capped at {@link #MAX_CLIENT_OUTPUT_WINDOW}. A stream that ends before the exit
 * (cancel, disconnect, or the caller's half-close) terminates the exec. The first frame must carry
 * the API token: Helidon 4.1.7's gRPC server gives interceptors header names instead of values,
 * so the token cannot be checked as a header; without it nothing runs and nothing is looked up.
 * A start with {@code forward_port} is a port forward ({@code openshell sandbox forward}): the same
 * relay, with one connection to that port on the sandbox's own loopback at its far end.
 *
 * <p>Among replicas the supervisor's session is at the replica that manages the sandbox: a stream
 * that reaches another replica is relayed whole to the managing one (its first frame as it came,
 * then every frame both ways unchanged), so flow control stays between the caller and the
 * replica that holds the session, and this one holds nothing but the frames in flight.
 */
final class ExecEndpoint extends SandboxExecGrpc.SandboxExecImplBase {
    /** Output window when the caller announces none. */
    static final int DEFAULT_CLIENT_OUTPUT_WINDOW = 256 * 1024;
    /** Largest output window a caller may announce (it only bounds the caller's own buffers). */
    static final int MAX_CLIENT_OUTPUT_WINDOW = 4 * 1024 * 1024;
    /**
     * Largest output piece per frame to the caller: the CLI's Helidon 4.1.7 gRPC client cannot
     * parse a message spanning two HTTP/2 DATA frames (see {@link SessionExec#MAX_STDIN_PIECE}).
     */
    static final int MAX_OUTPUT_PIECE = 8 * 1024;
    /** Highest TCP port a forward may name. */
    static final int MAX_PORT = 65535;
    /** How often the relay looks again for an event while none comes (and for a heartbeat due). */
    static final Duration POLL = Duration.ofSeconds(1);
    /**
     * Longest silence towards the caller: after it a heartbeat frame goes out (announced in
     * {@code ExecStarted.heartbeat_millis}), so the caller tells a quiet command from a lost connection.
     */
    static final Duration HEARTBEAT = SandboxApi.EXEC_HEARTBEAT;

    private final SandboxApi sandboxes;
    private final SessionHub sessions;
    private final ApiToken token;
    private final Map<String, Channel> channels = new ConcurrentHashMap<>();

    ExecEndpoint(SandboxApi sandboxes, SessionHub sessions, ApiToken token) {
        this.sandboxes = sandboxes;
        this.sessions = sessions;
        this.token = token;
    }

    @Override
    public StreamObserver<ExecClientFrame> exec(StreamObserver<ExecServerFrame> out) {
        return new Relay(out);
    }

    /** One caller's stream. */
    private final class Relay implements StreamObserver<ExecClientFrame> {
        private final StreamObserver<ExecServerFrame> out;
        private final AtomicReference<SessionExec> exec = new AtomicReference<>();
        /** The managing replica's stream, when this one relays the whole exec there. */
        private volatile StreamObserver<ExecClientFrame> upstream;
        private int clientWindow;
        private long clientCredit;
        private boolean finished;
        /** When the last frame went to the caller ({@link System#nanoTime()}). */
        private volatile long lastSent = System.nanoTime();

        Relay(StreamObserver<ExecServerFrame> out) {
            this.out = out;
        }

        @Override
        public void onNext(ExecClientFrame frame) {
            StreamObserver<ExecClientFrame> up = upstream;
            if (up != null) {
                up.onNext(frame);
                return;
            }
            SessionExec relay = exec.get();
            if (relay == null) {
                if (!frame.hasStart()) {
                    fail("the first frame must be an ExecStart");
                    return;
                }
                start(frame.getStart());
                return;
            }
            try {
                switch (frame.getKindCase()) {
                    case STDIN -> relay.stdin(frame.getStdin().toByteArray(), false);
                    case STDIN_CLOSE -> relay.stdin(new byte[0], true);
                    case RESIZE -> relay.resize(checkedSize(frame.getResize().getColumns()),
                            checkedSize(frame.getResize().getRows()));
                    case SIGNAL -> relay.signal(frame.getSignal());
                    case OUTPUT_CREDIT -> grantClient(Integer.toUnsignedLong(frame.getOutputCredit()));
                    case START -> throw new GatewayException(GatewayException.Reason.INVALID, "ExecStart twice");
                    case KIND_NOT_SET -> throw new GatewayException(GatewayException.Reason.INVALID, "empty frame");
                }
            } catch (GatewayException e) {
                relay.terminate();
                fail(e.getMessage());
            }
        }

        private void start(ExecStart start) {
            SessionExec relay;
            if (!token.admits("Bearer " + start.getApiToken())) {
                // Nothing about the sandbox is looked up or revealed before the token checks out.
                fail("UNAUTHENTICATED: the exec stream needs the gateway's API token (the state directory's "
                        + ApiToken.FILE + ")");
                return;
            }
            try {
                relay = start.getForwardPort() != 0 ? forward(start) : exec(start);
                if (relay == null) {
                    // Relayed whole to the replica with the session.
                    return;
                }
            } catch (GatewayException e) {
                fail(e.reason().name() + ": " + e.getMessage());
                return;
            }
            long asked = Integer.toUnsignedLong(start.getOutputWindow());
            synchronized (this) {
                clientWindow = asked == 0 ? DEFAULT_CLIENT_OUTPUT_WINDOW : (int) Math.min(asked, MAX_CLIENT_OUTPUT_WINDOW);
                clientCredit = clientWindow;
            }
            exec.set(relay);
            send(ExecServerFrame.newBuilder().setStarted(ExecStarted.newBuilder()
                    .setStdinWindow(SessionExec.STDIN_WINDOW).setOutputWindow(clientWindow)
                    .setHeartbeatMillis((int) HEARTBEAT.toMillis())).build());
            Thread.ofVirtual().name("exec-relay-" + relay.execId).start(() -> pump(relay));
        }

        /** Relays the stream to the managing replica when the session is there and not here. */
        private boolean relayedElsewhere(SandboxRecord record, ExecStart start) {
            if (sessions.connected(record.id())) {
                return false;
            }
            Optional<String> managing = sessions.replicas().manager(record.id()).map(Replicas.Manager::apiUrl);
            managing.ifPresent(url -> relayTo(url, start));
            return managing.isPresent();
        }

        /** Sends the start frame on to the managing replica and every frame after it both ways. */
        private void relayTo(String url, ExecStart start) {
            Channel channel = channels.computeIfAbsent(url, u -> GrpcClient.builder().baseUri(u)
                    .tls(Tls.builder().enabled(false).build()).build().channel());
            StreamObserver<ExecServerFrame> down = new StreamObserver<>() {
                @Override
                public void onNext(ExecServerFrame frame) {
                    send(frame);
                }

                @Override
                public void onError(Throwable t) {
                    abort("UNAVAILABLE: the stream to the managing replica at " + url + " broke: " + t.getMessage());
                }

                @Override
                public void onCompleted() {
                    complete();
                }
            };
            StreamObserver<ExecClientFrame> up = SandboxExecGrpc.newStub(channel).exec(down);
            upstream = up;
            up.onNext(ExecClientFrame.newBuilder().setStart(start).build());
        }

        private SessionExec exec(ExecStart start) {
            if (start.getArgvCount() == 0) {
                throw new GatewayException(GatewayException.Reason.INVALID, "argv must not be empty");
            }
            SandboxRecord record = sandboxes.find(start.getSandbox());
            if (relayedElsewhere(record, start)) {
                return null;
            }
            RemoteExec.Builder exec = RemoteExec.newBuilder().addAllArgv(start.getArgvList())
                    .putAllEnvironment(sandboxes.execEnvironment(record, start.getEnvironmentMap()))
                    .setWorkingDirectory(start.getWorkingDirectory());
            if (start.hasTerminal()) {
                exec.setTerminal(RemoteTerminalSize.newBuilder()
                        .setColumns(checkedSize(start.getTerminal().getColumns()))
                        .setRows(checkedSize(start.getTerminal().getRows())));
            }
            return sessions.exec(record.id(), exec);
        }

        /** A port forward: nothing runs, the supervisor connects to the sandbox's own loopback port. */
        private SessionExec forward(ExecStart start) {
            int port = start.getForwardPort();
            if (port < 1 || port > MAX_PORT) {
                throw new GatewayException(GatewayException.Reason.INVALID, "forward port out of range 1.."
                        + MAX_PORT + ": " + Integer.toUnsignedString(port));
            }
            if (start.getArgvCount() > 0 || start.getEnvironmentCount() > 0 || !start.getWorkingDirectory().isEmpty()
                    || start.hasTerminal()) {
                throw new GatewayException(GatewayException.Reason.INVALID,
                        "a forward runs nothing: argv, environment, working directory and terminal must be empty");
            }
            SandboxRecord record = sandboxes.find(start.getSandbox());
            if (relayedElsewhere(record, start)) {
                return null;
            }
            return sessions.exec(record.id(), RemoteExec.newBuilder().setForwardPort(port));
        }

        /** Supervisor events to the caller, in order; output only within the caller's credit. */
        private void pump(SessionExec relay) {
            try {
                while (!isFinished()) {
                    Optional<RemoteExecEvent> next = relay.next(POLL);
                    if (next.isEmpty()) {
                        if (System.nanoTime() - lastSent >= HEARTBEAT.toNanos()) {
                            send(ExecServerFrame.newBuilder().setHeartbeat(true).build());
                        }
                        continue;
                    }
                    RemoteExecEvent e = next.get();
                    switch (e.getKindCase()) {
                        case STDOUT -> output(relay, e.getStdout(), true);
                        case STDERR -> output(relay, e.getStderr(), false);
                        case STDIN_CREDIT -> send(ExecServerFrame.newBuilder().setStdinCredit(e.getStdinCredit()).build());
                        case EXIT_CODE -> {
                            send(ExecServerFrame.newBuilder().setExitCode(e.getExitCode()).build());
                            complete();
                            return;
                        }
                        case ERROR -> {
                            fail(e.getError());
                            return;
                        }
                        case KIND_NOT_SET -> { }
                    }
                }
            } catch (InterruptedException e) {
                relay.terminate();
            } catch (RuntimeException e) {
                // The caller's stream refused a frame (it is gone), or relaying broke here: either
                // way the exec ends, and the caller's stream is ended now rather than left silent.
                relay.terminate();
                abort("INTERNAL: the exec's relay failed: " + e);
            } finally {
                relay.done();
            }
        }

        private void output(SessionExec relay, ByteString bytes, boolean stdout) throws InterruptedException {
            int at = 0;
            while (at < bytes.size()) {
                int n = awaitClientCredit(Math.min(MAX_OUTPUT_PIECE, bytes.size() - at));
                if (n < 0) {
                    return;
                }
                ByteString piece = bytes.substring(at, at + n);
                send(stdout ? ExecServerFrame.newBuilder().setStdout(piece).build()
                        : ExecServerFrame.newBuilder().setStderr(piece).build());
                at += n;
            }
            relay.grantOutput(bytes.size());
        }

        private synchronized int awaitClientCredit(int wanted) throws InterruptedException {
            while (!finished && clientCredit == 0) {
                wait();
            }
            if (finished) {
                return -1;
            }
            int n = (int) Math.min(wanted, clientCredit);
            clientCredit -= n;
            return n;
        }

        private synchronized void grantClient(long bytes) {
            clientCredit = Math.min(clientWindow, clientCredit + bytes);
            notifyAll();
        }

        private synchronized boolean isFinished() {
            return finished;
        }

        /** @return whether this call finished the stream (false if it already was) */
        private synchronized boolean finish() {
            boolean was = finished;
            finished = true;
            notifyAll();
            return !was;
        }

        private void send(ExecServerFrame frame) {
            synchronized (out) {
                if (!isFinished()) {
                    out.onNext(frame);
                    lastSent = System.nanoTime();
                }
            }
        }

        private void complete() {
            synchronized (out) {
                if (finish()) {
                    out.onCompleted();
                }
            }
        }

        private void fail(String reason) {
            synchronized (out) {
                if (!isFinished()) {
                    out.onNext(ExecServerFrame.newBuilder().setError(reason).build());
                }
                if (finish()) {
                    out.onCompleted();
                }
            }
        }

        /** Ends the caller's stream with an error, whether or not the stream still takes frames. */
        private void abort(String reason) {
            try {
                fail(reason);
            } catch (RuntimeException e) {
                finish();
            }
        }

        private void gone() {
            finish();
            SessionExec relay = exec.get();
            if (relay != null) {
                relay.terminate();
            }
        }

        @Override
        public void onError(Throwable t) {
            StreamObserver<ExecClientFrame> up = upstream;
            if (up != null) {
                finish();
                up.onError(t);
                return;
            }
            gone();
        }

        @Override
        public void onCompleted() {
            StreamObserver<ExecClientFrame> up = upstream;
            if (up != null) {
                // The managing replica ends the exec as it would for a caller of its own.
                up.onCompleted();
                return;
            }
            // The caller stopped talking before the exit: it can grant no more credit, so the exec ends.
            if (!isFinished()) {
                gone();
                synchronized (out) {
                    try {
                        out.onCompleted();
                    } catch (RuntimeException ignored) {
                        // Already closed.
                    }
                }
            }
        }
    }

    private static int checkedSize(int cells) {
        if (cells < 1 || cells > 0xffff) {
            throw new GatewayException(GatewayException.Reason.INVALID, "terminal size out of range: " + cells);
        }
        return cells;
    }
}
