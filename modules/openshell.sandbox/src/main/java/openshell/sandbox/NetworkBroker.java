package openshell.sandbox;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import openshell.isolation.IdentityResolution;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import openshell.isolation.BackendException;
import openshell.isolation.DenyReason;
import openshell.isolation.NetworkMediationSource;
import openshell.isolation.PendingDnsQuery;
import openshell.isolation.PendingTcpOpen;
import openshell.linux.Errno;
import openshell.linux.LinuxException;
import openshell.linux.OwnedFd;
import openshell.linux.Pidfd;
import openshell.linux.SeccompListener;
import openshell.linux.SeccompNotification;
import openshell.linux.TaskMemory;

/**
 * The network broker: serves the seccomp listener of every workload process and turns each
 * {@code connect()} to an external TCP address into a {@link PendingTcpOpen}, so the runtime is
 * the {@link NetworkMediationSource} of its boundary. Everything else the filter notifies is
 * answered here at once: AF_UNIX and loopback stay local ({@code CONTINUE}), UDP may only reach
 * the DNS relay, binds only loopback, {@code MSG_FASTOPEN} never.
 *
 * <p>Why the caller's address is copied before anything is decided: {@code CONTINUE} makes the
 * kernel re-read the caller's memory, which another thread may have changed. A mediated connect
 * is therefore never continued: the runtime takes the caller's own socket ({@code pidfd_getfd}),
 * connects it itself to a one-shot loopback relay, and answers with the kernel's result. What
 * is continued (AF_UNIX, loopback, the DNS relay) could at worst be redirected to another address
 * inside the workload's network namespace, which has no route out: that is the fence's job.
 */
final class NetworkBroker implements NetworkMediationSource {
    /** Most connects waiting for a decision at once; the next one fails with EAGAIN. */
    static final int MAX_PENDING_DECISIONS = 256;
    /** Longest wait for a decision; then the caller gets ETIMEDOUT. */
    static final Duration DECISION_WAIT = Duration.ofSeconds(30);
    /** Most relayed connections open at once; an allow beyond it fails the caller with EAGAIN. */
    static final int MAX_RELAYS = 1024;
    /** Longest wait for the workload's socket to arrive at its one-shot relay listener. */
    static final Duration RELAY_ACCEPT_WAIT = Duration.ofSeconds(10);
    /** Most DNS queries waiting for an answer; more are dropped (the resolver retries). */
    static final int MAX_PENDING_DNS = 256;
    /** Local ports whose DNS queries are attributed to a binary; the least recently used is forgotten. */
    static final int MAX_DNS_ASKERS = 1024;
    /**
     * Mediated sockets whose destination getpeername answers with, by socket inode; the least
     * recently used is forgotten (its getpeername then shows the relay, as before). Twice the
     * relays: a closed socket's entry is not removed, only outlived.
     */
    static final int MAX_MEDIATED_PEERS = 2 * MAX_RELAYS;
    /**
     * Where {@code pidfd_getfd} is refused (Docker's default seccomp profile): most sockets this
     * runtime made for the workload's {@code socket()} calls and still holds; the oldest is let go.
     */
    static final int MAX_HELD_SOCKETS = 1024;
    /** How long such a socket is held for its first connect, bind or DNS send; then it is let go. */
    static final Duration HELD_SOCKET_WAIT = Duration.ofSeconds(10);
    /** The DNS relay inside the workload's network namespace. */
    static final InetSocketAddress DNS_RELAY = new InetSocketAddress(address(127, 0, 0, 53), 53);

    static final int NR_SOCKET = 41;
    static final int NR_CONNECT = 42;
    static final int NR_SENDTO = 44;
    static final int NR_SENDMSG = 46;
    static final int NR_BIND = 49;
    static final int NR_LISTEN = 50;
    static final int NR_GETPEERNAME = 52;
    static final int NR_SENDMMSG = 307;
    static final int MSG_FASTOPEN = 0x20000000;
    /** The kernel's UIO_MAXIOV: sendmmsg never sends more messages in one call. */
    static final int MAX_SENDMMSG_VECTOR = 1024;
    static final int MMSGHDR_BYTES = 64;
    static final int MAX_SOCKADDR_BYTES = 128;
    static final int EOPNOTSUPP = 95;
    static final int ECANCELED = 125;

