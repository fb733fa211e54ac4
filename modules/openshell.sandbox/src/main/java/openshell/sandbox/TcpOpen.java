package openshell.sandbox;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.channels.ServerSocketChannel;
import java.util.Optional;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import openshell.isolation.BackendException;
import openshell.isolation.ByteChannel;
import openshell.isolation.DenyReason;
import openshell.isolation.IdentityResolution;
import openshell.isolation.PendingTcpOpen;
import openshell.isolation.SocketIdentity;
import openshell.isolation.TcpDestination;
import openshell.linux.Errno;
import openshell.linux.OwnedFd;
import openshell.linux.SeccompListener;
import openshell.linux.UnixSockets;

/**
 * One workload thread blocked in {@code connect()}. Holds a copy of the caller's own socket
 * (taken while it was blocked), so the decision is applied to exactly that socket even if the
 * caller moves another one onto the descriptor number meanwhile.
 *
 * <p>On allow: a one-shot listener on the loopback of the socket's family, in the workload's
 * network namespace; the runtime connects the caller's socket to it (a non-blocking socket gets
 * EINPROGRESS, as from the kernel), answers the notification, and accepts only the connection
 * whose peer address is the caller socket's own local address (a 4-tuple is unique, so no other
 * socket of the workload can stand in for it).
 */
final class TcpOpen implements PendingTcpOpen {
    private final NetworkBroker broker;
    private final SharedListener shared;
    private final SeccompListener listener;
    private final long id;
    private final int domain;
    private final OwnedFd socket;
    private final TcpDestination destination;
    private final IdentityResolution identity;
    private final SocketIdentity socketIdentity;
    private final AtomicBoolean decided = new AtomicBoolean();
    private final AtomicBoolean settled = new AtomicBoolean();
    private volatile ScheduledFuture<?> expiry;
    /** Whether the blocked connect got its answer; only the deciding thread touches it. */
    private boolean answered;

    TcpOpen(NetworkBroker broker, SharedListener shared, long id, int domain, OwnedFd socket,
            InetSocketAddress destination, IdentityResolution identity, long inode) {
        this.broker = broker;
        this.shared = shared;
        this.listener = shared.listener();
        this.id = id;
        this.domain = domain;
        this.socket = socket;
        this.destination = new TcpDestination(destination.getAddress(), destination.getPort());
        this.identity = identity;
        this.socketIdentity = new SocketIdentity(inode);
    }

    void expiry(ScheduledFuture<?> future) {
        this.expiry = future;
    }

    boolean isDecided() {
        return decided.get();
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
        return socketIdentity;
    }

    @Override
    public ByteChannel allow() {
        if (!decided.compareAndSet(false, true)) {
            throw new BackendException(BackendException.Kind.INVALID, "this connect was already decided");
        }
        try {
            refuseUnlessAdmissible();
            if (!broker.reserveRelay()) {
                answer(Errno.EAGAIN, NetworkBroker.MAX_RELAYS + " relays open");
                throw new BackendException(BackendException.Kind.UNAVAILABLE, "relays exhausted");
            }
            try {
                return relay();
            } catch (RuntimeException | IOException e) {
                broker.releaseRelay();
                if (!answered) {
                    // Never leave the caller blocked in its connect: whatever failed, it gets an error now.
                    answer(Errno.ECONNREFUSED, "relay failed: " + e);
                }
                throw e instanceof BackendException b ? b
                        : new BackendException(BackendException.Kind.FAILED, "relay failed: " + e, e);
            }
        } finally {
            settle();
        }
    }

    /** Fails closed (answering the caller) for an unresolved identity or a closed mediation. */
    private void refuseUnlessAdmissible() {
        if (identity instanceof IdentityResolution.Unresolved unresolved) {
            answer(Errno.EACCES, "unresolved identity: " + unresolved.reason());
            throw new BackendException(BackendException.Kind.DENIED, "unresolved identity: " + unresolved.reason());
        }
        if (broker.isClosed()) {
            answer(NetworkBroker.ECANCELED, "mediation closed");
            throw new BackendException(BackendException.Kind.UNAVAILABLE, "mediation closed");
        }
    }

