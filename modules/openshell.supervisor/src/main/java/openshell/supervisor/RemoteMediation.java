package openshell.supervisor;

import com.google.protobuf.ByteString;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import openshell.isolation.BackendException;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.ByteChannel;
import openshell.isolation.DenyReason;
import openshell.isolation.Executable;
import openshell.isolation.IdentityResolution;
import openshell.isolation.NetworkMediationSource;
import openshell.isolation.PendingDnsQuery;
import openshell.isolation.PendingTcpOpen;
import openshell.isolation.SocketIdentity;
import openshell.isolation.TcpDestination;
import openshell.protocol.CreditedStream;
import openshell.protocol.ProtocolException;
import openshell.protocol.wire.DnsAnswer;
import openshell.protocol.wire.DnsQuery;
import openshell.protocol.wire.ExecutableFile;
import openshell.protocol.wire.Identity;
import openshell.protocol.wire.PendingConnection;
import openshell.protocol.wire.PendingConnectionsRequest;
import openshell.protocol.wire.RelayDecision;
import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;

/**
 * The runtime's mediation as the supervisor sees it: pending TCP opens arrive on the
 * PendingConnections stream and each is decided on its own Relay stream (the first message is
 * the decision); DNS queries arrive on the Dns stream and are answered on it. With a descriptor
 * lane ({@link #useLane}), opens arrive and are denied or handed off on the lane instead, and only
 * an allow relayed over the link opens a Relay stream. Anything that cannot be queued or decided
 * is denied, never let through.
 */
final class RemoteMediation implements NetworkMediationSource, LaneSource {
    /** Pending opens and DNS queries queued for the supervisor's accept loops, each. */
    static final int MAX_QUEUED = 256;
    /** Pause before a mediation stream that ended while the link is up is taken again. */
    static final Duration REOPEN_DELAY = Duration.ofMillis(250);
    /** Reopens in a row (of either stream) without a message in between before the supervisor gives up. */
    static final int MAX_REOPENS = 8;
    private static final System.Logger LOGGER = System.getLogger(RemoteMediation.class.getName());
    /** Largest relay chunk sent in one message: the credited-stream bound. */
    static final int MAX_CHUNK_BYTES = CreditedStream.MAX_CHUNK_BYTES;
    /**
     * How long a relay that ended gracefully (every byte and the half_close sent) waits for the
     * workload to close its side before the stream is cut.
     */
    static final Duration RELAY_LINGER = Duration.ofSeconds(10);
    private static final int EACCES = 13;
    private static final int EAGAIN = 11;
    private static final int ETIMEDOUT = 110;
    private static final int ECANCELED = 125;

    private final RemoteCalls calls;
    private final BlockingQueue<RemoteOpen> opens = new ArrayBlockingQueue<>(MAX_QUEUED);
    private final BlockingQueue<PendingDnsQuery> queries = new ArrayBlockingQueue<>(MAX_QUEUED);
    private final AtomicBoolean open = new AtomicBoolean(true);
    private final java.util.concurrent.atomic.AtomicInteger reopens = new java.util.concurrent.atomic.AtomicInteger();
    private final AtomicReference<ClientCallStreamObserver<?>> announcements = new AtomicReference<>();
    private final AtomicReference<StreamObserver<DnsAnswer>> answers = new AtomicReference<>();
    /** Set once the PendingConnections stream was first taken (by {@link #useLane} or the first accept). */
    private final AtomicBoolean announcing = new AtomicBoolean();
    /** The lane key the PendingConnections request carries; empty without a lane. */
    private volatile byte[] laneKey = new byte[0];
    private volatile Optional<LaneSource.Arrivals> arrivals = Optional.empty();

    /** Takes the Dns stream now, and the PendingConnections stream at {@link #useLane} or the first accept. */
    RemoteMediation(RemoteCalls calls) {
        this.calls = calls;
        answer();
    }