    private final WorkloadNetwork network;
    private final IdentityCapture identities;
    private final Duration decisionWait;
    private final Semaphore pendingSlots = new Semaphore(MAX_PENDING_DECISIONS);
    private final Semaphore dnsSlots = new Semaphore(MAX_PENDING_DNS);
    private final AtomicInteger relays = new AtomicInteger();
    private final java.util.concurrent.atomic.AtomicLong exhausted = new java.util.concurrent.atomic.AtomicLong();
    private final java.util.concurrent.atomic.AtomicLong droppedDns = new java.util.concurrent.atomic.AtomicLong();
    private final BlockingQueue<TcpOpen> tcp = new LinkedBlockingQueue<>();
    private final BlockingQueue<PendingDnsQuery> dns = new LinkedBlockingQueue<>();
    /** Asks queries on the relay's thread while the supervisor's DNS plane runs; null: they queue. */
    private volatile java.util.function.Consumer<PendingDnsQuery> directDns;
    private final Set<TcpOpen> undecided = ConcurrentHashMap.newKeySet();
    private final Set<RelayChannel> openRelays = ConcurrentHashMap.newKeySet();
    private final ScheduledThreadPoolExecutor timer = decisionTimer();
    private volatile boolean closed;
    /** Whether a supervisor takes pending connections now; until the first one it is assumed (nothing runs yet). */
    private volatile boolean supervised = true;
    /**
     * Whether {@code pidfd_getfd} works here. Where it does not, the runtime makes every AF_INET and
     * AF_INET6 socket the workload asks for itself, gives it to the caller as {@code socket()}'s
     * result ({@code SECCOMP_IOCTL_NOTIF_ADDFD} with {@code SEND}) and holds its own descriptor of
     * the same open file until the socket's first connect (taken then, exactly as pidfd_getfd would
     * have), or for {@link #HELD_SOCKET_WAIT}: a connect, bind or DNS send on a socket no longer held
     * is refused (EACCES, audited), never continued unmediated. Holding delays the release of a
     * socket the workload closes before it connects by at most that wait.
     */
    private final boolean takeFdWorks;
    private record Held(OwnedFd socket, long since) {
    }