    /**
     * Admits the connection as {@link #allow} does, except that the end of the loopback relay the
     * workload's socket reaches goes to {@code sink} (the supervisor relays it natively, outside
     * the JVMs) instead of becoming a relay here. Our copy is closed once {@code sink} returned, so
     * the runtime holds nothing of the connection afterwards.
     *
     * @param sink receives the relay socket's descriptor; it must pass it on before returning
     * @throws BackendException as {@link #allow}; FAILED if the socket could not be passed on
     */
    void handOff(java.util.function.IntConsumer sink) {
        if (!decided.compareAndSet(false, true)) {
            throw new BackendException(BackendException.Kind.INVALID, "this connect was already decided");
        }
        try {
            refuseUnlessAdmissible();
            try (OwnedFd accepted = connectToRawListener()) {
                sink.accept(accepted.value());
            } catch (RuntimeException | IOException e) {
                if (!answered) {
                    answer(Errno.ECONNREFUSED, "handoff failed: " + e);
                }
                throw e instanceof BackendException b ? b
                        : new BackendException(BackendException.Kind.FAILED, "handoff failed: " + e, e);
            }
        } finally {
            settle();
        }
    }

    /** Whether the caller's socket is dual-stack IPv6 (reaches an IPv4 relay through a mapped address). */
    private boolean mapped() {
        return domain == SocketCalls.AF_INET6
                && SocketCalls.intOption(socket.value(), SocketCalls.IPPROTO_IPV6, SocketCalls.IPV6_V6ONLY) == 0;
    }

    private OwnedFd connectToRawListener() throws IOException {
        boolean mapped = mapped();
        boolean ipv6 = domain == SocketCalls.AF_INET6 && !mapped;
        try (OwnedFd server = broker.network().run(() -> SocketCalls.listenLoopback(
                InetAddress.getByName(ipv6 ? "::1" : "127.0.0.1"), 1))) {
            InetSocketAddress relayAddress = SocketCalls.localAddress(server.value())
                    .orElseThrow(() -> new BackendException(BackendException.Kind.FAILED, "the relay listener has no address"));
            InetSocketAddress expected = connectCaller(relayAddress, mapped);
            long deadline = System.nanoTime() + NetworkBroker.RELAY_ACCEPT_WAIT.toNanos();
            while (true) {
                long left = (deadline - System.nanoTime()) / 1_000_000;
                if (left <= 0) {
                    throw new BackendException(BackendException.Kind.FAILED, "the workload socket never reached its relay");
                }
                Optional<OwnedFd> candidate = UnixSockets.accept(server.value(), java.time.Duration.ofMillis(left));
                if (candidate.isEmpty()) {
                    continue;
                }
                OwnedFd accepted = candidate.get();
                if (SocketCalls.peerAddress(accepted.value()).map(expected::equals).orElse(false)) {
                    if (!SocketCalls.peerAddress(socket.value()).map(relayAddress::equals).orElse(false)) {
                        accepted.close();
                        throw new BackendException(BackendException.Kind.FAILED, "the workload socket is not connected to its relay");
                    }
                    return accepted;
                }
                NetworkBroker.audit("relay", "reject", "unexpected peer " + SocketCalls.peerAddress(accepted.value()));
                accepted.close();
            }
        }
    }

    /**
     * Connects the caller's socket to its relay listener and answers its connect with the
     * kernel's result (EINPROGRESS for a non-blocking socket, as the kernel would).
     *
     * @return the caller socket's local address: the only peer the listener may accept
     */
    private InetSocketAddress connectCaller(InetSocketAddress relayAddress, boolean mapped) {
        if (!listener.isValid(id)) {
            throw new BackendException(BackendException.Kind.TERMINATED, "the caller went away");
        }
        int rc = mapped ? SocketCalls.connectMapped(socket.value(), relayAddress)
                : SocketCalls.connect(socket.value(), relayAddress);
        if (rc != 0 && rc != SocketCalls.EINPROGRESS) {
            // The kernel's own answer for this socket (EISCONN, EALREADY, ...), as if it had connected.
            cancelExpiry();
            answered = true;
            listener.respondErrno(id, rc);
            throw new BackendException(BackendException.Kind.FAILED, "connect: " + Errno.name(rc));
        }
        // Before the answer: a getpeername right after connect returns already shows the destination.
        broker.mediated(socketIdentity.inode(), relayAddress, domain,
                new InetSocketAddress(destination.address(), destination.port()));
        InetSocketAddress expected = SocketCalls.localAddress(socket.value())
                .orElseThrow(() -> new BackendException(BackendException.Kind.FAILED, "socket has no local address"));
        cancelExpiry();
        answered = true;
        boolean delivered = rc == 0 ? listener.respondValue(id, 0) : listener.respondErrno(id, SocketCalls.EINPROGRESS);
        if (!delivered) {
            throw new BackendException(BackendException.Kind.TERMINATED, "the caller went away before the answer");
        }
        return expected;
    }

