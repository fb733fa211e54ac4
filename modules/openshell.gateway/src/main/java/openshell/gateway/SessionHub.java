package openshell.gateway;

import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import openshell.gateway.store.SandboxRecord;
import openshell.gateway.store.SandboxState;
import openshell.gateway.store.SandboxStore;
import openshell.isolation.SandboxId;
import openshell.protocol.ProtocolException;
import openshell.protocol.TokenAudience;
import openshell.protocol.TokenClaims;
import openshell.protocol.TokenGrant;
import openshell.protocol.TokenIssuer;
import openshell.protocol.TokenPair;
import openshell.protocol.TokenVerifier;
import openshell.protocol.wire.GatewayMessage;
import openshell.protocol.wire.GatewaySessionGrpc;
import openshell.protocol.wire.LogLines;
import openshell.protocol.wire.PolicyOutcome;
import openshell.protocol.wire.PolicyRevision;
import openshell.protocol.wire.RemoteExec;
import openshell.protocol.wire.RemoteExecEvent;
import openshell.protocol.wire.SessionConfig;
import openshell.protocol.wire.SessionHello;
import openshell.protocol.wire.SupervisorMessage;
import openshell.protocol.wire.TokenRefresh;

/**
 * The gateway's end of the supervisor sessions: each supervisor keeps one outbound
 * {@code GatewaySession.Open} stream, authenticated by its first message, a {@code SessionHello}
 * with the gateway-audience token of its launch. The token must verify (signature, issuer,
 * audience, sandbox, generation, expiry) and match the record: same runtime generation, same
 * session lineage, and a credential epoch no lower than the recorded one. Right after a hello the
 * gateway refreshes the pair with the next epoch, so the token that opened the session (and every
 * older one) can never open another; later refreshes run {@link #REFRESH_MARGIN} before expiry.
 * A newer session for the same sandbox replaces the older one.
 *
 * <p>Among replicas the session lives where the lease is ({@link Replicas}): a hello at a replica
 * that does not manage the sandbox is refused (the supervisor retries) after asking the managing
 * replica to hand the lease over, which it does at its next renewal unless it has a session of its
 * own; a token refresh is sent only under this replica's grant, checked right before it is sent;
 * and a replica that loses a lease ends that sandbox's session.
 */
final class SessionHub extends GatewaySessionGrpc.GatewaySessionImplBase {
    /** A stream that has not said hello by then is closed. */
    static final Duration HELLO_TIMEOUT = Duration.ofSeconds(10);
    /** How long a policy set waits for the supervisor's LOADED/FAILED. */
    static final Duration POLICY_TIMEOUT = Duration.ofSeconds(30);
    /** How long a token refresh waits for the supervisor's acknowledgement; then the session ends. */
    static final Duration ACK_TIMEOUT = Duration.ofSeconds(30);
    /** Lifetime of the tokens minted for a launch and each refresh. */
    static final Duration TOKEN_LIFETIME = Duration.ofMinutes(30);
    /** Tokens are refreshed this long before they expire. */
    static final Duration REFRESH_MARGIN = Duration.ofMinutes(10);
    /** Execs in flight per session; the next one is refused. */
    static final int MAX_EXECS_PER_SESSION = 64;
    /** The token holder's role. */
    static final String COMPONENT = "supervisor";

    private final SandboxStore store;
    private final TokenIssuer issuer;
    private final ScheduledExecutorService timers;
    private final Clock clock;
    private final Map<String, Session> live = new ConcurrentHashMap<>();
    private final SandboxLogs logs;
    private final LogWriter logWriter;
    private final Replicas replicas;

    SessionHub(SandboxStore store, TokenIssuer issuer, ScheduledExecutorService timers, Clock clock) {
        this(store, issuer, timers, clock, Replicas.solo(store.leases()));
    }

    SessionHub(SandboxStore store, TokenIssuer issuer, ScheduledExecutorService timers, Clock clock, Replicas replicas) {
        this.replicas = replicas;
        this.store = store;
        this.issuer = issuer;
        this.timers = timers;
        this.clock = clock;
        this.logs = new SandboxLogs(store, clock);
        this.logWriter = new LogWriter(logs);
    }