    private final Map<Long, Held> held = new LinkedHashMap<>(64, 0.75f, false) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, Held> eldest) {
            if (size() > MAX_HELD_SOCKETS) {
                eldest.getValue().socket().close();
                return true;
            }
            return false;
        }
    };

    /** What a mediated socket is connected to (its relay) and what its workload asked for. */
    private record MediatedPeer(InetSocketAddress relay, byte[] destination) {
    }

    private final Map<Long, MediatedPeer> mediatedPeers = new LinkedHashMap<>(64, 0.75f, true) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, MediatedPeer> eldest) {
            return size() > MAX_MEDIATED_PEERS;
        }
    };
    private final Map<Integer, IdentityResolution> dnsAskers = new LinkedHashMap<>(64, 0.75f, true) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<Integer, IdentityResolution> eldest) {
            return size() > MAX_DNS_ASKERS;
        }
    };

    /**
     * @param network      where relay listeners are created
     * @param runtimePid   the runtime's pid (ancestor walks stop below it)
     * @param decisionWait the decision bound ({@link #DECISION_WAIT} in production)
     */
    NetworkBroker(WorkloadNetwork network, long runtimePid, Duration decisionWait) {
        this.network = network;
        this.identities = new IdentityCapture(runtimePid);
        this.decisionWait = decisionWait;
        this.takeFdWorks = takeFdWorks();
        if (!takeFdWorks) {
            timer.scheduleWithFixedDelay(this::releaseHeld, 1, 1, TimeUnit.SECONDS);
        }
    }

    /** Tries pidfd_getfd on this process itself. */
    private static boolean takeFdWorks() {
        try (Pidfd self = Pidfd.open((int) ProcessHandle.current().pid()); OwnedFd copy = self.takeFd(self.fd().value())) {
            return copy.isOpen();
        } catch (LinuxException e) {
            return false;
        }
    }

    /** @return whether callers' sockets are taken with pidfd_getfd (else held from their socket()) */
    boolean takesCallerSockets() {
        return takeFdWorks;
    }

    /** Lets go of held sockets older than {@link #HELD_SOCKET_WAIT}. */
    private void releaseHeld() {
        long oldest = System.nanoTime() - HELD_SOCKET_WAIT.toNanos();
        synchronized (held) {
            var it = held.values().iterator();
            while (it.hasNext()) {
                Held h = it.next();
                if (h.since() - oldest > 0) {
                    break; // insertion order: the rest are younger
                }
                h.socket().close();
                it.remove();
            }
        }
    }

    /** @return sockets held for their first use (for leak checks) */
    int heldSocketCount() {
        synchronized (held) {
            return held.size();
        }
    }

    /**
     * The caller's socket {@code fd}: taken with pidfd_getfd, or this runtime's held descriptor of it.
     *
     * @param consume whether the hold ends here (a connect: the socket is the caller's to close from now on)
     * @throws LinuxException EACCES for a socket this runtime neither can take nor holds
     */
    private OwnedFd callerSocket(int tgid, int fd, boolean consume) throws IOException {
        if (takeFdWorks) {
            try (Pidfd process = Pidfd.open(tgid)) {
                return process.takeFd(fd);
            }
        }
        String target = java.nio.file.Files.readSymbolicLink(java.nio.file.Path.of("/proc/" + tgid + "/fd/" + fd)).toString();
        if (!target.startsWith("socket:[")) {
            throw new LinuxException("take socket", 88 /* ENOTSOCK */, "fd " + fd + " is " + target);
        }
        long inode = Long.parseLong(target.substring("socket:[".length(), target.length() - 1));
        synchronized (held) {
            Held h = consume ? held.remove(inode) : held.get(inode);
            if (h == null) {
                throw new LinuxException("take socket", Errno.EACCES, "socket " + inode + " is not held (pidfd_getfd is refused here"
                        + " and this runtime holds a socket only from its socket() call until its first connect or " + HELD_SOCKET_WAIT + ")");
            }
            return consume ? h.socket() : h.socket().duplicate();
        }
    }

    /**
     * {@code socket(AF_INET|AF_INET6, ...)} where pidfd_getfd is refused: made here in the workload's
     * network namespace with the caller's arguments, installed as the call's result, held.
     */
    private void onSocket(SeccompListener listener, SeccompNotification n) throws IOException {
        int domain = (int) n.argument(0);
        int type = (int) n.argument(1);
        int protocol = (int) n.argument(2);
        OwnedFd socket;
        try {
            socket = network.run(() -> OwnedFd.socket(domain, type, protocol));
        } catch (LinuxException e) {
            listener.respondErrno(n.id(), e.errno() > 0 ? e.errno() : Errno.EACCES);
            return;
        }
        long inode = socketInode(socket);
        synchronized (held) {
            held.put(inode, new Held(socket, System.nanoTime()));
        }
        if (listener.injectFdAsResult(n.id(), socket.value(), (type & SOCK_CLOEXEC) != 0) < 0) {
            synchronized (held) {
                held.remove(inode);
            }
            socket.close();
        }
    }

    private static final int SOCK_CLOEXEC = 0x80000;

    /**
     * The timer of the decision bound. A decided connect's expiry leaves its queue when it is
     * cancelled, not {@link #DECISION_WAIT} later: at 1,000 connects a second the queue would
     * otherwise hold some 30,000 cancelled expiries, each keeping its connect (identity, command
     * line) on the heap.
     */
    private static ScheduledThreadPoolExecutor decisionTimer() {
        ScheduledThreadPoolExecutor timer = new ScheduledThreadPoolExecutor(1,
                r -> Thread.ofPlatform().daemon(true).name("broker-decision-timer").unstarted(r));
        timer.setRemoveOnCancelPolicy(true);
        return timer;
    }

    /** @return decision bounds scheduled and not yet run or cancelled (for leak checks) */
    int scheduledExpiries() {
        return timer.getQueue().size();
    }

    /** {@code ::1}, what {@code bind([::]:0)} is narrowed to. */
    private static final InetAddress LOOPBACK6 = address(new byte[] {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});

    private static InetAddress address(int a, int b, int c, int d) {
        return address(new byte[] {(byte) a, (byte) b, (byte) c, (byte) d});
    }

    private static InetAddress address(byte[] bytes) {
        try {
            return InetAddress.getByAddress(bytes);
        } catch (UnknownHostException e) {
            throw new IllegalStateException(e);
        }
    }

    /** How caller memory is read, as the startup probe found; null: each listener's thread probes. */
    private volatile TaskMemory.Mechanism memoryMechanism;

    /**
     * Uses the startup probe's mechanism: a runtime that made itself non-dumpable without
     * capabilities (a container's user) can no longer probe on its own memory, only read its
     * workload's.
     */
    void taskMemory(TaskMemory.Mechanism mechanism) {
        this.memoryMechanism = mechanism;
    }

    IdentityCapture identities() {
        return identities;
    }

    WorkloadNetwork network() {
        return network;
    }

    boolean isClosed() {
        return closed;
    }

    int openRelayCount() {
        return relays.get();
    }

    /** @return how many connects were refused with EAGAIN because {@link #MAX_PENDING_DECISIONS} were pending */
    long exhaustedCount() {
        return exhausted.get();
    }

    /** @return DNS queries dropped because mediation was closed or {@link #MAX_PENDING_DNS} were pending */
    long droppedDnsCount() {
        return droppedDns.get();
    }

    /** @return DNS queries waiting for an answer */
    int pendingDnsCount() {
        return MAX_PENDING_DNS - dnsSlots.availablePermits();
    }

    int pendingDecisionCount() {
        return MAX_PENDING_DECISIONS - pendingSlots.availablePermits();
    }

    /**
     * Serves a workload process's listener on a new thread until its last user exits.
     *
     * @param listener the listener the launcher handed over (now owned by the broker)
     * @return the serving thread
     */
    Thread serve(SeccompListener listener) {
        SharedListener shared = new SharedListener(listener);
        return Thread.ofPlatform().daemon(true).name("seccomp-broker").start(() -> {
            try {
                TaskMemory.Mechanism chosen = memoryMechanism;
                TaskMemory memory = chosen == null ? TaskMemory.probe() : TaskMemory.using(chosen);
                SeccompNotification n = listener.newNotification();
                while (true) {
                    SeccompListener.Pending pending = listener.awaitPending(Duration.ofSeconds(1));
                    if (pending == SeccompListener.Pending.NO_USERS) {
                        return;
                    }
                    if (pending == SeccompListener.Pending.NOTIFICATION && listener.receive(n)) {
                        handle(shared, n, memory);
                    }
                }
            } catch (RuntimeException e) {
                audit("listener", "failed", e.toString());
            } finally {
                shared.release();
            }
        });
    }

    private void handle(SharedListener shared, SeccompNotification n, TaskMemory memory) {
        SeccompListener listener = shared.listener();
        long id = n.id();
        try {
            switch (n.syscall()) {
                case NR_SOCKET -> {
                    if (takeFdWorks) {
                        listener.respondContinue(id);
                    } else {
                        onSocket(listener, n);
                    }
                }
                case NR_LISTEN -> listener.respondContinue(id);
                case NR_CONNECT -> onConnect(shared, n, memory);
                case NR_BIND -> onBind(listener, n, memory);
                case NR_GETPEERNAME -> onGetpeername(listener, n, memory);
                case NR_SENDTO -> onSend(listener, id, "sendto", n.pid(), (int) n.argument(0), n.argument(3), n.argument(4), n.argument(5), memory);
                case NR_SENDMSG -> onSendmsg(listener, n, memory);
                case NR_SENDMMSG -> onSendmmsg(listener, n, memory);
                default -> deny(listener, id, "syscall " + n.syscall(), Errno.ENOSYS, "not expected from the filter");
            }
        } catch (LinuxException e) {
            // The caller's memory or descriptor could not be read: fail closed with the kernel's own errno.
            int errno = e.errno() > 0 ? e.errno() : Errno.EACCES;
            deny(listener, id, "syscall " + n.syscall(), errno, e.getMessage());
        } catch (IOException | RuntimeException e) {
            deny(listener, id, "syscall " + n.syscall(), Errno.EACCES, e.toString());
        }
    }

    private static byte[] readSockaddr(TaskMemory memory, int tid, long address, long length) {
        if (address == 0 || length <= 0) {
            return new byte[0];
        }
        byte[] sockaddr = new byte[(int) Math.min(length, MAX_SOCKADDR_BYTES)];
        int n = memory.read(tid, address, sockaddr, sockaddr.length);
        return n == sockaddr.length ? sockaddr : java.util.Arrays.copyOf(sockaddr, n);
    }

    private void onConnect(SharedListener shared, SeccompNotification n, TaskMemory memory) throws IOException {
        SeccompListener listener = shared.listener();
        long id = n.id();
        int tid = n.pid();
        byte[] sockaddr = readSockaddr(memory, tid, n.argument(1), n.argument(2));
        int family = SocketCalls.family(sockaddr, sockaddr.length);
        if (family != SocketCalls.AF_INET && family != SocketCalls.AF_INET6) {
            listener.respondContinue(id);
            return;
        }
        Optional<InetSocketAddress> parsed = SocketCalls.decode(sockaddr);
        if (parsed.isEmpty()) {
            deny(listener, id, "connect", Errno.EINVAL, "malformed sockaddr");
            return;
        }
        InetSocketAddress destination = parsed.get();
        int fd = (int) n.argument(0);
        int tgid = IdentityCapture.processOf(tid);
        OwnedFd socket;
        try {
            socket = callerSocket(tgid, fd, true);
        } catch (LinuxException e) {
            if (!takeFdWorks && staysLocal(destination.getAddress())) {
                // Not held any more, and going nowhere but the workload's own loopback: as made (a DNS
                // query from it arrives unattributed, Unresolved).
                audit("connect", "continue unheld", destination + ": " + e.getMessage());
                listener.respondContinue(id);
                return;
            }
            throw e;
        }
        boolean handedOff = false;
        try {
            if (!listener.isValid(id)) {
                return;
            }
            int type = SocketCalls.intOption(socket.value(), SocketCalls.SO_TYPE);
            int domain = SocketCalls.intOption(socket.value(), SocketCalls.SO_DOMAIN);
            if (domain != family) {
                deny(listener, id, "connect", SocketCalls.EAFNOSUPPORT, "address family differs from the socket's");
            } else if (type == SocketCalls.SOCK_DGRAM) {
                if (destination.equals(DNS_RELAY)) {
                    attributeDns(socket, tid, tgid);
                    listener.respondContinue(id);
                } else {
                    deny(listener, id, "connect(udp)", Errno.EACCES, "UDP only to the DNS relay, not " + destination);
                }
            } else if (type != SocketCalls.SOCK_STREAM) {
                deny(listener, id, "connect", Errno.EACCES, "socket type " + type);
            } else if (staysLocal(destination.getAddress())) {
                if (destination.equals(DNS_RELAY)) {
                    attributeDns(socket, tid, tgid);
                }
                listener.respondContinue(id);
            } else if (closed || !supervised) {
                deny(listener, id, "connect", ECANCELED, "mediation unavailable: no supervisor is deciding");
            } else if (!pendingSlots.tryAcquire()) {
                exhausted.incrementAndGet();
                deny(listener, id, "connect", Errno.EAGAIN, MAX_PENDING_DECISIONS + " decisions pending");
            } else {
                handedOff = true;
                OwnedFd owned = socket;
                shared.acquire();
                Thread.ofVirtual().name("pending-connect").start(
                        () -> prepare(shared, id, tid, tgid, domain, owned, destination));
            }
        } finally {
            if (!handedOff) {
                socket.close();
            }
        }
    }

    /** Loopback and the unspecified address (which the kernel connects to loopback) never leave the box. */
    static boolean staysLocal(InetAddress address) {
        return address.isLoopbackAddress() || address.isAnyLocalAddress();
    }

    private void prepare(SharedListener shared, long id, int tid, int tgid, int domain, OwnedFd socket,
                         InetSocketAddress destination) {
        SeccompListener listener = shared.listener();
        TcpOpen open = null;
        try {
            long inode = socketInode(socket);
            open = new TcpOpen(this, shared, id, domain, socket, destination, identities.capture(tid, tgid), inode);
            // Only now is what was read known to belong to the blocked caller.
            if (!listener.isValid(id)) {
                open.abandon();
                return;
            }
            undecided.add(open);
            TcpOpen scheduled = open;
            open.expiry(timer.schedule(scheduled::expire, decisionWait.toMillis(), TimeUnit.MILLISECONDS));
            tcp.add(open);
            if (closed || !supervised) {
                open.cancel();
            }
        } catch (RuntimeException | IOException e) {
            // Answer first: the listener stays open until this decision lets go of it below.
            try {
                deny(listener, id, "connect", Errno.EACCES, "could not prepare the decision: " + e);
            } finally {
                if (open != null) {
                    open.abandon();
                } else {
                    socket.close();
                    pendingSlots.release();
                    shared.release();
                }
            }
        }
    }

    private static long socketInode(OwnedFd socket) throws IOException {
        String target = java.nio.file.Files.readSymbolicLink(java.nio.file.Path.of("/proc/self/fd/" + socket.value())).toString();
        if (!target.startsWith("socket:[")) {
            throw new IOException("not a socket: " + target);
        }
        return Long.parseLong(target.substring(8, target.length() - 1));
    }

    /**
     * Called by TcpOpen once a workload socket is connected to its relay: from then on its
     * getpeername shows {@code destination} (as a socket of {@code domain} shows it), not the relay.
     */
    void mediated(long socketInode, InetSocketAddress relay, int domain, InetSocketAddress destination) {
        synchronized (mediatedPeers) {
            mediatedPeers.put(socketInode, new MediatedPeer(relay, SocketCalls.encodeFor(domain, destination)));
        }
    }

    /**
     * getpeername on a mediated socket answers the destination the workload connected to (what the
     * kernel would show without mediation), written into the caller's buffer as getpeername(2)
     * does: at most {@code *addrlen} bytes, and the full length in {@code *addrlen}. Only a socket
     * still connected to the relay it was given counts (an inode reused by another socket does
     * not); any other call runs as made, since the kernel's own answer reveals nothing.
     */
    private void onGetpeername(SeccompListener listener, SeccompNotification n, TaskMemory memory) {
        MediatedPeer peer;
        try {
            int tgid = IdentityCapture.processOf(n.pid());
            if (takeFdWorks) {
                try (Pidfd process = Pidfd.open(tgid); OwnedFd socket = process.takeFd((int) n.argument(0))) {
                    synchronized (mediatedPeers) {
                        peer = mediatedPeers.get(socketInode(socket));
                    }
                    if (peer != null && !SocketCalls.peerAddress(socket.value()).map(peer.relay()::equals).orElse(false)) {
                        peer = null;
                    }
                }
            } else {
                // No copy of the socket to ask: its inode alone (sockfs numbers do not come back soon).
                String target = java.nio.file.Files.readSymbolicLink(
                        java.nio.file.Path.of("/proc/" + tgid + "/fd/" + (int) n.argument(0))).toString();
                if (!target.startsWith("socket:[")) {
                    listener.respondContinue(n.id());
                    return;
                }
                synchronized (mediatedPeers) {
                    peer = mediatedPeers.get(Long.parseLong(target.substring(8, target.length() - 1)));
                }
            }
        } catch (IOException | LinuxException e) {
            // Not a socket, no such descriptor, or the caller is gone: the kernel answers (EBADF, ENOTSOCK, ...).
            listener.respondContinue(n.id());
            return;
        }
        if (peer == null) {
            listener.respondContinue(n.id());
            return;
        }
        byte[] length = new byte[Integer.BYTES];
        if (n.argument(1) == 0 || n.argument(2) == 0 || memory.read(n.pid(), n.argument(2), length, length.length) != length.length) {
            listener.respondErrno(n.id(), Errno.EFAULT);
            return;
        }
        java.nio.ByteBuffer order = java.nio.ByteBuffer.wrap(length).order(java.nio.ByteOrder.nativeOrder());
        int room = order.getInt(0);
        if (room < 0) {
            listener.respondErrno(n.id(), Errno.EINVAL);
            return;
        }
        byte[] address = peer.destination();
        int copied = Math.min(room, address.length);
        order.putInt(0, address.length);
        if (copied > 0 && memory.writeIfValid(n.pid(), n.argument(1), address, copied, () -> listener.isValid(n.id())) != copied
                || memory.writeIfValid(n.pid(), n.argument(2), length, length.length, () -> listener.isValid(n.id())) != length.length) {
            // Gone meanwhile (-1), or a buffer that is not wholly writable.
            listener.respondErrno(n.id(), Errno.EFAULT);
            return;
        }
        listener.respondValue(n.id(), 0);
    }

    private void onBind(SeccompListener listener, SeccompNotification n, TaskMemory memory) throws IOException {
        byte[] sockaddr = readSockaddr(memory, n.pid(), n.argument(1), n.argument(2));
        int family = SocketCalls.family(sockaddr, sockaddr.length);
        if (family != SocketCalls.AF_INET && family != SocketCalls.AF_INET6) {
            listener.respondContinue(n.id());
            return;
        }
        Optional<InetSocketAddress> parsed = SocketCalls.decode(sockaddr);
        if (parsed.isPresent() && parsed.get().getAddress().isLoopbackAddress()) {
            listener.respondContinue(n.id());
        } else if (parsed.isPresent() && parsed.get().getAddress().isAnyLocalAddress() && parsed.get().getPort() == 0) {
            bindLoopback(listener, n, family);
        } else {
            deny(listener, n.id(), "bind", Errno.EACCES, "only loopback addresses may be bound: " + parsed.orElse(null));
        }
    }

    /**
     * {@code bind(0.0.0.0:0)} or {@code bind([::]:0)}, what resolvers do for a random source port:
     * the runtime binds the caller's socket to loopback with port 0 itself (never letting the kernel
     * re-read the sockaddr, which the caller could change after this check) and answers 0. Port 0
     * needs no privilege, so the runtime's own grants nothing the workload lacks.
     */
    private void bindLoopback(SeccompListener listener, SeccompNotification n, int family) throws IOException {
        int tgid;
        try {
            tgid = IdentityCapture.processOf(n.pid());
        } catch (IOException e) {
            deny(listener, n.id(), "bind", Errno.EACCES, "the caller is gone: " + e);
            return;
        }
        try (OwnedFd socket = callerSocket(tgid, (int) n.argument(0), false)) {
            if (!listener.isValid(n.id())) {
                return;
            }
            if (SocketCalls.intOption(socket.value(), SocketCalls.SO_DOMAIN) != family) {
                deny(listener, n.id(), "bind", SocketCalls.EAFNOSUPPORT, "address family differs from the socket's");
                return;
            }
            InetAddress loopback = family == SocketCalls.AF_INET ? address(127, 0, 0, 1) : LOOPBACK6;
            int errno = SocketCalls.bind(socket.value(), new InetSocketAddress(loopback, 0));
            if (errno == 0) {
                listener.respondValue(n.id(), 0);
            } else {
                deny(listener, n.id(), "bind", errno, "binding loopback port 0 for the unspecified address failed");
            }
        }
    }

    private void onSend(SeccompListener listener, long id, String call, int tid, int fd, long flags, long address, long length,
                        TaskMemory memory) {
        Optional<String> refusal = sendRefusal(tid, flags, address, length, memory);
        if (refusal.isEmpty()) {
            if (address != 0) {
                attributeDns(tid, fd);
            }
            listener.respondContinue(id);
        } else {
            deny(listener, id, call, (flags & MSG_FASTOPEN) != 0 ? EOPNOTSUPP : Errno.EACCES, refusal.get());
        }
    }

    private static Optional<String> sendRefusal(int tid, long flags, long address, long length, TaskMemory memory) {
        if ((flags & MSG_FASTOPEN) != 0) {
            return Optional.of("MSG_FASTOPEN would connect without mediation");
        }
        byte[] sockaddr = readSockaddr(memory, tid, address, length);
        int family = SocketCalls.family(sockaddr, sockaddr.length);
        if (family != SocketCalls.AF_INET && family != SocketCalls.AF_INET6) {
            return Optional.empty();
        }
        Optional<InetSocketAddress> parsed = SocketCalls.decode(sockaddr);
        if (parsed.isPresent() && parsed.get().equals(DNS_RELAY)) {
            return Optional.empty();
        }
        return Optional.of("datagrams only to the DNS relay, not " + parsed.map(Object::toString).orElse("a malformed address"));
    }

    private void onSendmsg(SeccompListener listener, SeccompNotification n, TaskMemory memory) {
        long flags = n.argument(2);
        byte[] header = new byte[12];
        memory.read(n.pid(), n.argument(1), header, header.length);
        java.nio.ByteBuffer h = java.nio.ByteBuffer.wrap(header).order(java.nio.ByteOrder.nativeOrder());
        onSend(listener, n.id(), "sendmsg", n.pid(), (int) n.argument(0), flags, h.getLong(0), h.getInt(8) & 0xffffffffL, memory);
    }

    private void onSendmmsg(SeccompListener listener, SeccompNotification n, TaskMemory memory) {
        long flags = n.argument(3);
        long count = Math.min(n.argument(2) & 0xffffffffL, MAX_SENDMMSG_VECTOR);
        byte[] header = new byte[12];
        boolean addressed = false;
        for (long i = 0; i < count; i++) {
            memory.read(n.pid(), n.argument(1) + i * MMSGHDR_BYTES, header, header.length);
            java.nio.ByteBuffer h = java.nio.ByteBuffer.wrap(header).order(java.nio.ByteOrder.nativeOrder());
            addressed |= h.getLong(0) != 0;
            Optional<String> refusal = sendRefusal(n.pid(), flags, h.getLong(0), h.getInt(8) & 0xffffffffL, memory);
            if (refusal.isPresent()) {
                deny(listener, n.id(), "sendmmsg", (flags & MSG_FASTOPEN) != 0 ? EOPNOTSUPP : Errno.EACCES,
                        "message " + i + ": " + refusal.get());
                return;
            }
        }
        if (addressed) {
            attributeDns(n.pid(), (int) n.argument(0));
        }
        listener.respondContinue(n.id());
    }

    /** A datagram to the relay from a socket taken by number: attribute its port (a non-DNS send changes nothing). */
    private void attributeDns(int tid, int fd) {
        try {
            int tgid = IdentityCapture.processOf(tid);
            try (OwnedFd socket = callerSocket(tgid, fd, false)) {
                if (SocketCalls.intOption(socket.value(), SocketCalls.SO_DOMAIN) == SocketCalls.AF_INET) {
                    attributeDns(socket, tid, tgid);
                }
            }
        } catch (IOException | LinuxException e) {
            audit("dns", "unattributed", e.toString());
        }
    }

    /**
     * Records which binary owns the local port a query to the relay will come from. An unbound
     * socket is bound to an ephemeral loopback port first (where the kernel would have put it
     * anyway), so the port is known before its first datagram leaves.
     */
    private void attributeDns(OwnedFd socket, int tid, int tgid) {
        Optional<InetSocketAddress> local = SocketCalls.localAddress(socket.value());
        if (local.isEmpty() || local.get().getPort() == 0) {
            SocketCalls.bind(socket.value(), new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            local = SocketCalls.localAddress(socket.value());
        }
        if (local.isPresent() && local.get().getPort() != 0) {
            IdentityResolution identity = identities.capture(tid, tgid);
            synchronized (dnsAskers) {
                dnsAskers.put(local.get().getPort(), identity);
            }
        }
    }

    /**
     * @param port the local port a query came from
     * @return who sent from it, or why that is unknown
     */
    IdentityResolution dnsAsker(int port) {
        IdentityResolution known;
        synchronized (dnsAskers) {
            known = dnsAskers.get(port);
        }
        return known != null ? known
                : new IdentityResolution.Unresolved("no notified send to the DNS relay from local port " + port);
    }

    void deny(SeccompListener listener, long id, String call, int errno, String why) {
        audit(call, "deny " + Errno.name(errno), why);
        listener.respondErrno(id, errno);
    }

    static void audit(String call, String outcome, String detail) {
        System.err.println(auditLine(call, outcome, detail));
    }

    /** One audit line; every value escaped, a missing detail (an exception without a message) as "null". */
    static String auditLine(String call, String outcome, String detail) {
        return JsonLine.write(JsonLine.object().add("audit", "sandbox-broker").add("call", call).add("outcome", outcome)
                .add("detail", String.valueOf(detail)));
    }

    static int errnoOf(DenyReason reason) {
        return switch (reason) {
            case POLICY, IDENTITY_UNRESOLVED -> Errno.EACCES;
            case EXHAUSTED -> Errno.EAGAIN;
            case MEDIATION_UNAVAILABLE -> ECANCELED;
            case TIMEOUT -> Errno.ETIMEDOUT;
        };
    }

    // Called by TcpOpen.
    void settled(TcpOpen open) {
        undecided.remove(open);
        pendingSlots.release();
    }

    boolean reserveRelay() {
        if (relays.incrementAndGet() > MAX_RELAYS) {
            relays.decrementAndGet();
            return false;
        }
        return true;
    }

    RelayChannel registerRelay(java.net.Socket accepted) throws IOException {
        RelayChannel[] self = new RelayChannel[1];
        RelayChannel channel = new RelayChannel(accepted, () -> {
            openRelays.remove(self[0]);
            relays.decrementAndGet();
        });
        self[0] = channel;
        openRelays.add(channel);
        if (closed) {
            channel.close();
            throw new BackendException(BackendException.Kind.UNAVAILABLE, "mediation closed");
        }
        return channel;
    }

    void releaseRelay() {
        relays.decrementAndGet();
    }

    /**
     * Queues a DNS query for the decision side.
     *
     * @param query the pending query
     * @return {@code false} if closed or too many are pending (the query is dropped)
     */
    boolean offerDns(DnsQuery query) {
        if (closed || !supervised || !dnsSlots.tryAcquire()) {
            droppedDns.incrementAndGet();
            return false;
        }
        query.onSettled(dnsSlots::release);
        java.util.function.Consumer<PendingDnsQuery> asker = directDns;
        if (asker == null) {
            dns.add(query);
            return true;
        }
        // The asker settles a query it could not send itself (refused, its slot freed): the resolver retries.
        asker.accept(query);
        return true;
    }

    /**
     * @param asker asks a query of the supervisor on the caller's thread; empty: queries wait for
     *              {@link #acceptDns} again
     */
    void askDnsDirectly(Optional<java.util.function.Consumer<PendingDnsQuery>> asker) {
        directDns = asker.orElse(null);
    }

    @Override
    public Optional<PendingTcpOpen> acceptTcp(Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            if (closed) {
                throw new BackendException(BackendException.Kind.TERMINATED, "mediation source closed");
            }
            TcpOpen next;
            try {
                next = tcp.poll(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new BackendException(BackendException.Kind.TERMINATED, "interrupted");
            }
            if (next == null) {
                return Optional.empty();
            }
            if (!next.isDecided()) {
                return Optional.of(next);
            }
        }
    }

    @Override
    public Optional<PendingDnsQuery> acceptDns(Duration timeout) {
        if (closed) {
            throw new BackendException(BackendException.Kind.TERMINATED, "mediation source closed");
        }
        try {
            return Optional.ofNullable(dns.poll(timeout.toNanos(), TimeUnit.NANOSECONDS));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new BackendException(BackendException.Kind.TERMINATED, "interrupted");
        }
    }

    /** @return whether a supervisor takes pending connections (or none has yet had the chance to) */
    boolean supervised() {
        return supervised;
    }

    /** A supervisor takes pending connections again: connects are mediated. */
    void supervisionTaken() {
        supervised = true;
    }

    /**
     * The supervisor stopped taking pending connections (its stream ended, or the link dropped):
     * egress stops at once, as on {@link #close()}, but a returning supervisor can take over.
     */
    void supervisionLost() {
        supervised = false;
        stopEgress();
    }

    /** Egress stops at once: pending connects get ECANCELED, open relays close, later connects are refused. */
    @Override
    public void close() {
        closed = true;
        stopEgress();
        timer.shutdownNow();
        synchronized (held) {
            held.values().forEach(h -> h.socket().close());
            held.clear();
        }
    }

    private void stopEgress() {
        for (TcpOpen open : undecided) {
            open.cancel();
        }
        tcp.clear();
        for (PendingDnsQuery query : dns) {
            try {
                query.refuse(DenyReason.MEDIATION_UNAVAILABLE);
            } catch (BackendException e) {
                // Answered concurrently by a supervisor that took it just now: nothing left to refuse.
            }
        }
        dns.clear();
        for (RelayChannel relay : openRelays) {
            relay.close();
        }
    }
}
