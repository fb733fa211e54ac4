package openshell.supervisor;

import java.net.URI;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

import com.google.protobuf.ByteString;
import io.grpc.Channel;
import io.grpc.stub.StreamObserver;
import openshell.protocol.GatewayConnection;
import openshell.protocol.TokenPair;
import openshell.protocol.wire.GatewayMessage;
import openshell.protocol.wire.GatewaySessionGrpc;
import openshell.protocol.wire.LogLines;
import openshell.protocol.wire.PolicyOutcome;
import openshell.protocol.wire.RemoteExec;
import openshell.protocol.wire.RemoteExecControl;
import openshell.protocol.wire.RemoteExecEvent;
import openshell.protocol.wire.RemoteExecInput;
import openshell.protocol.wire.SessionConfig;
import openshell.protocol.wire.SessionHello;
import openshell.protocol.wire.SupervisorMessage;
import openshell.protocol.wire.TokenAck;
import openshell.protocol.wire.TokenRefresh;

/**
 * The supervisor's one outbound session to its gateway ({@code GatewaySession.Open}): hello with
 * the gateway-audience token of the current epoch, then whatever the gateway sends: the recorded
 * policy, policy revisions (answered LOADED/FAILED), token refreshes (handed on, then
 * acknowledged), exec and port-forward relays (flow-controlled by credit, see {@link GatewayExec}); and log lines
 * upward. When the stream ends it reconnects with the newest token after {@link #RECONNECT_DELAY},
 * until {@link #close()}; execs of a lost stream are terminated, because their caller is gone. The gateway refreshes the
 * pair right after every hello, so a token is spent once it opened a session.
 */
final class GatewaySession implements AutoCloseable {
    /** Wait before reconnecting after the stream ended. */
    static final Duration RECONNECT_DELAY = Duration.ofSeconds(2);
    /**
     * How often an idle session writes an empty log message: a gateway host that vanished
     * without closing the connection (power loss, a dropped route) is only noticed by a write
     * failing, which ends the call and lets this session reconnect.
     */
    static final Duration LIVENESS_INTERVAL = Duration.ofSeconds(5);
    /** Execs and forwards the gateway may run at once through this session; further ones get an error event. */
    static final int MAX_EXECS = 64;
    /**
     * Largest chunk of exec output per message: one message stays inside one 16 KiB HTTP/2 DATA
     * frame with room for its framing (Helidon 4.1.7's gRPC client cannot parse a message that
     * spans frames; its server can, but no hop should depend on which end it is).
     */
    static final int MAX_OUTPUT_CHUNK = 8 * 1024;
    /**
     * Lines of the agent's log kept while no session is open (before the first one, or while
     * reconnecting), as many as the gateway keeps of a sandbox's log; beyond it the oldest go,
     * and a line says how many.
     */
    static final int MAX_PENDING_LOG_LINES = 1000;
    /** Kept lines per log message when the session opens (the agent's follower sends at most as many at once). */
    static final int PENDING_LOG_LINES_PER_MESSAGE = 100;
    /** How often {@link #awaitExecsEnded} looks again. */
    static final Duration EXECS_ENDED_POLL = Duration.ofMillis(10);

    private final Supplier<Connection> channels;
    private final String sandboxId;
    private final long generation;
    private final GatewaySessionHandler handler;
    private final AtomicReference<TokenPair> tokens;
    private final AtomicLong policyGeneration = new AtomicLong();
    private final Map<String, GatewayExec> execs = new ConcurrentHashMap<>();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Thread loop;
    private volatile StreamObserver<SupervisorMessage> out;
    private volatile CompletableFuture<Void> opened = new CompletableFuture<>();
    // Guarded by this.
    private final ArrayDeque<String> pendingLog = new ArrayDeque<>();
    private long pendingLogDropped;

    private GatewaySession(Supplier<Connection> channels, String sandboxId, long generation, TokenPair first,
                           long policyGeneration, GatewaySessionHandler handler) {
        this.channels = channels;
        this.sandboxId = sandboxId;
        this.generation = generation;
        this.handler = handler;
        this.tokens = new AtomicReference<>(first);
        this.policyGeneration.set(policyGeneration);
        this.loop = Thread.ofVirtual().name("gateway-session-" + sandboxId).unstarted(this::run);
    }

    /**
     * Opens the session and keeps it open.
     *
     * @param channels         a fresh connection to the gateway per session attempt
     * @param sandboxId        this sandbox
     * @param generation       this launch's runtime generation
     * @param first            the launch's first token pair (from the supervisor bundle)
     * @param policyGeneration the policy generation enforced now
     * @param handler          what the gateway's requests do
     * @return the session
     */
    static GatewaySession open(Supplier<Connection> channels, String sandboxId, long generation, TokenPair first,
                               long policyGeneration, GatewaySessionHandler handler) {
        GatewaySession s = new GatewaySession(channels, sandboxId, generation, first, policyGeneration, handler);
        s.loop.start();
        return s;
    }

