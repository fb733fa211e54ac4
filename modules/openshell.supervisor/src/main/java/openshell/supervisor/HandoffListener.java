package openshell.supervisor;

import com.google.protobuf.InvalidProtocolBufferException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import openshell.linux.LinuxException;
import openshell.linux.OwnedFd;
import openshell.linux.UnixSockets;
import openshell.protocol.DescriptorLane;
import openshell.protocol.ProtocolException;
import openshell.protocol.wire.DnsAnswer;
import openshell.protocol.wire.DnsQuery;
import openshell.protocol.wire.PendingConnection;
import openshell.protocol.wire.RelayDecision;

/**
 * The supervisor's end of the descriptor lane beside a Unix link (the runtime's end is
 * {@code openshell.sandbox.HandoffChannel}; the framing is {@link DescriptorLane}): the runtime
 * passes the loopback end of each allowed opaque connection here, and the supervisor relays it
 * natively ({@code SpliceRelay}) instead of as gRPC messages through both JVMs. Once the mediation
 * opened the lane ({@link #openLane}) and a connection presented its key, connects are announced
 * and decided here too, without a gRPC stream per connect.
 *
 * <p>A socket is taken only under a token the runtime announced for that connection, and only
 * while a decision waits for it ({@link #expect}); a socket under any other token is closed (it
 * may be one whose decision stopped waiting). An announcement counts only after the lane key
 * (sent over the authenticated link) on the same connection. Anything malformed (a frame of an
 * unknown kind or the wrong size, a wrong key, an announcement before the key, descriptors where
 * none belong, a peer of another uid) closes the connection it came on, and the runtime then fails
 * its connects closed. At most {@link #MAX_CONNECTIONS} peers are connected.
 */
final class HandoffListener implements AutoCloseable {
    /** Descriptor-lane connections held at once; more are closed at accept. */
    static final int MAX_CONNECTIONS = 2;
    /** Decisions waiting for their socket at once; more are refused (the connection then uses the link). */
    static final int MAX_EXPECTED = SandboxMediation.MAX_ACTIVE_RELAYS;
    /** How often the accept loop looks at whether the listener closed (the longest it outlives {@link #close}). */
    static final Duration POLL = Duration.ofSeconds(1);
    /**
     * Longest wait of a connection's reader between looks at whether the listener closed.
     * {@link #close} shuts every connection down, which wakes its reader at once: this only bounds
     * a missed wake-up, and keeps an idle supervisor from waking four times a second.
     */
    static final Duration READ_WAIT = Duration.ofSeconds(5);

    private static final System.Logger LOGGER = System.getLogger(HandoffListener.class.getName());

    /** Receives the connects and DNS queries of a keyed lane connection, on its reader thread (which must not block). */
    interface LaneHandler {
        /**
         * @param announced the announcement
         * @param reply     sends the decision back on the connection it came on
         */
        void announced(PendingConnection announced, LaneReply reply);

        /**
         * @param query the query
         * @param reply sends the answer back on the connection it came on
         */
        void query(DnsQuery query, LaneReply reply);
    }

    /** The way back to the lane connection an announcement came on. */
    interface LaneReply {
        /**
         * Sends a decision.
         *
         * @param decision the decision
         * @throws SupervisorException when the connection is gone (the runtime then fails the connect closed)
         */
        void decide(RelayDecision decision);

        /**
         * Sends a DNS answer.
         *
         * @param answer the answer
         * @throws SupervisorException when the connection is gone (the runtime then refuses the query)
         */
        void answer(DnsAnswer answer);
    }

    private record Lane(byte[] key, LaneHandler handler) {
    }

    /**
     * One accepted connection. Sends and shutdowns hold its guard shared, the close exclusively: a
     * descriptor number is never used after it was closed (and perhaps reused), while a shutdown
     * still ends a send blocked on a runtime that stopped reading.
     */
    private static final class Connection implements LaneReply {
        private final OwnedFd fd;
        private final java.util.concurrent.locks.ReadWriteLock guard = new java.util.concurrent.locks.ReentrantReadWriteLock();

        Connection(OwnedFd fd) {
            this.fd = fd;
        }

        @Override
        public void decide(RelayDecision decision) {
            send(new DescriptorLane.Frame(DescriptorLane.Kind.DECISION, decision.toByteArray()).encode());
        }

        @Override
        public void answer(DnsAnswer answer) {
            byte[] body = answer.toByteArray();
            if (!DescriptorLane.fits(DescriptorLane.Kind.ANSWER, body.length)) {
                throw new SupervisorException("a DNS answer of " + body.length + " bytes does not fit a lane frame");
            }
            send(new DescriptorLane.Frame(DescriptorLane.Kind.ANSWER, body).encode());
        }

        private void send(byte[] wire) {
            guard.readLock().lock();
            try {
                UnixSockets.send(fd.value(), wire);
            } catch (LinuxException e) {
                throw new SupervisorException("the decision could not be sent on the lane: " + e.getMessage(), e);
            } finally {
                guard.readLock().unlock();
            }
        }