    @Override
    public StreamObserver<SupervisorMessage> open(StreamObserver<GatewayMessage> responses) {
        return new Session(responses);
    }

    /**
     * The first token pair of a launch.
     *
     * @param id         the sandbox
     * @param generation its runtime generation
     * @param lineage    the launch's session id
     * @return the pair at epoch 1
     */
    TokenPair firstTokens(SandboxId id, long generation, String lineage) {
        return issuer.mintPair(grant(id.value(), generation, lineage), 1);
    }

    /** @return this gateway's part among the replicas */
    Replicas replicas() {
        return replicas;
    }

    /** @return whether a supervisor session of this sandbox is open */
    boolean connected(SandboxId id) {
        return live.containsKey(id.value());
    }

    /**
     * Ends the sandbox's session (stop, delete, relaunch); its supervisor is being killed anyway.
     *
     * @param id the sandbox
     */
    void disconnect(SandboxId id) {
        disconnect(id, "the sandbox is being stopped");
    }

    /**
     * Ends the sandbox's session for a reason of the gateway's own, such as a supervisor the
     * driver sees gone: its stream may not report the dead connection for a long while.
     *
     * @param id     the sandbox
     * @param reason what the sandbox's log says
     */
    void disconnect(SandboxId id, String reason) {
        Optional.ofNullable(live.get(id.value())).ifPresent(s -> s.end(Status.CANCELLED, reason));
    }

    /** @return the kept log lines of a sandbox, oldest first (they outlive a gateway restart) */
    List<String> logs(SandboxId id) {
        return store.logs(id);
    }

    /**
     * Records one of the gateway's own events about a sandbox in its log.
     *
     * @param id    the sandbox
     * @param event what happened
     */
    void note(SandboxId id, String event) {
        logs.append(id, List.of(logs.gatewayLine(event)));
    }

    /**
     * Sends a validated policy generation without waiting.
     *
     * @return the supervisor's verdict; completes exceptionally (a {@link GatewayException}
     *         UNAVAILABLE) when the session ends first or after {@link #POLICY_TIMEOUT}
     * @throws GatewayException UNAVAILABLE without a session
     */
    CompletableFuture<PolicyOutcome> sendPolicy(SandboxId id, long generation, byte[] document) {
        Session s = session(id);
        String revision = UUID.randomUUID().toString();
        CompletableFuture<PolicyOutcome> outcome = new CompletableFuture<>();
        s.policies.put(revision, outcome);
        try {
            s.send(GatewayMessage.newBuilder().setPolicy(PolicyRevision.newBuilder().setRevisionId(revision)
                    .setGeneration(generation).setDocument(ByteString.copyFrom(document))).build());
        } catch (RuntimeException e) {
            s.policies.remove(revision);
            throw e;
        }
        return outcome.orTimeout(POLICY_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)
                .whenComplete((o, e) -> s.policies.remove(revision));
    }

    /** @return why a policy revision has no verdict, as the API reports it */
    static GatewayException unanswered(SandboxId id, Throwable cause) {
        Throwable c = cause instanceof java.util.concurrent.CompletionException ? cause.getCause() : cause;
        return c instanceof TimeoutException
                ? new GatewayException(GatewayException.Reason.UNAVAILABLE, "the supervisor of " + id
                        + " did not answer the policy revision within " + POLICY_TIMEOUT)
                : new GatewayException(GatewayException.Reason.UNAVAILABLE, "the session of " + id
                        + " ended before the policy revision was answered");
    }