    /**
     * Connections to the gateway's session endpoint (the {@code gatewayEndpoint} of the supervisor
     * bundle): {@link GatewayConnection}, whose calls reassemble messages split across frames.
     * {@code http} means HTTP/2 without TLS (prior knowledge), for a gateway on loopback;
     * {@code https} uses the JVM's trust store.
     *
     * @param endpoint the gateway's URL
     * @return a supplier of a fresh connection per session attempt
     */
    static Supplier<Connection> channels(String endpoint) {
        URI uri = URI.create(endpoint);
        return () -> {
            GatewayConnection c = GatewayConnection.open(uri);
            return new Connection() {
                @Override
                public Channel channel() {
                    return c.channel();
                }

                @Override
                public void close() {
                    c.close();
                }
            };
        };
    }

    /** One connection to the gateway, closed when its session attempt ends. */
    interface Connection extends AutoCloseable {
        /** @return its channel */
        Channel channel();

        @Override
        void close();
    }

    /** @return completes when the gateway accepted the current connection (its config arrived) */
    CompletableFuture<Void> opened() {
        return opened;
    }

    /** @return the newest token pair */
    TokenPair tokens() {
        return tokens.get();
    }

    /**
     * Sends log lines to the gateway. While no session is open they are kept (at most
     * {@link #MAX_PENDING_LOG_LINES}) and sent, in order, once one is: the agent's first lines come
     * before the first session has opened.
     */
    void log(List<String> lines) {
        synchronized (this) {
            if (out == null || !opened.isDone()) {
                for (String line : lines) {
                    if (pendingLog.size() == MAX_PENDING_LOG_LINES) {
                        pendingLog.removeFirst();
                        pendingLogDropped++;
                    }
                    pendingLog.addLast(line);
                }
                return;
            }
            send(SupervisorMessage.newBuilder().setLogs(LogLines.newBuilder().addAllLines(lines)).build());
        }
    }

    /** Sends the lines kept while no session was open; the caller holds this. */
    private void sendPendingLog() {
        if (pendingLogDropped > 0) {
            pendingLog.addFirst("[openshell] " + pendingLogDropped + " earlier lines of the agent's output were dropped"
                    + " while no gateway session was open");
            pendingLogDropped = 0;
        }
        while (!pendingLog.isEmpty()) {
            List<String> batch = new ArrayList<>();
            while (!pendingLog.isEmpty() && batch.size() < PENDING_LOG_LINES_PER_MESSAGE) {
                batch.add(pendingLog.removeFirst());
            }
            send(SupervisorMessage.newBuilder().setLogs(LogLines.newBuilder().addAllLines(batch)).build());
        }
    }

