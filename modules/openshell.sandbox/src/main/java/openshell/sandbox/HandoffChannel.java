package openshell.sandbox;

import com.google.protobuf.InvalidProtocolBufferException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
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
 * The runtime's end of the descriptor lane beside a Unix link ({@link DescriptorLane}): it passes
 * the loopback end of an allowed opaque connection to the supervisor, which relays it natively
 * (splice, one thread for all connections) instead of as gRPC messages through both JVMs; and,
 * once keyed ({@link #key}), it announces connects and receives their decisions without a gRPC
 * stream per connect. Each socket travels under a random token that only the announcement named,
 * so nothing else that reaches the socket file can claim a connection. Who is at the other end
 * is proven as for the link ({@code SandboxMain.SUPERVISOR_PEER}): the socket file is in the
 * sandbox's 0700 run directory, beside the link's; the peer's uid proves nothing (the
 * supervisor's is unmapped).
 *
 * <p>The lane is optional: without it (a TCP link, an older supervisor, a path too long for a
 * socket address) every connection is announced and relayed over gRPC as before.
 */
final class HandoffChannel implements AutoCloseable {
    /**
     * Longest wait of the decision reader between looks at whether the lane closed. {@link #close}
     * shuts the socket down, which wakes it at once: this only bounds a missed wake-up, and keeps
     * an idle runtime from waking four times a second.
     */
    static final Duration POLL = Duration.ofSeconds(5);

    private static final System.Logger LOGGER = System.getLogger(HandoffChannel.class.getName());

    /** What a keyed lane delivers, on its reader thread (which must not block). */
    interface Receiver {
        /** @param decision a decision for a connect announced on the lane */
        void decision(RelayDecision decision);

        /** @param answer the answer to a DNS query asked on the lane */
        void answer(DnsAnswer answer);
    }

    private final OwnedFd socket;
    /**
     * Sends and shutdowns hold it shared, the close exclusively: a descriptor number is never used
     * after it was closed (and perhaps reused), while a shutdown still ends a blocked send.
     */
    private final java.util.concurrent.locks.ReadWriteLock guard = new java.util.concurrent.locks.ReentrantReadWriteLock();
    private volatile boolean open = true;
    private volatile boolean reading;

    private HandoffChannel(OwnedFd socket) {
        this.socket = socket;
    }

    /** @return the lane's socket file for a link socket file */
    static Path pathFor(Path linkSocket) {
        return DescriptorLane.pathFor(linkSocket);
    }

    /**
     * Connects to the supervisor's lane.
     *
     * @param linkSocket the link's socket file
     * @return the lane, or empty when there is none (the connections go over gRPC)
     */
    static Optional<HandoffChannel> connect(Path linkSocket) {
        Path path = pathFor(linkSocket);
        if (!DescriptorLane.addressable(path)) {
            LOGGER.log(System.Logger.Level.INFO, "no descriptor lane: its path is too long for a socket address");
            return Optional.empty();
        }
        OwnedFd socket;
        try {
            socket = UnixSockets.connectSeqpacket(path);
        } catch (LinuxException e) {
            LOGGER.log(System.Logger.Level.INFO, "no descriptor lane (" + e.getMessage() + "): relays use the link");
            return Optional.empty();
        }
        return Optional.of(new HandoffChannel(socket));
    }

    /** @return a fresh random token */
    static byte[] newToken() {
        return DescriptorLane.newToken();
    }

    /**
     * Presents the lane key (from the supervisor's PendingConnections request) and starts reading
     * decisions and answers, each handed to {@code receiver} on the reader thread. When the lane
     * ends or the supervisor sends anything but a well-formed decision or answer, {@code ended}
     * runs once (unless this end closed it) and nothing more is read.
     *
     * @param key      the lane key
     * @param receiver receives each decision and answer
     * @param ended    runs when the lane ended on its own
     * @throws LinuxException when the lane is gone
     */
    void key(byte[] key, Receiver receiver, Runnable ended) {
        if (reading) {
            throw new IllegalStateException("the lane is already keyed");
        }
        sendFrame(new DescriptorLane.Frame(DescriptorLane.Kind.HELLO, key));
        reading = true;
        Thread.ofPlatform().daemon().name("lane-read").start(() -> readLoop(receiver, ended));
    }

    /** @return whether the lane is keyed and reading decisions */
    boolean keyed() {
        return reading && open;
    }

    /**
     * Announces a connect on the lane.
     *
     * @param announced the announcement
     * @return false when it is too large for the lane (it then goes over the stream)
     * @throws LinuxException when the lane is gone
     */
    boolean announce(PendingConnection announced) {
        return sendIfFits(DescriptorLane.Kind.ANNOUNCE, announced.toByteArray());
    }

    /**
     * Asks a DNS query on the lane.
     *
     * @param query the query
     * @return false when it is too large for the lane (it then goes over the stream)
     * @throws LinuxException when the lane is gone
     */
    boolean query(DnsQuery query) {
        return sendIfFits(DescriptorLane.Kind.QUERY, query.toByteArray());
    }

    private boolean sendIfFits(DescriptorLane.Kind kind, byte[] body) {
        if (!DescriptorLane.fits(kind, body.length)) {
            return false;
        }
        sendFrame(new DescriptorLane.Frame(kind, body));
        return true;
    }

    /**
     * Passes a socket under its token.
     *
     * @param token the connection's token
     * @param fd    the socket (ours stays open; the caller closes it)
     * @throws LinuxException when the lane is gone
     */
    void send(byte[] token, int fd) {
        sendWire(new DescriptorLane.Frame(DescriptorLane.Kind.SOCKET, token).encode(), fd);
    }

    /**
     * Tells the supervisor that a token's socket will never come, so it stops waiting now.
     *
     * @param token the connection's token
     */
    void failed(byte[] token) {
        try {
            sendFrame(new DescriptorLane.Frame(DescriptorLane.Kind.FAILED, token));
        } catch (LinuxException e) {
            // The lane is gone: the supervisor's wait ends with it.
            LOGGER.log(System.Logger.Level.DEBUG, "could not report a failed handoff: " + e.getMessage());
        }
    }

    private void sendFrame(DescriptorLane.Frame frame) {
        sendWire(frame.encode());
    }

    private void sendWire(byte[] wire, int... fds) {
        guard.readLock().lock();
        try {
            UnixSockets.send(socket.value(), wire, fds);
        } finally {
            guard.readLock().unlock();
        }
    }

    private void shutdownQuietly() {
        guard.readLock().lock();
        try {
            if (socket.isOpen()) {
                UnixSockets.shutdown(socket.value());
            }
        } catch (LinuxException e) {
            LOGGER.log(System.Logger.Level.DEBUG, "lane shutdown: " + e.getMessage());
        } finally {
            guard.readLock().unlock();
        }
    }

    private void closeExclusively() {
        guard.writeLock().lock();
        try {
            socket.close();
        } finally {
            guard.writeLock().unlock();
        }
    }

    private void readLoop(Receiver receiver, Runnable ended) {
        try {
            while (open) {
                Optional<UnixSockets.Message> next = UnixSockets.receive(socket.value(), DescriptorLane.MAX_FRAME_BYTES, POLL);
                if (next.isEmpty()) {
                    continue;
                }
                UnixSockets.Message message = next.get();
                if (message.endOfStream()) {
                    return;
                }
                if (!message.fds().isEmpty()) {
                    message.fds().forEach(OwnedFd::close);
                    LOGGER.log(System.Logger.Level.WARNING, "descriptor lane: the supervisor sent descriptors: closing the lane");
                    return;
                }
                DescriptorLane.Frame frame = DescriptorLane.Frame.decode(message.data());
                switch (frame.kind()) {
                case DECISION -> receiver.decision(RelayDecision.parseFrom(frame.body()));
                case ANSWER -> receiver.answer(DnsAnswer.parseFrom(frame.body()));
                default -> {
                    LOGGER.log(System.Logger.Level.WARNING, "descriptor lane: a " + frame.kind() + " frame from the supervisor: closing the lane");
                    return;
                }
                }
            }
        } catch (LinuxException | ProtocolException | InvalidProtocolBufferException e) {
            if (open) {
                LOGGER.log(System.Logger.Level.WARNING, "descriptor lane: read failed: " + e.getMessage());
            }
        } finally {
            boolean mine = !open;
            open = false;
            reading = false;
            // A send blocked on a full lane fails now instead of holding the close back.
            shutdownQuietly();
            closeExclusively();
            if (!mine) {
                ended.run();
            }
        }
    }

    /** Closes the lane; a keyed lane's reader closes the descriptor as it ends (at once: the socket is shut down). */
    @Override
    public void close() {
        open = false;
        if (reading) {
            shutdownQuietly();
        } else {
            closeExclusively();
        }
    }
}
