package openshell.supervisor;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import openshell.isolation.BackendException;
import openshell.isolation.ByteChannel;
import openshell.isolation.DenyReason;
import openshell.isolation.IdentityResolution;
import openshell.isolation.NetworkMediationSource;
import openshell.isolation.PendingDnsQuery;
import openshell.isolation.PendingTcpOpen;
import openshell.isolation.SocketIdentity;
import openshell.isolation.TcpDestination;

/**
 * A TEST DOUBLE of the workload side, for unit tests of the supervisor's own code only: it stands
 * in for a real isolation backend (the sandbox runtime's seccomp interception). Each pending open
 * it hands out is admitted onto a real loopback socket pair, so the supervisor relays real bytes
 * over real sockets; the "workload" is the test holding the other end. It is not a feature.
 */
final class TestMediationSource implements NetworkMediationSource {
    private final BlockingQueue<PendingTcpOpen> opens = new LinkedBlockingQueue<>();
    private final BlockingQueue<PendingDnsQuery> queries = new LinkedBlockingQueue<>();
    private final AtomicBoolean closed = new AtomicBoolean();
    private static final AtomicLong INODES = new AtomicLong(1000);

    /** The descriptor channel handed-off opens use, once {@link #handOffVia} was called. */
    private volatile java.nio.file.Path handoffPath;
    /** Every open made after {@link #handOffVia}, in order. */
    final java.util.List<HandedOpen> handed = new java.util.concurrent.CopyOnWriteArrayList<>();
    private openshell.linux.OwnedFd handoffChannel;

    /**
     * From now on every open can be handed off, as the runtime's are over a Unix link: its
     * workload socket's peer end goes to the listener at {@code path} under a token.
     */
    void handOffVia(java.nio.file.Path path) {
        handoffPath = path;
    }

    /** When set, the next handoff passes the read end of a pipe instead of a socket (a misbehaving runtime). */
    volatile boolean sendPipeInstead;

    synchronized void sendHandoff(byte[] token, int fd) {
        if (sendPipeInstead) {
            sendPipeInstead = false;
            java.util.List<openshell.linux.OwnedFd> pipe = openshell.linux.OwnedFd.pipe();
            pipe.get(1).close();
            try (openshell.linux.OwnedFd read = pipe.get(0)) {
                sendHandoff(token, read.value());
            }
            return;
        }
        if (handoffChannel == null) {
            handoffChannel = openshell.linux.UnixSockets.connectSeqpacket(handoffPath);
        }
        openshell.linux.UnixSockets.send(handoffChannel.value(),
                new openshell.protocol.DescriptorLane.Frame(openshell.protocol.DescriptorLane.Kind.SOCKET, token).encode(), fd);
    }

    /** Queues a connect() of the workload and returns its handle. */
    Open open(IdentityResolution who, InetAddress address, int port) {
        Open o;
        if (handoffPath != null) {
            HandedOpen h = new HandedOpen(this, who, new TcpDestination(address, port));
            handed.add(h);
            o = h;
        } else {
            o = new Open(who, new TcpDestination(address, port));
        }
        opens.add(o);
        return o;
    }

    /**
     * An open the runtime could hand off: {@link #allowHandoff} passes the raw peer end of the
     * workload's socket over the descriptor channel, as {@code RuntimeService} does; {@link #allow}
     * still relays over the contract's channel.
     */
    static final class HandedOpen extends Open implements HandoffCapable {
        private final TestMediationSource source;
        private final byte[] token = new byte[openshell.protocol.DescriptorLane.TOKEN_BYTES];
        /** Which way the decision went: true for a handoff, false for allow(). */
        final CompletableFuture<Boolean> handedOff = new CompletableFuture<>();

        HandedOpen(TestMediationSource source, IdentityResolution who, TcpDestination to) {
            super(who, to);
            this.source = source;
            new java.security.SecureRandom().nextBytes(token);
        }

        @Override
        public Optional<byte[]> handoffToken() {
            return Optional.of(token.clone());
        }

        @Override
        public ByteChannel allow() {
            handedOff.complete(false);
            return super.allow();
        }