    /**
     * Opens the descriptor lane for this mediation's announcements and takes the
     * PendingConnections stream with its key, so the runtime announces connects on the lane.
     *
     * @throws SupervisorException when announcements already started without the lane
     */
    @Override
    public void useLane(HandoffListener lane, MediationMetrics metrics, Optional<LaneSource.Arrivals> arrivals) {
        if (announcing.get()) {
            throw new SupervisorException("the descriptor lane must be offered before announcements start");
        }
        this.arrivals = arrivals;
        laneKey = lane.openLane(new HandoffListener.LaneHandler() {
            @Override
            public void announced(PendingConnection announced, HandoffListener.LaneReply reply) {
                calls.link().heard();
                metrics.laneAnnouncement();
                laneAnnounced(announced, reply);
            }

            @Override
            public void query(DnsQuery query, HandoffListener.LaneReply reply) {
                calls.link().heard();
                metrics.laneQuery();
                laneQuery(query, reply);
            }
        });
        startAnnouncing();
    }

    /** Takes the PendingConnections stream, once (without a lane unless {@link #useLane} came first). */
    void startAnnouncing() {
        if (announcing.compareAndSet(false, true)) {
            announce();
        }
    }

    /** A DNS query asked on the lane: queued like one from the stream, answered back on the lane. */
    private void laneQuery(DnsQuery query, HandoffListener.LaneReply reply) {
        reopens.set(0);
        RemoteDnsQuery pending = new RemoteDnsQuery(query, answer -> {
            if (!openshell.protocol.DescriptorLane.fits(openshell.protocol.DescriptorLane.Kind.ANSWER, answer.getSerializedSize())) {
                // Too large for a frame: the runtime takes an answer from the Dns stream as well.
                answerOnStream(answer);
                return;
            }
            try {
                reply.answer(answer);
            } catch (SupervisorException e) {
                throw new BackendException(BackendException.Kind.UNAVAILABLE, e.getMessage(), e);
            }
        });
        Optional<LaneSource.Arrivals> direct = arrivals;
        if (open.get() && direct.isPresent()) {
            direct.get().dns(pending);
        } else if (!open.get() || !queries.offer(pending)) {
            pending.refuse(DenyReason.EXHAUSTED);
        }
    }

    private void answerOnStream(DnsAnswer answer) {
        StreamObserver<DnsAnswer> stream = answers.get();
        if (stream == null) {
            throw new BackendException(BackendException.Kind.UNAVAILABLE, "the DNS stream is not open");
        }
        synchronized (stream) {
            stream.onNext(answer);
        }
    }

    /** A connect announced on the lane: queued like one from the stream, decided back on the lane. */
    private void laneAnnounced(PendingConnection announced, HandoffListener.LaneReply reply) {
        reopens.set(0);
        RemoteOpen pending;
        try {
            pending = new RemoteOpen(announced, reply);
        } catch (BackendException e) {
            reply.decide(RelayDecision.newBuilder().setConnectionId(announced.getConnectionId()).setAllow(false)
                    .setDenyErrno(EACCES).build());
            return;
        }
        Optional<LaneSource.Arrivals> direct = arrivals;
        if (open.get() && direct.isPresent()) {
            direct.get().tcp(pending);
        } else if (!open.get() || !opens.offer(pending)) {
            pending.deny(DenyReason.EXHAUSTED);
        }
    }

    /** Takes the PendingConnections stream; {@link #reopen} takes it again if it ends while the link is up. */
    private void announce() {
        calls.async().pendingConnections(PendingConnectionsRequest.newBuilder().setLaneKey(ByteString.copyFrom(laneKey)).build(),
                new io.grpc.stub.ClientResponseObserver<PendingConnectionsRequest, PendingConnection>() {
                    @Override
                    public void beforeStart(ClientCallStreamObserver<PendingConnectionsRequest> requestStream) {
                        announcements.set(requestStream);
                    }

                    @Override
                    public void onNext(PendingConnection announced) {
                        reopens.set(0);
                        RemoteOpen pending = new RemoteOpen(announced);
                        if (!open.get() || !opens.offer(pending)) {
                            pending.deny(DenyReason.EXHAUSTED);
                        }
                    }

                    @Override
                    public void onError(Throwable t) {
                        reopen("PendingConnections", t, RemoteMediation.this::announce);
                    }

                    @Override
                    public void onCompleted() {
                        reopen("PendingConnections", null, RemoteMediation.this::announce);
                    }
                });
    }