        void shutdown() {
            guard.readLock().lock();
            try {
                if (fd.isOpen()) {
                    UnixSockets.shutdown(fd.value());
                }
            } catch (LinuxException e) {
                LOGGER.log(System.Logger.Level.DEBUG, "lane shutdown: " + e.getMessage());
            } finally {
                guard.readLock().unlock();
            }
        }

        void close() {
            shutdown();
            guard.writeLock().lock();
            try {
                fd.close();
            } finally {
                guard.writeLock().unlock();
            }
        }
    }

    private final Path path;
    private final OwnedFd listener;
    private final int peerUid;
    private final Map<String, CompletableFuture<OwnedFd>> expected = new ConcurrentHashMap<>();
    private final Set<Connection> connections = ConcurrentHashMap.newKeySet();
    private volatile Lane lane;
    private volatile boolean open = true;

    private HandoffListener(Path path, OwnedFd listener, int peerUid) {
        this.path = path;
        this.listener = listener;
        this.peerUid = peerUid;
    }

    /**
     * Listens beside a link socket.
     *
     * @param linkSocket the link's socket file
     * @param peerUid    the only uid a peer may have (the runtime's)
     * @return the listener, or empty when its path cannot be a socket address (relays then use the link)
     */
    static Optional<HandoffListener> listen(Path linkSocket, int peerUid) {
        Path path = DescriptorLane.pathFor(linkSocket);
        if (!DescriptorLane.addressable(path)) {
            LOGGER.log(System.Logger.Level.INFO, "no descriptor lane: " + path + " is too long for a socket address");
            return Optional.empty();
        }
        HandoffListener h = new HandoffListener(path, UnixSockets.listenSeqpacket(path), peerUid);
        Thread.ofPlatform().daemon().name("handoff-accept").start(h::acceptLoop);
        return Optional.of(h);
    }

    /** @return the socket file */
    Path path() {
        return path;
    }

    /**
     * Opens the lane for announcements: a connection that presents the returned key may announce
     * connects, which go to {@code handler}. Opened once.
     *
     * @param handler receives the announcements
     * @return the key, for the runtime only (it travels in the PendingConnections request)
     * @throws SupervisorException when the lane is already open
     */
    synchronized byte[] openLane(LaneHandler handler) {
        if (lane != null) {
            throw new SupervisorException("the descriptor lane is already open");
        }
        byte[] key = DescriptorLane.newKey();
        lane = new Lane(key.clone(), handler);
        return key;
    }

    /**
     * Registers a decision that waits for its socket.
     *
     * @param token the announced token
     * @return completed with the socket when it arrives; exceptionally when the runtime reports
     *         that it never will
     * @throws SupervisorException when the token is malformed, already expected, or too many wait
     */
    CompletableFuture<OwnedFd> expect(byte[] token) {
        if (token.length != DescriptorLane.TOKEN_BYTES) {
            throw new SupervisorException("a handoff token is " + DescriptorLane.TOKEN_BYTES + " bytes, not " + token.length);
        }
        if (expected.size() >= MAX_EXPECTED) {
            throw new SupervisorException(MAX_EXPECTED + " handoffs are already waiting");
        }
        CompletableFuture<OwnedFd> future = new CompletableFuture<>();
        if (expected.putIfAbsent(key(token), future) != null) {
            throw new SupervisorException("this handoff token is already expected");
        }
        return future;
    }

    /**
     * Stops waiting for a token; a socket that arrives for it later is closed.
     *
     * @param token the token
     */
    void forget(byte[] token) {
        CompletableFuture<OwnedFd> future = expected.remove(key(token));
        if (future != null) {
            future.cancel(false);
            if (!future.isCancelled()) {
                future.thenAccept(OwnedFd::close);
            }
        }
    }

    /** @return decisions waiting for their socket (for leak checks) */
    int waiting() {
        return expected.size();
    }

    private static String key(byte[] token) {
        return HexFormat.of().formatHex(token);
    }

    private void acceptLoop() {
        try {
            while (open) {
                Optional<OwnedFd> accepted = UnixSockets.accept(listener.value(), POLL);
                if (accepted.isEmpty()) {
                    continue;
                }
                OwnedFd fd = accepted.get();
                int uid = UnixSockets.peerCredentials(fd.value()).uid();
                if (uid != peerUid || connections.size() >= MAX_CONNECTIONS) {
                    LOGGER.log(System.Logger.Level.WARNING, "descriptor lane: refused a peer (uid " + uid
                            + (uid != peerUid ? ", not " + peerUid : ", " + MAX_CONNECTIONS + " connected") + ")");
                    fd.close();
                    continue;
                }
                Connection connection = new Connection(fd);
                connections.add(connection);
                Thread.ofPlatform().daemon().name("handoff-read").start(() -> readLoop(connection));
            }
        } catch (LinuxException e) {
            if (open) {
                LOGGER.log(System.Logger.Level.WARNING, "descriptor lane: accept failed: " + e.getMessage());
            }
        } finally {
            listener.close();
        }
    }