    private void run() {
        while (!closed.get()) {
            CompletableFuture<Void> ended = new CompletableFuture<>();
            Connection connection = null;
            try {
                connection = channels.get();
                StreamObserver<SupervisorMessage> stream = GatewaySessionGrpc.newStub(connection.channel())
                        .open(new Inbound(ended));
                synchronized (this) {
                    out = stream;
                }
                send(SupervisorMessage.newBuilder().setHello(SessionHello.newBuilder()
                        .setGatewayToken(tokens.get().gatewayToken()).setSandboxId(sandboxId)
                        .setRuntimeGeneration(generation).setPolicyGeneration(policyGeneration.get())).build());
                awaitEnd(ended);
            } catch (RuntimeException e) {
                // Cannot reach the gateway now; try again after the delay.
            }
            synchronized (this) {
                out = null;
            }
            if (connection != null) {
                connection.close();
            }
            execs.values().forEach(GatewayExec::terminate);
            execs.clear();
            if (opened.isDone()) {
                opened = new CompletableFuture<>();
            }
            if (!closed.get()) {
                try {
                    Thread.sleep(RECONNECT_DELAY);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }
    }

    /** Waits for the stream to end, writing an empty log message each idle {@link #LIVENESS_INTERVAL}. */
    private void awaitEnd(CompletableFuture<Void> ended) {
        while (!ended.isDone() && !closed.get()) {
            try {
                ended.get(LIVENESS_INTERVAL.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
            } catch (java.util.concurrent.TimeoutException idle) {
                send(SupervisorMessage.newBuilder().setLogs(LogLines.getDefaultInstance()).build());
            } catch (InterruptedException e) {
                // close() interrupts: the loop ends with the session.
                Thread.currentThread().interrupt();
                return;
            } catch (java.util.concurrent.ExecutionException e) {
                return;
            }
        }
    }

    private void send(SupervisorMessage message) {
        synchronized (this) {
            if (out == null) {
                return;
            }
            try {
                out.onNext(message);
            } catch (RuntimeException e) {
                // The stream is failing; the inbound side sees the end and the loop reconnects.
            }
        }
    }

    private final class Inbound implements StreamObserver<GatewayMessage> {
        private final CompletableFuture<Void> ended;

        Inbound(CompletableFuture<Void> ended) {
            this.ended = ended;
        }

        @Override
        public void onNext(GatewayMessage m) {
            switch (m.getKindCase()) {
                case CONFIG -> config(m.getConfig());
                case POLICY -> {
                    GatewaySessionHandler.PolicyVerdict v = apply(m.getPolicy().getGeneration(),
                            m.getPolicy().getDocument().toByteArray());
                    send(SupervisorMessage.newBuilder().setPolicyOutcome(PolicyOutcome.newBuilder()
                            .setRevisionId(m.getPolicy().getRevisionId()).setGeneration(m.getPolicy().getGeneration())
                            .setResult(v.loaded() ? PolicyOutcome.Result.LOADED : PolicyOutcome.Result.FAILED)
                            .setMessage(v.message())).build());
                }
                case TOKENS -> refresh(m.getTokens());
                case EXEC -> exec(m.getExec());
                case EXEC_INPUT -> input(m.getExecInput());
                case EXEC_CONTROL -> control(m.getExecControl());
                case KIND_NOT_SET -> { }
            }
        }

        private void config(SessionConfig config) {
            if (config.getPolicyGeneration() != policyGeneration.get()) {
                // The gateway's record is the truth: a revision it recorded while we were away.
                apply(config.getPolicyGeneration(), config.getPolicyDocument().toByteArray());
            }
            synchronized (GatewaySession.this) {
                opened.complete(null);
                sendPendingLog();
            }
        }

        private GatewaySessionHandler.PolicyVerdict apply(long generation, byte[] document) {
            GatewaySessionHandler.PolicyVerdict v;
            try {
                v = handler.applyPolicy(generation, document);
            } catch (RuntimeException e) {
                v = new GatewaySessionHandler.PolicyVerdict(false, "the supervisor failed to apply it: "
                        + e.getClass().getSimpleName());
            }
            if (v.loaded()) {
                policyGeneration.set(generation);
            }
            return v;
        }

        private void refresh(TokenRefresh r) {
            TokenPair next = new TokenPair(r.getGatewayToken(), r.getSandboxToken(), r.getCredentialEpoch(),
                    Instant.ofEpochSecond(r.getExpiresAtEpochSecond()));
            if (next.credentialEpoch() <= tokens.get().credentialEpoch()) {
                return;
            }
            handler.tokensRefreshed(next);
            tokens.set(next);
            send(SupervisorMessage.newBuilder().setTokenAck(TokenAck.newBuilder()
                    .setCredentialEpoch(next.credentialEpoch())).build());
        }

        private void exec(RemoteExec e) {
            String id = e.getExecId();
            GatewayExec relay;
            try {
                relay = new GatewayExec(id, e.getOutputWindow(), e.getStdinWindow());
            } catch (IllegalArgumentException refused) {
                send(event(RemoteExecEvent.newBuilder().setExecId(id).setError(refused.getMessage())));
                return;
            }
            GatewaySessionHandler.ExecOutput output = new RelayedOutput(relay);
            if (execs.size() >= MAX_EXECS) {
                output.error("the supervisor already runs " + MAX_EXECS + " execs for the gateway");
                return;
            }
            execs.put(id, relay);
            if (e.getForwardPort() != 0) {
                forward(relay, e, output);
                return;
            }
            GatewaySessionHandler.ExecCommand command = new GatewaySessionHandler.ExecCommand(e.getArgvList(),
                    e.getEnvironmentMap(), e.getWorkingDirectory().isEmpty() ? "/" : e.getWorkingDirectory(),
                    e.hasTerminal(), e.getTerminal().getColumns(), e.getTerminal().getRows());
            // Starting takes a runtime round trip: never on the session's inbound thread.
            Thread.ofVirtual().name("gateway-exec-" + id).start(() -> {
                try {
                    relay.started(handler.exec(command, output));
                } catch (RuntimeException failure) {
                    output.error("exec failed: " + failure.getMessage());
                    return;
                }
                try {
                    relay.pumpStdin(n -> send(event(RemoteExecEvent.newBuilder().setExecId(id).setStdinCredit(n))));
                } catch (InterruptedException interrupted) {
                    relay.terminate();
                }
            });
        }

        /** A port forward: the same relay with a connection instead of a process at its end. */
        private void forward(GatewayExec relay, RemoteExec e, GatewaySessionHandler.ExecOutput output) {
            int port = e.getForwardPort();
            if (port < 1 || port > 65535 || e.getArgvCount() > 0 || e.hasTerminal()) {
                output.error("a forward names a port 1..65535 and nothing to run, not port "
                        + Integer.toUnsignedString(port) + (e.getArgvCount() > 0 ? " with argv" : ""));
                return;
            }
            Thread.ofVirtual().name("gateway-forward-" + relay.id()).start(() -> {
                try {
                    relay.started(handler.forward(port, output));
                } catch (RuntimeException failure) {
                    output.error("forward to port " + port + " failed: " + failure.getMessage());
                    return;
                }
                try {
                    relay.pumpStdin(n -> send(event(RemoteExecEvent.newBuilder().setExecId(relay.id()).setStdinCredit(n))));
                } catch (InterruptedException interrupted) {
                    relay.terminate();
                }
            });
        }

        private void input(RemoteExecInput in) {
            GatewayExec relay = execs.get(in.getExecId());
            if (relay == null) {
                return;
            }
            if (!relay.offerStdin(in.getData().toByteArray(), in.getClose())) {
                execs.remove(relay.id());
                relay.terminate();
                send(event(RemoteExecEvent.newBuilder().setExecId(relay.id())
                        .setError("the gateway sent more stdin than the window of " + relay.stdinWindow() + " bytes")));
            }
        }

        private void control(RemoteExecControl c) {
            GatewayExec relay = execs.get(c.getExecId());
            if (relay == null) {
                return;
            }
            switch (c.getKindCase()) {
                case OUTPUT_CREDIT -> relay.grantOutput(Integer.toUnsignedLong(c.getOutputCredit()));
                case RESIZE -> relay.resize(c.getResize().getColumns(), c.getResize().getRows());
                case SIGNAL -> relay.signal(c.getSignal());
                case TERMINATE -> {
                    execs.remove(relay.id());
                    relay.terminate();
                }
                case KIND_NOT_SET -> { }
            }
        }

        @Override
        public void onError(Throwable t) {
            ended.complete(null);
        }

        @Override
        public void onCompleted() {
            ended.complete(null);
        }
    }

    /** An exec's output as session events, each chunk sent only with output credit. */
    private final class RelayedOutput implements GatewaySessionHandler.ExecOutput {
        private final GatewayExec relay;

        RelayedOutput(GatewayExec relay) {
            this.relay = relay;
        }

        @Override
        public void stdout(byte[] bytes) {
            chunks(bytes, true);
        }

        @Override
        public void stderr(byte[] bytes) {
            chunks(bytes, false);
        }

        private void chunks(byte[] bytes, boolean stdout) {
            int at = 0;
            while (at < bytes.length) {
                int n;
                try {
                    n = relay.awaitOutputCredit(Math.min(MAX_OUTPUT_CHUNK, bytes.length - at));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
                if (n < 0) {
                    return;
                }
                ByteString chunk = ByteString.copyFrom(bytes, at, n);
                RemoteExecEvent.Builder ev = RemoteExecEvent.newBuilder().setExecId(relay.id());
                send(event(stdout ? ev.setStdout(chunk) : ev.setStderr(chunk)));
                at += n;
            }
        }

        @Override
        public void exit(int code) {
            relay.close();
            if (execs.remove(relay.id(), relay)) {
                send(event(RemoteExecEvent.newBuilder().setExecId(relay.id()).setExitCode(code)));
            }
        }

        @Override
        public void error(String reason) {
            relay.close();
            execs.remove(relay.id(), relay);
            send(event(RemoteExecEvent.newBuilder().setExecId(relay.id()).setError(reason)));
        }
    }

    private static SupervisorMessage event(RemoteExecEvent.Builder e) {
        return SupervisorMessage.newBuilder().setExecEvent(e).build();
    }

    /**
     * Waits, at most {@code wait}, until no exec or forward of the gateway's runs through this
     * session. When the agent ends, the runtime may report an exec that ended with it after the
     * agent's own end: closing the session first would turn that exec's exit into "session ended"
     * for the user who ran it.
     *
     * @param wait the longest wait
     * @return whether none runs
     * @throws InterruptedException if interrupted while waiting
     */
    boolean awaitExecsEnded(Duration wait) throws InterruptedException {
        long deadline = System.nanoTime() + wait.toNanos();
        while (!execs.isEmpty()) {
            if (System.nanoTime() - deadline >= 0) {
                return false;
            }
            Thread.sleep(EXECS_ENDED_POLL);
        }
        return true;
    }

    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            synchronized (this) {
                if (out != null) {
                    try {
                        out.onCompleted();
                    } catch (RuntimeException ignored) {
                        // Already gone.
                    }
                }
            }
            loop.interrupt();
        }
    }
}