    private ByteChannel relay() throws IOException {
        // A dual-stack IPv6 socket (what every JVM and many runtimes open, even for an IPv4
        // destination written as ::ffff:a.b.c.d) reaches an IPv4 relay through its mapped address;
        // only an IPv6-only socket needs an IPv6 relay, which this JVM can open only if it saw
        // IPv6 at its start (the workload's netns may have had no IPv6 address then).
        boolean mapped = mapped();
        boolean ipv6 = domain == SocketCalls.AF_INET6 && !mapped;
        try (ServerSocketChannel server = broker.network().run(() -> {
            ServerSocketChannel s = ipv6 ? ServerSocketChannel.open(java.net.StandardProtocolFamily.INET6)
                    : ServerSocketChannel.open(java.net.StandardProtocolFamily.INET);
            s.bind(new InetSocketAddress(InetAddress.getByName(ipv6 ? "::1" : "127.0.0.1"), 0), 1);
            return s;
        })) {
            InetSocketAddress relayAddress = (InetSocketAddress) server.getLocalAddress();
            InetSocketAddress expected = connectCaller(relayAddress, mapped);
            Socket accepted = acceptExpected(server, expected);
            if (!SocketCalls.peerAddress(socket.value()).map(relayAddress::equals).orElse(false)) {
                accepted.close();
                throw new BackendException(BackendException.Kind.FAILED, "the workload socket is not connected to its relay");
            }
            accepted.setTcpNoDelay(true);
            return broker.registerRelay(accepted);
        }
    }

    static Socket acceptExpected(ServerSocketChannel server, InetSocketAddress expected) throws IOException {
        long deadline = System.nanoTime() + NetworkBroker.RELAY_ACCEPT_WAIT.toNanos();
        while (true) {
            long left = (deadline - System.nanoTime()) / 1_000_000;
            if (left <= 0) {
                throw new BackendException(BackendException.Kind.FAILED, "the workload socket never reached its relay");
            }
            server.socket().setSoTimeout((int) left);
            Socket candidate;
            try {
                candidate = server.socket().accept();
            } catch (SocketTimeoutException e) {
                continue;
            }
            if (expected.equals(candidate.getRemoteSocketAddress())) {
                return candidate;
            }
            NetworkBroker.audit("relay", "reject", "unexpected peer " + candidate.getRemoteSocketAddress());
            candidate.close();
        }
    }

    @Override
    public void deny(DenyReason reason) {
        if (reason == null) {
            throw new BackendException(BackendException.Kind.INVALID, "reason must not be null");
        }
        if (!decided.compareAndSet(false, true)) {
            throw new BackendException(BackendException.Kind.INVALID, "this connect was already decided");
        }
        try {
            answer(NetworkBroker.errnoOf(reason), "denied: " + reason);
        } finally {
            settle();
        }
    }

    /** The decision bound passed. */
    void expire() {
        if (decided.compareAndSet(false, true)) {
            try {
                answer(Errno.ETIMEDOUT, "no decision within the bound");
            } finally {
                settle();
            }
        }
    }

    /** Mediation closed. */
    void cancel() {
        if (decided.compareAndSet(false, true)) {
            try {
                answer(NetworkBroker.ECANCELED, "mediation unavailable");
            } finally {
                settle();
            }
        }
    }

    /** The caller went away before the decision was asked. */
    void abandon() {
        decided.set(true);
        settle();
    }

    /**
     * Takes the decision bound off the timer before the caller hears anything: once the workload
     * has its answer, no expiry of this connect is left queued (settle, which also cancels it,
     * runs after the answer and may be later).
     */
    private void cancelExpiry() {
        ScheduledFuture<?> f = expiry;
        if (f != null) {
            f.cancel(false);
        }
    }

    private void answer(int errno, String why) {
        cancelExpiry();
        answered = true;
        NetworkBroker.audit("connect " + destination.address().getHostAddress() + ":" + destination.port(),
                "deny " + Errno.name(errno), why);
        listener.respondErrno(id, errno);
    }

    private void settle() {
        if (settled.compareAndSet(false, true)) {
            ScheduledFuture<?> f = expiry;
            if (f != null) {
                f.cancel(false);
            }
            socket.close();
            broker.settled(this);
            shared.release();
        }
    }
}