    private void readLoop(Connection connection) {
        boolean keyed = false;
        try {
            while (open) {
                Optional<UnixSockets.Message> next = UnixSockets.receive(connection.fd.value(), DescriptorLane.MAX_FRAME_BYTES, READ_WAIT);
                if (next.isEmpty()) {
                    continue;
                }
                UnixSockets.Message message = next.get();
                if (message.endOfStream()) {
                    return;
                }
                DescriptorLane.Frame frame;
                try {
                    frame = DescriptorLane.Frame.decode(message.data());
                } catch (ProtocolException e) {
                    malformed(message, e.getMessage());
                    return;
                }
                if (frame.kind() != DescriptorLane.Kind.SOCKET && !message.fds().isEmpty()) {
                    malformed(message, "descriptors with a " + frame.kind() + " frame");
                    return;
                }
                switch (frame.kind()) {
                case SOCKET -> {
                    if (message.fds().size() != 1) {
                        malformed(message, message.fds().size() + " descriptors with a socket frame");
                        return;
                    }
                    take(frame.body(), message.fds().get(0));
                }
                case FAILED -> {
                    CompletableFuture<OwnedFd> future = expected.remove(key(frame.body()));
                    if (future != null) {
                        future.completeExceptionally(new SupervisorException("the runtime could not hand the connection over"));
                    }
                }
                case HELLO -> {
                    Lane current = lane;
                    if (keyed || current == null || !DescriptorLane.keyMatches(current.key(), frame.body())) {
                        malformed(message, keyed ? "a second lane key" : "a lane key that is not the lane's");
                        return;
                    }
                    keyed = true;
                }
                case ANNOUNCE -> {
                    if (!deliver(message, frame.body(), keyed, PendingConnection.parser(), "an announcement",
                            announced -> lane.handler().announced(announced, connection))) {
                        return;
                    }
                }
                case QUERY -> {
                    if (!deliver(message, frame.body(), keyed, DnsQuery.parser(), "a DNS query",
                            query -> lane.handler().query(query, connection))) {
                        return;
                    }
                }
                case DECISION, ANSWER -> {
                    malformed(message, "a " + frame.kind() + " frame from the runtime");
                    return;
                }
                }
            }
        } catch (LinuxException e) {
            if (open) {
                LOGGER.log(System.Logger.Level.WARNING, "descriptor lane: read failed: " + e.getMessage());
            }
        } finally {
            connections.remove(connection);
            connection.close();
        }
    }

    /**
     * Hands a keyed connection's message to the lane's handler.
     *
     * @return false when it is malformed (before the key, or it does not parse): the connection closes
     */
    private static <M> boolean deliver(UnixSockets.Message message, byte[] body, boolean keyed,
                                       com.google.protobuf.Parser<M> parser, String what, java.util.function.Consumer<M> handler) {
        if (!keyed) {
            malformed(message, what + " before the lane key");
            return false;
        }
        M parsed;
        try {
            parsed = parser.parseFrom(body);
        } catch (InvalidProtocolBufferException e) {
            malformed(message, what + " that does not parse");
            return false;
        }
        try {
            handler.accept(parsed);
        } catch (RuntimeException e) {
            // Its reply could not go back: this connection is gone, and the runtime fails what it sent here closed.
            LOGGER.log(System.Logger.Level.WARNING, "descriptor lane: " + what + " could not be taken: " + e.getMessage());
        }
        return true;
    }

    private void take(byte[] token, OwnedFd socket) {
        CompletableFuture<OwnedFd> future = expected.remove(key(token));
        if (future == null || !future.complete(socket)) {
            // A decision that stopped waiting (its bound passed), or a token nobody announced.
            socket.close();
            LOGGER.log(System.Logger.Level.INFO, "descriptor lane: a socket for no waiting decision was closed");
        }
    }

    private static void malformed(UnixSockets.Message message, String what) {
        message.fds().forEach(OwnedFd::close);
        LOGGER.log(System.Logger.Level.WARNING, "descriptor lane: " + what + " (" + message.data().length + " bytes, "
                + message.fds().size() + " descriptors): closing the connection");
    }

    /** Stops taking sockets and announcements; each connection is shut down, and its reader closes it. */
    @Override
    public void close() {
        open = false;
        connections.forEach(Connection::shutdown);
        expected.values().forEach(f -> f.cancel(false));
        expected.clear();
        try {
            java.nio.file.Files.deleteIfExists(path);
        } catch (java.io.IOException e) {
            LOGGER.log(System.Logger.Level.DEBUG, "cannot remove " + path + ": " + e);
        }
    }
}