    /**
     * Starts an exec in the sandbox through its supervisor, with the session hop's windows
     * ({@link SessionExec#OUTPUT_WINDOW}, {@link SessionExec#STDIN_WINDOW}).
     *
     * @param id   the sandbox
     * @param exec what to run (its id and windows are assigned here)
     * @return the relay its events arrive on and its stdin and controls go through
     * @throws GatewayException UNAVAILABLE without a session, EXHAUSTED at {@link #MAX_EXECS_PER_SESSION}
     */
    SessionExec exec(SandboxId id, RemoteExec.Builder exec) {
        Session s = session(id);
        String execId = UUID.randomUUID().toString();
        SessionExec relay = new SessionExec(execId, s::send);
        synchronized (s.execs) {
            if (s.execs.size() >= MAX_EXECS_PER_SESSION) {
                throw new GatewayException(GatewayException.Reason.EXHAUSTED, "sandbox " + id + " already runs "
                        + MAX_EXECS_PER_SESSION + " execs; wait for one to end");
            }
            s.execs.put(execId, relay);
        }
        relay.onDone(() -> s.execs.remove(execId));
        try {
            s.send(GatewayMessage.newBuilder().setExec(exec.setExecId(execId).setOutputWindow(SessionExec.OUTPUT_WINDOW)
                    .setStdinWindow(SessionExec.STDIN_WINDOW)).build());
        } catch (GatewayException e) {
            s.execs.remove(execId);
            throw e;
        }
        return relay;
    }

    /**
     * Refreshes the sandbox's token pair now (also done on a schedule).
     *
     * @return the epoch the supervisor acknowledged
     */
    long refresh(SandboxId id) {
        return session(id).refresh();
    }

    void close() {
        live.values().forEach(s -> s.end(Status.UNAVAILABLE, "the gateway is stopping"));
        logWriter.close();
    }

    private Session session(SandboxId id) {
        Session s = live.get(id.value());
        if (s == null) {
            Optional<Replicas.Manager> elsewhere = replicas.manager(id);
            if (elsewhere.isPresent()) {
                // The API relays to it first; this is a call that raced a change of manager.
                throw new GatewayException(GatewayException.Reason.UNAVAILABLE, "the supervisor of sandbox " + id
                        + " has its session with replica " + elsewhere.get().replica() + " at " + elsewhere.get().apiUrl()
                        + ", not this one; retry");
            }
            throw new GatewayException(GatewayException.Reason.UNAVAILABLE, "the supervisor of sandbox " + id
                    + " has no session with this gateway (is the sandbox running? openshell sandbox get " + id + ")");
        }
        return s;
    }

    private static TokenGrant grant(String id, long generation, String lineage) {
        return new TokenGrant(id, generation, lineage, COMPONENT, TOKEN_LIFETIME);
    }

    /** One supervisor's stream. Inbound messages arrive one at a time; sends are serialized. */
    private final class Session implements StreamObserver<SupervisorMessage> {
        private final StreamObserver<GatewayMessage> out;
        private final Map<String, CompletableFuture<PolicyOutcome>> policies = new ConcurrentHashMap<>();
        private final Map<String, SessionExec> execs = new ConcurrentHashMap<>();
        private final ScheduledFuture<?> helloTimer;
        private volatile CompletableFuture<Long> pendingAck = new CompletableFuture<>();
        private volatile ScheduledFuture<?> refreshTimer;
        private volatile String sandbox;
        private long generation;
        private String lineage;
        private boolean ended;