        @Override
        public CompletableFuture<Void> allowHandoff() {
            if (identity() instanceof IdentityResolution.Unresolved) {
                deny(DenyReason.IDENTITY_UNRESOLVED);
                throw new BackendException(BackendException.Kind.DENIED, "unresolved identity");
            }
            decide();
            try (ServerSocket pairing = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
                 openshell.linux.OwnedFd relayEnd = openshell.linux.TcpSockets.dial(
                         new java.net.InetSocketAddress(pairing.getInetAddress(), pairing.getLocalPort()), Duration.ofSeconds(10))) {
                Socket client = pairing.accept();
                client.setSoTimeout(30_000);
                source.sendHandoff(token, relayEnd.value());
                handedOff.complete(true);
                workload.complete(client);
                outcome.complete(null);
                return CompletableFuture.completedFuture(null);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    /** Queues an open the test made itself (a subclass that observes its decision) and returns it. */
    <T extends Open> T offer(T open) {
        opens.add(open);
        return open;
    }

    /** Queues a query the test made itself and returns it. */
    <T extends Query> T offer(T query) {
        queries.add(query);
        return query;
    }

    Query query(IdentityResolution who, byte[] message) {
        Query q = new Query(who, message);
        queries.add(q);
        return q;
    }

    @Override
    public Optional<PendingTcpOpen> acceptTcp(Duration timeout) {
        return take(opens, timeout);
    }

    @Override
    public Optional<PendingDnsQuery> acceptDns(Duration timeout) {
        return take(queries, timeout);
    }

    private <T> Optional<T> take(BlockingQueue<T> q, Duration timeout) {
        if (closed.get()) {
            throw new BackendException(BackendException.Kind.TERMINATED, "the source is closed");
        }
        try {
            return Optional.ofNullable(q.poll(timeout.toMillis(), TimeUnit.MILLISECONDS));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new BackendException(BackendException.Kind.TERMINATED, "interrupted");
        }
    }

    @Override
    public void close() {
        closed.set(true);
    }

    /** A workload connect() waiting for the supervisor; {@link #outcome} completes with the decision. */
    static class Open implements PendingTcpOpen {
        private final IdentityResolution who;
        private final TcpDestination to;
        private final SocketIdentity socket = new SocketIdentity(INODES.incrementAndGet());
        private final AtomicBoolean decided = new AtomicBoolean();
        /** The deny reason, or null when allowed. */
        final CompletableFuture<DenyReason> outcome = new CompletableFuture<>();
        /** The workload's end of the admitted connection. */
        final CompletableFuture<Socket> workload = new CompletableFuture<>();

        Open(IdentityResolution who, TcpDestination to) {
            this.who = who;
            this.to = to;
        }

        @Override
        public TcpDestination destination() {
            return to;
        }

        @Override
        public IdentityResolution identity() {
            return who;
        }

        @Override
        public SocketIdentity socket() {
            return socket;
        }

        @Override
        public ByteChannel allow() {
            if (who instanceof IdentityResolution.Unresolved) {
                deny(DenyReason.IDENTITY_UNRESOLVED);
                throw new BackendException(BackendException.Kind.DENIED, "unresolved identity");
            }
            decide();
            try (ServerSocket pairing = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                Socket client = new Socket(pairing.getInetAddress(), pairing.getLocalPort());
                Socket server = pairing.accept();
                client.setSoTimeout(30_000);
                workload.complete(client);
                outcome.complete(null);
                return new SocketChannel(server);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public void deny(DenyReason reason) {
            decide();
            outcome.complete(reason);
        }

        final void decide() {
            if (!decided.compareAndSet(false, true)) {
                throw new BackendException(BackendException.Kind.INVALID, "already decided");
            }
        }
    }

    /** The supervisor's end of a socket pair as the contract's channel: closing the output half-closes. */
    static final class SocketChannel implements ByteChannel {
        private final Socket socket;

        SocketChannel(Socket socket) {
            this.socket = socket;
        }

        @Override
        public InputStream input() {
            try {
                return socket.getInputStream();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public OutputStream output() {
            try {
                OutputStream out = socket.getOutputStream();
                return new OutputStream() {
                    @Override
                    public void write(int b) throws IOException {
                        out.write(b);
                    }

                    @Override
                    public void write(byte[] b, int off, int len) throws IOException {
                        out.write(b, off, len);
                    }

                    @Override
                    public void flush() throws IOException {
                        out.flush();
                    }

                    @Override
                    public void close() throws IOException {
                        socket.shutdownOutput();
                    }
                };
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public void close() {
            try {
                socket.close();
            } catch (IOException e) {
                // Closing twice or a reset socket: nothing left to release.
            }
        }
    }

    /** A workload DNS query; {@link #response} or {@link #refused} completes. */
    static class Query implements PendingDnsQuery {
        private final IdentityResolution who;
        private final byte[] message;
        private final AtomicBoolean decided = new AtomicBoolean();
        final CompletableFuture<byte[]> response = new CompletableFuture<>();
        final CompletableFuture<DenyReason> refused = new CompletableFuture<>();

        Query(IdentityResolution who, byte[] message) {
            this.who = who;
            this.message = message.clone();
        }

        @Override
        public byte[] query() {
            return message.clone();
        }

        @Override
        public IdentityResolution identity() {
            return who;
        }

        @Override
        public void answer(byte[] r) {
            if (r.length > MAX_MESSAGE_BYTES || !decided.compareAndSet(false, true)) {
                throw new BackendException(BackendException.Kind.INVALID, "already answered or too large");
            }
            response.complete(r.clone());
        }

        @Override
        public void refuse(DenyReason reason) {
            if (!decided.compareAndSet(false, true)) {
                throw new BackendException(BackendException.Kind.INVALID, "already answered");
            }
            refused.complete(reason);
        }
    }
}
