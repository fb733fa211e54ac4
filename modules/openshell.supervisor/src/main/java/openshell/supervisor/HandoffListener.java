package openshell.supervisor;

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

/**
 * The supervisor's end of the descriptor channel beside a Unix link (the runtime's end is
 * {@code openshell.sandbox.HandoffChannel}): the runtime passes the loopback end of each allowed
 * opaque connection here, and the supervisor relays it natively ({@code SpliceRelay}) instead of
 * as gRPC messages through both JVMs.
 *
 * <p>A socket is taken only under a token the runtime announced for that connection over the
 * authenticated link, and only while a decision waits for it ({@link #expect}); a socket under any
 * other token is closed (it may be one whose decision stopped waiting), and a malformed message
 * (not one token and one descriptor) or a peer of another uid closes the connection it came on.
 * At most {@link #MAX_CONNECTIONS} peers are connected.
 */
final class HandoffListener implements AutoCloseable {
    /** Appended to the link's socket path (the runtime derives the same name). */
    static final String SUFFIX = ".fds";
    /** Bytes of a token. */
    static final int TOKEN_BYTES = 16;
    /** Descriptor-channel connections held at once; more are closed at accept. */
    static final int MAX_CONNECTIONS = 2;
    /** Decisions waiting for their socket at once; more are refused (the connection then uses the link). */
    static final int MAX_EXPECTED = SandboxMediation.MAX_ACTIVE_RELAYS;
    /** How often the accept and read loops look at whether the listener closed. */
    static final Duration POLL = Duration.ofMillis(250);

    private static final System.Logger LOGGER = System.getLogger(HandoffListener.class.getName());

    private final Path path;
    private final OwnedFd listener;
    private final int peerUid;
    private final Map<String, CompletableFuture<OwnedFd>> expected = new ConcurrentHashMap<>();
    private final Set<OwnedFd> connections = ConcurrentHashMap.newKeySet();
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
        Path path = Path.of(linkSocket + SUFFIX);
        if (path.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8).length > UnixSockets.MAX_PATH_BYTES) {
            LOGGER.log(System.Logger.Level.INFO, "no descriptor channel: " + path + " is too long for a socket address");
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
     * Registers a decision that waits for its socket.
     *
     * @param token the announced token
     * @return completed with the socket when it arrives
     * @throws SupervisorException when the token is malformed, already expected, or too many wait
     */
    CompletableFuture<OwnedFd> expect(byte[] token) {
        if (token.length != TOKEN_BYTES) {
            throw new SupervisorException("a handoff token is " + TOKEN_BYTES + " bytes, not " + token.length);
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
                OwnedFd connection = accepted.get();
                int uid = UnixSockets.peerCredentials(connection.value()).uid();
                if (uid != peerUid || connections.size() >= MAX_CONNECTIONS) {
                    LOGGER.log(System.Logger.Level.WARNING, "descriptor channel: refused a peer (uid " + uid
                            + (uid != peerUid ? ", not " + peerUid : ", " + MAX_CONNECTIONS + " connected") + ")");
                    connection.close();
                    continue;
                }
                connections.add(connection);
                Thread.ofPlatform().daemon().name("handoff-read").start(() -> readLoop(connection));
            }
        } catch (LinuxException e) {
            if (open) {
                LOGGER.log(System.Logger.Level.WARNING, "descriptor channel: accept failed: " + e.getMessage());
            }
        } finally {
            listener.close();
        }
    }

    private void readLoop(OwnedFd connection) {
        try {
            while (open) {
                Optional<UnixSockets.Message> next = UnixSockets.receive(connection.value(), TOKEN_BYTES, POLL);
                if (next.isEmpty()) {
                    continue;
                }
                UnixSockets.Message message = next.get();
                if (message.endOfStream()) {
                    return;
                }
                if (message.data().length != TOKEN_BYTES || message.fds().size() != 1) {
                    message.fds().forEach(OwnedFd::close);
                    LOGGER.log(System.Logger.Level.WARNING, "descriptor channel: a malformed message ("
                            + message.data().length + " bytes, " + message.fds().size() + " descriptors): closing the channel");
                    return;
                }
                OwnedFd socket = message.fds().get(0);
                CompletableFuture<OwnedFd> future = expected.remove(key(message.data()));
                if (future == null || !future.complete(socket)) {
                    // A decision that stopped waiting (its bound passed), or a token nobody announced.
                    socket.close();
                    LOGGER.log(System.Logger.Level.INFO, "descriptor channel: a socket for no waiting decision was closed");
                }
            }
        } catch (LinuxException e) {
            if (open) {
                LOGGER.log(System.Logger.Level.WARNING, "descriptor channel: read failed: " + e.getMessage());
            }
        } finally {
            connections.remove(connection);
            connection.close();
        }
    }

    /** Stops taking sockets; the loops close their descriptors within {@link #POLL} (not here: a number closed under a poll could be reused). */
    @Override
    public void close() {
        open = false;
        expected.values().forEach(f -> f.cancel(false));
        expected.clear();
        try {
            java.nio.file.Files.deleteIfExists(path);
        } catch (java.io.IOException e) {
            LOGGER.log(System.Logger.Level.DEBUG, "cannot remove " + path + ": " + e);
        }
    }
}