        Session(StreamObserver<GatewayMessage> out) {
            this.out = out;
            this.helloTimer = timers.schedule(() -> {
                if (sandbox == null) {
                    end(Status.DEADLINE_EXCEEDED, "no hello within " + HELLO_TIMEOUT);
                }
            }, HELLO_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        }

        @Override
        public void onNext(SupervisorMessage message) {
            if (sandbox == null) {
                if (!message.hasHello()) {
                    end(Status.UNAUTHENTICATED, "the first message must be a hello");
                    return;
                }
                hello(message.getHello());
                return;
            }
            switch (message.getKindCase()) {
                case POLICY_OUTCOME -> Optional.ofNullable(policies.get(message.getPolicyOutcome().getRevisionId()))
                        .ifPresent(f -> f.complete(message.getPolicyOutcome()));
                case TOKEN_ACK -> pendingAck.complete(message.getTokenAck().getCredentialEpoch());
                // Never the store on this thread: it also takes the exec events (see LogWriter).
                case LOGS -> logWriter.offer(new SandboxId(sandbox), message.getLogs().getLinesList());
                case EXEC_EVENT -> execEvent(message.getExecEvent());
                case HELLO -> end(Status.INVALID_ARGUMENT, "hello twice");
                case KIND_NOT_SET -> end(Status.INVALID_ARGUMENT, "empty message");
            }
        }

        private void hello(SessionHello hello) {
            TokenClaims claims;
            SandboxRecord record;
            try {
                SandboxId id = new SandboxId(hello.getSandboxId());
                claims = TokenVerifier.builder().key(issuer.verificationKey()).issuer(issuer.issuer())
                        .audience(TokenAudience.GATEWAY).sandboxId(id.value())
                        .runtimeGeneration(hello.getRuntimeGeneration()).component(COMPONENT).clock(clock).build()
                        .verify(hello.getGatewayToken());
                record = store.find(id).orElse(null);
            } catch (ProtocolException e) {
                end(Status.UNAUTHENTICATED, "token refused: " + e.refusal());
                return;
            } catch (RuntimeException e) {
                end(Status.UNAUTHENTICATED, "hello refused");
                return;
            }
            if (record == null || record.runtimeGeneration() != claims.runtimeGeneration()
                    || !record.sessionLineage().equals(claims.sessionLineage())) {
                refuse(record, "token refused: not the current launch of this sandbox");
                return;
            }
            if (claims.credentialEpoch() < record.credentialEpoch()) {
                refuse(record, "token refused: credential epoch " + claims.credentialEpoch() + " was superseded");
                return;
            }
            if (record.state() != SandboxState.RUNNING && record.state() != SandboxState.PROVISIONING) {
                end(Status.FAILED_PRECONDITION, "the sandbox is " + record.state());
                return;
            }
            if (replicas.manage(record.id()).isEmpty()) {
                // The session follows the lease: the managing replica hands it over at its next renewal.
                replicas.want(record.id());
                end(Status.UNAVAILABLE, "sandbox " + record.id() + " is managed by another replica"
                        + replicas.manager(record.id()).map(m -> " (" + m.replica() + ")").orElse("")
                        + "; it hands the lease to this one within " + Replicas.RENEW_PERIOD + ", retry");
                return;
            }
            if (claims.credentialEpoch() > record.credentialEpoch()) {
                record = store.raiseEpoch(record.id(), record.runtimeGeneration(), claims.credentialEpoch());
            }
            if (record.state() == SandboxState.PROVISIONING) {
                try {
                    record = store.update(record.withState(SandboxState.RUNNING));
                } catch (GatewayException e) {
                    record = store.find(record.id()).orElse(record);
                }
            }
            helloTimer.cancel(false);
            generation = record.runtimeGeneration();
            lineage = record.sessionLineage();
            sandbox = record.id().value();
            Session previous = live.put(sandbox, this);
            if (previous != null && previous != this) {
                previous.end(Status.ALREADY_EXISTS, "replaced by a newer session");
            }
            note(record.id(), "session opened at credential epoch " + claims.credentialEpoch() + " (runtime generation "
                    + generation + ")");
            send(GatewayMessage.newBuilder().setConfig(SessionConfig.newBuilder()
                    .setPolicyGeneration(record.policyGeneration())
                    .setPolicyDocument(ByteString.copyFromUtf8(record.policyDocument()))
                    .setCredentialEpoch(record.credentialEpoch())).build());
            // The token that opened this session must never open another: supersede it at once.
            refreshTimer = timers.schedule(this::scheduledRefresh, 0, TimeUnit.MILLISECONDS);
        }

        /**
         * Refuses a hello whose token this gateway did sign but that is no longer good: a leaked
         * or replayed credential, so the sandbox's log says so. (Tokens that do not verify are
         * refused without a log line: anyone could send those, and they must not push real lines out.)
         */
        private void refuse(SandboxRecord record, String reason) {
            if (record != null) {
                note(record.id(), "a session hello was refused (" + reason + "); the current session is unaffected");
            }
            end(Status.UNAUTHENTICATED, reason);
        }

        private void scheduledRefresh() {
            try {
                refresh();
            } catch (RuntimeException e) {
                end(Status.UNAVAILABLE, "token refresh failed: " + e.getMessage());
            }
        }

        synchronized long refresh() {
            SandboxRecord record = store.find(new SandboxId(sandbox)).orElseThrow(() ->
                    new GatewayException(GatewayException.Reason.NOT_FOUND, "sandbox " + sandbox + " is gone"));
            long next = record.credentialEpoch() + 1;
            Replicas.Grant lease = replicas.grant(record.id()).orElseThrow(() -> new GatewayException(
                    GatewayException.Reason.UNAVAILABLE, "replica " + replicas.id() + " no longer manages " + sandbox));
            TokenPair pair = issuer.mintPair(grant(sandbox, generation, lineage), next);
            // The fencing check right before the refresh goes out.
            replicas.check(lease);
            CompletableFuture<Long> ack = new CompletableFuture<>();
            pendingAck = ack;
            send(GatewayMessage.newBuilder().setTokens(TokenRefresh.newBuilder()
                    .setGatewayToken(pair.gatewayToken()).setSandboxToken(pair.sandboxToken())
                    .setCredentialEpoch(next).setExpiresAtEpochSecond(pair.expiresAt().getEpochSecond())).build());
            long acked;
            try {
                acked = ack.get(ACK_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new GatewayException(GatewayException.Reason.UNAVAILABLE, "interrupted");
            } catch (ExecutionException | TimeoutException e) {
                end(Status.DEADLINE_EXCEEDED, "token refresh not acknowledged");
                throw new GatewayException(GatewayException.Reason.UNAVAILABLE, "the supervisor of " + sandbox
                        + " did not acknowledge the token refresh");
            }
            if (acked != next) {
                end(Status.INVALID_ARGUMENT, "acknowledged epoch " + acked + " instead of " + next);
                throw new GatewayException(GatewayException.Reason.UNAVAILABLE, "wrong acknowledgement");
            }
            store.raiseEpoch(record.id(), generation, next);
            note(record.id(), "tokens refreshed to credential epoch " + next);
            Duration untilRefresh = Duration.between(clock.instant(), pair.expiresAt().minus(REFRESH_MARGIN));
            if (!ended) {
                refreshTimer = timers.schedule(this::scheduledRefresh, Math.max(0, untilRefresh.toMillis()),
                        TimeUnit.MILLISECONDS);
            }
            return next;
        }

        private void execEvent(RemoteExecEvent event) {
            SessionExec relay = execs.get(event.getExecId());
            if (relay == null) {
                return;
            }
            if (!relay.deliver(event) || event.getKindCase() == RemoteExecEvent.KindCase.EXIT_CODE
                    || event.getKindCase() == RemoteExecEvent.KindCase.ERROR) {
                execs.remove(event.getExecId());
            }
        }

        void send(GatewayMessage message) {
            synchronized (out) {
                if (ended) {
                    throw new GatewayException(GatewayException.Reason.UNAVAILABLE, "the session of " + sandbox
                            + " has ended");
                }
                out.onNext(message);
            }
        }

        void end(Status status, String reason) {
            synchronized (out) {
                if (ended) {
                    return;
                }
                ended = true;
                try {
                    out.onError(status.withDescription(reason).asRuntimeException());
                } catch (RuntimeException ignored) {
                    // The stream is already gone; there is nobody left to tell.
                }
            }
            cleanUp("session ended: " + reason);
        }

        private void cleanUp(String reason) {
            helloTimer.cancel(false);
            ScheduledFuture<?> timer = refreshTimer;
            if (timer != null) {
                timer.cancel(false);
            }
            if (sandbox != null) {
                live.remove(sandbox, this);
                note(new SandboxId(sandbox), reason);
            }
            pendingAck.completeExceptionally(new IllegalStateException(reason));
            policies.values().forEach(f -> f.completeExceptionally(new IllegalStateException(reason)));
            execs.values().forEach(r -> r.lose(reason));
            execs.clear();
        }

        @Override
        public void onError(Throwable t) {
            boolean first;
            synchronized (out) {
                first = !ended;
                ended = true;
            }
            if (first) {
                cleanUp("the supervisor's stream failed");
            }
        }

        @Override
        public void onCompleted() {
            end(Status.OK, "the supervisor closed its session");
        }
    }
}
