package openshell.sandbox;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.Optional;
import openshell.linux.LinuxException;
import openshell.linux.OwnedFd;
import openshell.linux.UnixSockets;

/**
 * The descriptor channel beside a Unix link: the runtime passes the loopback end of an allowed
 * opaque connection to the supervisor, which relays it natively (splice, one thread for all
 * connections) instead of as gRPC messages through both JVMs. Each socket travels under a random
 * token that only the announcement (over the authenticated link) named, so nothing else that
 * reaches the socket file can claim a connection. Who is at the other end is proven as for the
 * link ({@code SandboxMain.SUPERVISOR_PEER}): the socket file is in the sandbox's 0700 run
 * directory, beside the link's; the peer's uid proves nothing (the supervisor's is unmapped).
 *
 * <p>The channel is optional: without it (a TCP link, an older supervisor, a path too long for a
 * socket address) every connection is relayed over its gRPC stream as before.
 */
final class HandoffChannel implements AutoCloseable {
    /** Bytes of a handoff token. */
    static final int TOKEN_BYTES = 16;
    /** Appended to the link's socket path to name the descriptor channel's socket. */
    static final String SUFFIX = ".fds";

    private static final SecureRandom RANDOM = new SecureRandom();
    private static final System.Logger LOGGER = System.getLogger(HandoffChannel.class.getName());

    private final OwnedFd socket;

    private HandoffChannel(OwnedFd socket) {
        this.socket = socket;
    }

    /** @return the descriptor channel's socket file for a link socket file */
    static Path pathFor(Path linkSocket) {
        return Path.of(linkSocket + SUFFIX);
    }

    /**
     * Connects to the supervisor's descriptor channel.
     *
     * @param linkSocket the link's socket file
     * @return the channel, or empty when there is none (the connections are relayed over gRPC)
     */
    static Optional<HandoffChannel> connect(Path linkSocket) {
        Path path = pathFor(linkSocket);
        if (path.toString().getBytes(StandardCharsets.UTF_8).length > UnixSockets.MAX_PATH_BYTES) {
            LOGGER.log(System.Logger.Level.INFO, "no descriptor channel: its path is too long for a socket address");
            return Optional.empty();
        }
        OwnedFd socket;
        try {
            socket = UnixSockets.connectSeqpacket(path);
        } catch (LinuxException e) {
            LOGGER.log(System.Logger.Level.INFO, "no descriptor channel (" + e.getMessage() + "): relays use the link");
            return Optional.empty();
        }
        return Optional.of(new HandoffChannel(socket));
    }

    /** @return a fresh random token */
    static byte[] newToken() {
        byte[] token = new byte[TOKEN_BYTES];
        RANDOM.nextBytes(token);
        return token;
    }

    /**
     * Passes a socket under its token.
     *
     * @param token the connection's token
     * @param fd    the socket (ours stays open; the caller closes it)
     * @throws LinuxException when the channel is gone
     */
    synchronized void send(byte[] token, int fd) {
        UnixSockets.send(socket.value(), token, fd);
    }

    @Override
    public void close() {
        socket.close();
    }
}