    /** Opens the Dns stream; {@link #reopen} opens it again if it ends while the link is up. */
    private void answer() {
        // A query is answered on the stream it came on, never on a later one.
        AtomicReference<StreamObserver<DnsAnswer>> stream = new AtomicReference<>();
        stream.set(calls.async().dns(new StreamObserver<>() {
            @Override
            public void onNext(DnsQuery query) {
                reopens.set(0);
                RemoteDnsQuery pending = new RemoteDnsQuery(query, answer -> {
                    StreamObserver<DnsAnswer> s = stream.get();
                    if (s == null) {
                        throw new BackendException(BackendException.Kind.UNAVAILABLE, "the DNS stream is not open yet");
                    }
                    synchronized (s) {
                        s.onNext(answer);
                    }
                });
                if (!open.get() || !queries.offer(pending)) {
                    pending.refuse(DenyReason.EXHAUSTED);
                }
            }

            @Override
            public void onError(Throwable t) {
                reopen("Dns", t, RemoteMediation.this::answer);
            }

            @Override
            public void onCompleted() {
                reopen("Dns", null, RemoteMediation.this::answer);
            }
        }));
        answers.set(stream.get());
    }

    /**
     * A mediation stream ended though neither side closed the mediation: Helidon 4.1.7's HTTP/2
     * server fails a stream whose outbound window waited longer than its flow-control timeout, and
     * the runtime then stops egress (held connects ECANCELED, relays closed) until a supervisor
     * takes the streams again. While the link is up, take them again after {@link #REOPEN_DELAY}
     * instead of letting the runtime's supervision-loss grace end the workload. A refusal (the
     * runtime says no: another supervisor, a link not attached) is final, and so are
     * {@link #MAX_REOPENS} reopens in a row that bring no message.
     */
    private void reopen(String stream, Throwable failure, Runnable again) {
        if (!open.get() || !calls.link().isOpen()) {
            return;
        }
        io.grpc.Status.Code code = failure == null ? io.grpc.Status.Code.OK : io.grpc.Status.fromThrowable(failure).getCode();
        if (code == io.grpc.Status.Code.FAILED_PRECONDITION || code == io.grpc.Status.Code.PERMISSION_DENIED
                || code == io.grpc.Status.Code.UNAUTHENTICATED || reopens.incrementAndGet() > MAX_REOPENS) {
            LOGGER.log(System.Logger.Level.WARNING, "the runtime's " + stream + " stream ended for good ("
                    + (failure == null ? "completed" : failure) + "): the runtime's supervision-loss grace applies");
            // As before reopening existed: mediation is no longer live.
            open.set(false);
            return;
        }
        LOGGER.log(System.Logger.Level.WARNING, "the runtime's " + stream + " stream ended ("
                + (failure == null ? "completed" : failure) + ") while the link is up; taking it again in "
                + REOPEN_DELAY.toMillis() + " ms");
        Thread.ofVirtual().name("reopen-" + stream).start(() -> {
            try {
                Thread.sleep(REOPEN_DELAY);
            } catch (InterruptedException e) {
                return;
            }
            if (open.get() && calls.link().isOpen()) {
                again.run();
            }
        });
    }

    /**
     * Takes the next announced open and starts opening the Relay stream that will carry its
     * decision (allow and deny alike), so the stream's set-up on both ends of the link runs while
     * the caller decides and dials upstream instead of after it. An open is taken only by a caller
     * that decides it, so every stream opened here carries a decision.
     */
    @Override
    public Optional<PendingTcpOpen> acceptTcp(Duration timeout) {
        startAnnouncing();
        Optional<RemoteOpen> next = take(opens, timeout);
        next.ifPresent(RemoteOpen::openRelayEarly);
        return next.map(PendingTcpOpen.class::cast);
    }

    @Override
    public Optional<PendingDnsQuery> acceptDns(Duration timeout) {
        return take(queries, timeout);
    }

    private <T> Optional<T> take(BlockingQueue<T> queue, Duration timeout) {
        T next = queue.poll();
        if (next != null) {
            return Optional.of(next);
        }
        if (!open.get() && !calls.link().isOpen()) {
            throw new BackendException(BackendException.Kind.UNAVAILABLE, "the mediation streams of the runtime are closed");
        }
        try {
            return Optional.ofNullable(queue.poll(timeout.toNanos(), TimeUnit.NANOSECONDS));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Optional.empty();
        }
    }

    boolean live() {
        return open.get() && calls.link().isOpen();
    }

    /** @return announced opens not taken yet (for tests) */
    int queuedOpens() {
        return opens.size();
    }

    @Override
    public void close() {
        if (open.compareAndSet(true, false)) {
            ClientCallStreamObserver<?> announcing = announcements.get();
            if (announcing != null) {
                announcing.cancel("mediation closed", null);
            }
            StreamObserver<DnsAnswer> answering = answers.get();
            if (answering != null) {
                synchronized (answering) {
                    answering.onCompleted();
                }
            }
        }
        List<RemoteOpen> left = new ArrayList<>();
        opens.drainTo(left);
        left.forEach(o -> {
            try {
                o.deny(DenyReason.MEDIATION_UNAVAILABLE);
            } catch (BackendException e) {
                // Its lane is gone: the runtime fails what it announced there closed itself.
            }
        });
        List<PendingDnsQuery> leftQueries = new ArrayList<>();
        queries.drainTo(leftQueries);
        leftQueries.forEach(q -> q.refuse(DenyReason.MEDIATION_UNAVAILABLE));
    }

    /**
     * Opens the Relay stream for an announced connection or a port forward: its first message is
     * the allowing decision for that id; then bytes flow under message credits.
     *
     * @param calls        the link
     * @param connectionId the runtime's id of the connection
     * @return the supervisor's end of the relay
     */
    static ByteChannel claim(RemoteCalls calls, String connectionId) {
        return openRelay(calls, connectionId).allow();
    }

    /**
     * Opens a Relay stream for a connection id without deciding anything yet: the runtime's end
     * waits for the first message, the decision.
     */
    static RelayStream openRelay(RemoteCalls calls, String connectionId) {
        InboundBytes input = new InboundBytes();
        CreditedStream<RelayDown, RelayUp> relay = CreditedStream.create(CreditedStream.Kind.SUPERVISOR_RELAY,
                new StreamObserver<>() {
                    @Override
                    public void onNext(RelayDown down) {
                        switch (down.getKindCase()) {
                        case DATA -> input.deliver(down.getData().toByteArray());
                        case HALF_CLOSE -> input.end();
                        default -> {
                            // nothing else is defined
                        }
                        }
                    }

                    @Override
                    public void onError(Throwable t) {
                        input.fail("relay failed: " + t.getMessage());
                    }

                    @Override
                    public void onCompleted() {
                        input.end();
                    }
                }, Thread.ofVirtual().name("relay-" + connectionId).factory());
        relay.connect(calls.async().relay(relay.inbound()));
        return new RelayStream(connectionId, relay, input);
    }

    /** An opened Relay stream whose first message, the decision, is not sent yet. */
    record RelayStream(String connectionId, CreditedStream<RelayDown, RelayUp> relay, InboundBytes input) {
        /** Sends the allowing decision; the bytes then flow under message credits. */
        ByteChannel allow() {
            try {
                relay.send(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder()
                        .setConnectionId(connectionId).setAllow(true)).build());
            } catch (ProtocolException e) {
                relay.fail(io.grpc.Status.CANCELLED.withDescription("the decision could not be sent"));
                throw new BackendException(BackendException.Kind.UNAVAILABLE, "the relay stream failed: " + e.getMessage(), e);
            }
            return new RelayBytes(relay, input);
        }

        /**
         * Sends the allowing decision with a handoff and ends the upload: no bytes cross this
         * stream; the runtime passes the socket over the descriptor lane and ends the stream.
         *
         * @return completes when the runtime ended the stream, exceptionally when it failed it
         */
        java.util.concurrent.CompletableFuture<Void> handOff() {
            try {
                relay.send(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder()
                        .setConnectionId(connectionId).setAllow(true).setHandoff(true)).build());
                relay.complete();
            } catch (ProtocolException e) {
                relay.fail(io.grpc.Status.CANCELLED.withDescription("the decision could not be sent"));
                throw new BackendException(BackendException.Kind.UNAVAILABLE, "the relay stream failed: " + e.getMessage(), e);
            }
            java.util.concurrent.CompletableFuture<Void> ended = new java.util.concurrent.CompletableFuture<>();
            Thread.ofVirtual().name("handoff-" + connectionId).start(() -> {
                try {
                    while (input.read() >= 0) {
                        // nothing is sent on a handed-off stream; its end is what counts
                    }
                    ended.complete(null);
                } catch (java.io.IOException e) {
                    ended.completeExceptionally(e);
                }
            });
            return ended;
        }

        /** Sends the denying decision and ends the upload; the runtime ends the stream. */
        void deny(int errno) {
            try {
                relay.send(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder()
                        .setConnectionId(connectionId).setAllow(false).setDenyErrno(errno)).build());
                relay.complete();
            } catch (ProtocolException e) {
                relay.fail(io.grpc.Status.CANCELLED.withDescription("the decision could not be sent"));
                throw new BackendException(BackendException.Kind.UNAVAILABLE, "the relay stream failed: " + e.getMessage(), e);
            }
        }
    }

    static IdentityResolution identity(boolean present, Identity identity, String unresolved) {
        if (!present) {
            return new IdentityResolution.Unresolved(unresolved.isBlank() ? "the runtime sent no identity" : unresolved);
        }
        try {
            List<Executable> ancestors = identity.getAncestorsList().stream().map(RemoteMediation::executable).toList();
            return new IdentityResolution.Resolved(new BinaryIdentity(executable(identity.getExecutable()), ancestors,
                    identity.getCmdlineList()));
        } catch (BackendException e) {
            // A malformed identity from the runtime authorizes nothing.
            return new IdentityResolution.Unresolved("malformed identity from the runtime: " + e.getMessage());
        }
    }

    private static Executable executable(ExecutableFile file) {
        return file.getSha256().isEmpty() ? Executable.of(file.getPath()) : Executable.of(file.getPath(), file.getSha256());
    }

    static int errno(DenyReason reason) {
        return switch (reason) {
            case POLICY, IDENTITY_UNRESOLVED -> EACCES;
            case EXHAUSTED -> EAGAIN;
            case MEDIATION_UNAVAILABLE -> ECANCELED;
            case TIMEOUT -> ETIMEDOUT;
        };
    }

    /**
     * One announced connect, decided once: on its own relay stream, or, when it came on the lane,
     * denied or handed off on the lane (only an allow relayed over the link opens a stream).
     */
    private final class RemoteOpen implements PendingTcpOpen, HandoffCapable {
        private final PendingConnection announced;
        /** The lane it came on; null when it came on the stream. */
        private final HandoffListener.LaneReply lane;
        private final TcpDestination destination;
        private final IdentityResolution identity;
        private final SocketIdentity socket;
        private final AtomicBoolean decided = new AtomicBoolean();
        /** Set once the Relay stream for the decision is being opened (early, or by the decision itself). */
        private final AtomicBoolean relayOpening = new AtomicBoolean();
        private final java.util.concurrent.CompletableFuture<RelayStream> relay = new java.util.concurrent.CompletableFuture<>();

        RemoteOpen(PendingConnection announced) {
            this(announced, null);
        }

        RemoteOpen(PendingConnection announced, HandoffListener.LaneReply lane) {
            this.announced = announced;
            this.lane = lane;
            this.destination = new TcpDestination(address(announced), announced.getDestinationPort());
            this.identity = RemoteMediation.identity(announced.hasIdentity(), announced.getIdentity(), announced.getUnresolvedReason());
            this.socket = new SocketIdentity(announced.getSocketInode());
        }

        private static InetAddress address(PendingConnection announced) {
            try {
                return InetAddress.getByAddress(announced.getDestinationAddress().toByteArray());
            } catch (UnknownHostException e) {
                throw new BackendException(BackendException.Kind.INVALID, "the runtime announced a malformed address", e);
            }
        }

        @Override
        public TcpDestination destination() {
            return destination;
        }

        @Override
        public IdentityResolution identity() {
            return identity;
        }

        @Override
        public SocketIdentity socket() {
            return socket;
        }

        /** Starts opening the decision's Relay stream on its own thread; the decision waits for it. */
        void openRelayEarly() {
            if (lane == null && relayOpening.compareAndSet(false, true)) {
                Thread.ofVirtual().name("relay-open-" + announced.getConnectionId()).start(this::openRelayNow);
            }
        }

        private void openRelayNow() {
            try {
                relay.complete(openRelay(calls, announced.getConnectionId()));
            } catch (RuntimeException | Error e) {
                relay.completeExceptionally(e);
            }
        }

        /** The decision's stream: the one opened early, or one opened now. */
        private RelayStream relayStream() {
            if (relayOpening.compareAndSet(false, true)) {
                openRelayNow();
            }
            try {
                return relay.join();
            } catch (java.util.concurrent.CompletionException e) {
                throw new BackendException(BackendException.Kind.UNAVAILABLE, "the relay stream could not be opened: "
                        + e.getCause(), e.getCause());
            }
        }

        private void decideOnce() {
            if (!decided.compareAndSet(false, true)) {
                throw new BackendException(BackendException.Kind.INVALID, "connection " + announced.getConnectionId() + " is already decided");
            }
        }

        @Override
        public ByteChannel allow() {
            if (identity instanceof IdentityResolution.Unresolved unresolved) {
                // Only deniable (the contract): the refused allow is the decision, and it denies.
                deny(DenyReason.IDENTITY_UNRESOLVED);
                throw new BackendException(BackendException.Kind.DENIED, "connection " + announced.getConnectionId()
                        + " has no resolved identity (" + unresolved.reason() + "); it can only be denied");
            }
            decideOnce();
            return relayStream().allow();
        }

        @Override
        public Optional<byte[]> handoffToken() {
            return announced.getHandoffToken().isEmpty() ? Optional.empty()
                    : Optional.of(announced.getHandoffToken().toByteArray());
        }

        @Override
        public java.util.concurrent.CompletableFuture<Void> allowHandoff() {
            if (identity instanceof IdentityResolution.Unresolved unresolved) {
                deny(DenyReason.IDENTITY_UNRESOLVED);
                throw new BackendException(BackendException.Kind.DENIED, "connection " + announced.getConnectionId()
                        + " has no resolved identity (" + unresolved.reason() + "); it can only be denied");
            }
            if (handoffToken().isEmpty()) {
                throw new BackendException(BackendException.Kind.INVALID, "connection " + announced.getConnectionId()
                        + " was announced without a handoff token");
            }
            decideOnce();
            if (lane != null) {
                decideOnLane(RelayDecision.newBuilder().setConnectionId(announced.getConnectionId()).setAllow(true)
                        .setHandoff(true).build());
                // A failed hand-off comes as the lane's FAILED frame, which ends the socket's wait.
                return new java.util.concurrent.CompletableFuture<>();
            }
            return relayStream().handOff();
        }

        private void decideOnLane(RelayDecision decision) {
            try {
                lane.decide(decision);
            } catch (SupervisorException e) {
                throw new BackendException(BackendException.Kind.UNAVAILABLE, e.getMessage(), e);
            }
        }

        @Override
        public void deny(DenyReason reason) {
            decideOnce();
            if (lane != null) {
                // If the lane is gone the runtime fails every connect it announced there closed.
                decideOnLane(RelayDecision.newBuilder().setConnectionId(announced.getConnectionId()).setAllow(false)
                        .setDenyErrno(errno(reason)).build());
                return;
            }
            if (!relayOpening.compareAndSet(false, true)) {
                // Taken by a decider: its stream is open (or opening) and carries the denial.
                relayStream().deny(errno(reason));
                return;
            }
            // Never taken (refused at arrival, or drained at close): a plain stream carries the denial.
            StreamObserver<RelayUp> up = calls.async().relay(new StreamObserver<>() {
                @Override
                public void onNext(RelayDown down) {
                }

                @Override
                public void onError(Throwable t) {
                }

                @Override
                public void onCompleted() {
                }
            });
            up.onNext(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder()
                    .setConnectionId(announced.getConnectionId()).setAllow(false).setDenyErrno(errno(reason))).build());
            up.onCompleted();
        }
    }

    /**
     * The supervisor's side of an allowed relay: bytes go out as credited messages (the writer
     * waits while {@link CreditedStream#MAX_IN_FLIGHT} are unacknowledged); closing the output
     * sends half_close and keeps the stream open for the other direction.
     *
     * <p>Closing the channel after its output was closed ends the stream gracefully: the upload
     * is completed behind every byte and the half_close already queued, so the runtime writes
     * them all to the workload's socket before the workload reads its end of stream (a cancel
     * could overtake them: gRPC drops what it has not yet written when a call is cancelled, and
     * a client reading a response up to the connection's end got nothing or a cut body). What
     * the workload still sends is then read and dropped, and a workload that keeps its side
     * open past {@link #RELAY_LINGER} is cut. Closing without that half_close (an error, a
     * revoked rule) cancels at once.
     */
    private static final class RelayBytes implements ByteChannel {
        private final CreditedStream<RelayDown, RelayUp> relay;
        private final InboundBytes input;
        private final AtomicBoolean outputClosed = new AtomicBoolean();
        private final AtomicBoolean closed = new AtomicBoolean();
        private volatile boolean halfCloseSent;
        private final OutputStream output;

        RelayBytes(CreditedStream<RelayDown, RelayUp> relay, InboundBytes input) {
            this.relay = relay;
            this.input = input;
            this.output = new OutputStream() {
                @Override
                public void write(int b) throws IOException {
                    write(new byte[] {(byte) b}, 0, 1);
                }

                @Override
                public void write(byte[] b, int off, int len) throws IOException {
                    if (outputClosed.get()) {
                        throw new IOException("relay output closed");
                    }
                    for (int at = off; at < off + len; at += MAX_CHUNK_BYTES) {
                        int n = Math.min(MAX_CHUNK_BYTES, off + len - at);
                        send(RelayUp.newBuilder().setData(ByteString.copyFrom(b, at, n)).build());
                    }
                }

                @Override
                public void close() throws IOException {
                    if (outputClosed.compareAndSet(false, true)) {
                        send(RelayUp.newBuilder().setHalfClose(true).build());
                        halfCloseSent = true;
                    }
                }
            };
        }

        private void send(RelayUp message) throws IOException {
            try {
                relay.send(message);
            } catch (ProtocolException e) {
                throw new IOException("relay closed: " + e.getMessage(), e);
            }
        }

        @Override
        public InputStream input() {
            return input;
        }

        @Override
        public OutputStream output() {
            return output;
        }

        @Override
        public void close() {
            if (closed.compareAndSet(false, true)) {
                boolean graceful = outputClosed.getAndSet(true) && halfCloseSent;
                input.discard();
                if (relay.isEnded()) {
                    return;
                }
                if (!graceful) {
                    relay.fail(io.grpc.Status.CANCELLED.withDescription("relay closed by the supervisor"));
                    return;
                }
                relay.complete();
                java.util.concurrent.CompletableFuture.delayedExecutor(RELAY_LINGER.toMillis(), TimeUnit.MILLISECONDS)
                        .execute(() -> {
                            if (!relay.isEnded()) {
                                relay.fail(io.grpc.Status.CANCELLED.withDescription(
                                        "the workload kept its side open " + RELAY_LINGER.toSeconds() + " s after the relay ended"));
                            }
                        });
            }
        }
    }

    /** One DNS query, answered once on the Dns stream or the lane it came on. */
    private static final class RemoteDnsQuery implements PendingDnsQuery {
        private final DnsQuery query;
        private final java.util.function.Consumer<DnsAnswer> answers;
        private final IdentityResolution identity;
        private final AtomicBoolean answered = new AtomicBoolean();

        /**
         * @param answers sends the answer where the query came from (for the stream, looked up at
         *                answer time: the first query can arrive before the call that opened it returned)
         */
        RemoteDnsQuery(DnsQuery query, java.util.function.Consumer<DnsAnswer> answers) {
            this.query = query;
            this.answers = answers;
            this.identity = RemoteMediation.identity(query.hasIdentity(), query.getIdentity(), query.getUnresolvedReason());
        }

        @Override
        public byte[] query() {
            return query.getMessage().toByteArray();
        }

        @Override
        public IdentityResolution identity() {
            return identity;
        }

        private void send(DnsAnswer answer) {
            if (!answered.compareAndSet(false, true)) {
                throw new BackendException(BackendException.Kind.INVALID, "DNS query " + query.getQueryId() + " is already answered");
            }
            answers.accept(answer);
        }

        @Override
        public void answer(byte[] response) {
            if (response.length > MAX_MESSAGE_BYTES) {
                throw new BackendException(BackendException.Kind.INVALID, "DNS answer larger than " + MAX_MESSAGE_BYTES + " bytes");
            }
            send(DnsAnswer.newBuilder().setQueryId(query.getQueryId()).setMessage(ByteString.copyFrom(response)).build());
        }

        @Override
        public void refuse(DenyReason reason) {
            send(DnsAnswer.newBuilder().setQueryId(query.getQueryId()).setError("refused")
                    .setDenyReason(reason.name()).build());
        }
    }
}
