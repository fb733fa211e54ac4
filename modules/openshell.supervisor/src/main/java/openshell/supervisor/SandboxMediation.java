package openshell.supervisor;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PushbackInputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.security.NoSuchAlgorithmException;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.function.Supplier;

import javax.net.ssl.SNIHostName;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

import openshell.isolation.BackendException;
import openshell.isolation.ByteChannel;
import openshell.isolation.DenyReason;
import openshell.isolation.IdentityResolution;
import openshell.isolation.NetworkMediationSource;
import openshell.isolation.PendingDnsQuery;
import openshell.isolation.PendingTcpOpen;
import openshell.isolation.SandboxId;
import openshell.isolation.TcpDestination;
import openshell.linux.LinuxException;
import openshell.linux.OwnedFd;
import openshell.linux.SpliceRelay;
import openshell.linux.TcpSockets;
import openshell.policy.Admission;
import openshell.policy.Decision;
import openshell.policy.Destination;
import openshell.policy.Inspection;
import openshell.policy.PolicyGeneration;

/**
 * Mediates one sandbox: takes every pending TCP open and DNS query from its
 * {@link NetworkMediationSource}, decides it with the current policy generation, dials upstream
 * only addresses this supervisor resolved and validated, relays (opaquely or request by request),
 * and audits every decision. Works with any isolation backend, since it sees only the contract.
 */
final class SandboxMediation implements AutoCloseable {
    /** Most relays open at once (and TCP decisions in progress); beyond it an open is denied EXHAUSTED. */
    static final int MAX_ACTIVE_RELAYS = 1024;
    /** Longest wait for an upstream TCP handshake; beyond it the open is denied TIMEOUT. */
    static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(10);
    /** Bytes buffered per relay direction. */
    static final int RELAY_BUFFER_BYTES = 16 * 1024;
    /**
     * Longest a handed-off connection's decision waits for the runtime's socket; beyond the
     * runtime's own wait for the workload socket to reach its relay listener (10 s).
     */
    static final Duration HANDOFF_WAIT = Duration.ofSeconds(15);
    static final int ETIMEDOUT = 110;
    /** The first byte of a TLS connection (a handshake record), which switches inspection to interception. */
    static final int TLS_HANDSHAKE_RECORD = 0x16;
    /** How often the accept loops wake to notice a close. */
    static final Duration ACCEPT_POLL = Duration.ofMillis(500);
    /**
     * Refusals (a connect or DNS query over its bound, or one that came after mediation stopped)
     * sent and audited on threads of their own at once. Beyond it the thread the arrival came on
     * (the lane's reader, an accept loop) refuses it itself: a runtime that floods announcements
     * then waits for its refusals, instead of growing the supervisor's threads without end.
     */
    static final int MAX_REFUSING = 64;

    private static final System.Logger LOGGER = System.getLogger(SandboxMediation.class.getName());

    private final SandboxId sandbox;
    private final PolicyInstallation policies;
    private final DnsPins pins;
    private final HostAliases aliases;
    private final Credentials credentials;
    private final AuditSink audit;
    private final MediationMetrics metrics;
    private final Clock clock;
    private final Duration connectTimeout;
    private final Semaphore relaySlots;
    private final int maxActiveRelays;
    private final Semaphore refusing = new Semaphore(MAX_REFUSING);
    private final Set<LiveRelay> relays = ConcurrentHashMap.newKeySet();
    private final DnsPlane dns;
    private final InterceptionAuthority authority;
    /** Built at the first inspected TLS connection, not at start (see {@link #upstreamTls()}). */
    private final Supplier<SSLContext> upstreamTrust;
    private final Object upstreamTlsLock = new Object();
    private SSLContext upstreamTlsContext; // guarded by upstreamTlsLock
    /** The descriptor lane and the native relay its sockets go to; both null without a channel. */
    private final HandoffListener handoff;
    private final SpliceRelay splice;
    private volatile boolean running;
    private volatile NetworkMediationSource source;
    private Thread tcpLoop;
    private Thread dnsLoop;

    private SandboxMediation(Builder b) {
        this.sandbox = Objects.requireNonNull(b.sandbox, "sandbox");
        this.policies = Objects.requireNonNull(b.policies, "policies");
        this.clock = b.clock;
        this.pins = new DnsPins(clock);
        this.aliases = b.aliases;
        this.credentials = b.credentials;
        this.audit = b.audit;
        this.metrics = b.metrics;
        this.connectTimeout = b.connectTimeout;
        this.relaySlots = new Semaphore(b.maxActiveRelays);
        this.maxActiveRelays = b.maxActiveRelays;
        this.dns = new DnsPlane(this, b.resolver, b.maxDnsInFlight);
        this.authority = InterceptionAuthority.create(sandbox, clock);
        this.upstreamTrust = b.upstreamTls != null ? b.upstreamTls : SandboxMediation::defaultUpstreamTls;
        this.handoff = b.handoff;
        this.splice = b.handoff == null ? null : SpliceRelay.start("splice-relay-" + sandbox.value());
    }

    static Builder builder() {
        return new Builder();
    }

    /**
     * Starts the accept loops. Relays are re-checked on every policy change.
     *
     * @param source the boundary's mediation source (taken once)
     */
    synchronized void start(NetworkMediationSource source) {
        if (this.source != null) {
            throw new SupervisorException("mediation was already started");
        }
        this.source = source;
        running = true;
        if (handoff != null && source instanceof LaneSource laned) {
            // Before the accept loop's first accept: the first announcement can already use the lane.
            laned.useLane(handoff, metrics, Optional.of(new LaneSource.Arrivals() {
                @Override
                public void tcp(PendingTcpOpen open) {
                    arrivedTcp(open);
                }

                @Override
                public void dns(PendingDnsQuery query) {
                    SandboxMediation.this.dns.arrived(query);
                }
            }));
        }
        policies.onChange(this::recheckAll);
        tcpLoop = Thread.ofPlatform().daemon().name("mediation-tcp-" + sandbox).start(this::acceptTcp);
        dnsLoop = Thread.ofPlatform().daemon().name("mediation-dns-" + sandbox).start(dns::acceptLoop);
    }

    /** @return whether both accept loops are running (the readiness signal of mediation) */
    boolean live() {
        return running && tcpLoop != null && tcpLoop.isAlive() && dnsLoop.isAlive();
    }

    private void acceptTcp() {
        try {
            while (running) {
                Optional<PendingTcpOpen> next = source.acceptTcp(ACCEPT_POLL);
                if (next.isEmpty()) {
                    continue;
                }
                arrivedTcp(next.get());
            }
        } catch (BackendException e) {
            // TERMINATED: the boundary is gone; the loop ends and readiness drops.
        } finally {
            running = false;
        }
    }

    /**
     * One connect to decide, from the accept loop or straight from the lane's reader: admitted
     * (a relay slot taken) or refused here. An admitted one is decided and audited on a virtual
     * thread of its own, so the caller never blocks on a decision; a refused one too, while
     * fewer than {@link #MAX_REFUSING} refusals are under way ({@link #refuse}).
     */
    private void arrivedTcp(PendingTcpOpen open) {
        if (!running) {
            refuse(() -> denyQuietly(open, DenyReason.MEDIATION_UNAVAILABLE));
        } else if (!relaySlots.tryAcquire()) {
            refuse(() -> {
                auditSupervisor("connect", open.identity(), null, open.destination(), "deny", "EXHAUSTED",
                        maxActiveRelays + " relays are open, the most allowed", 0);
                denyQuietly(open, DenyReason.EXHAUSTED);
            });
        } else {
            Thread.ofVirtual().name("mediation-open").start(() -> {
                try {
                    handle(open);
                } finally {
                    relaySlots.release();
                }
            });
        }
    }

    /**
     * Runs a refusal on a virtual thread of its own while fewer than {@link #MAX_REFUSING} run,
     * else on the caller's thread: what an admission bound turned away must not itself be
     * unbounded.
     */
    void refuse(Runnable refusal) {
        if (!refusing.tryAcquire()) {
            refusal.run();
            return;
        }
        try {
            Thread.ofVirtual().name("mediation-refuse").start(() -> {
                try {
                    refusal.run();
                } finally {
                    refusing.release();
                }
            });
        } catch (RuntimeException | OutOfMemoryError e) {
            refusing.release();
            refusal.run();
        }
    }

    /** @return refusals running on threads of their own (at most {@link #MAX_REFUSING}) */
    int refusingThreads() {
        return MAX_REFUSING - refusing.availablePermits();
    }

    private void handle(PendingTcpOpen open) {
        long started = System.nanoTime();
        TcpDestination to = open.destination();
        IdentityResolution who = open.identity();
        Optional<PolicyGeneration> generation = policies.current();
        long number = policies.number();
        Destination where = Destination.of(to.address(), to.port());
        Decision decision;
        if (generation.isEmpty()) {
            decision = policies.denyAll();
        } else {
            decision = null;
            List<DnsPins.Pin> named = pins.namesFor(to.address());
            if (named.isEmpty()) {
                decision = generation.get().decideConnection(who, where);
            }
            for (DnsPins.Pin pin : named) {
                // An alias is dialled at the operator's target, also when the workload dialled its stand-in.
                Destination d = pin.aliased() ? Destination.aliased(pin.name(), aliases.lookup(pin.name())
                        .orElse(to.address()), to.port())
                        : Destination.of(pin.name(), to.address(), to.port());
                Decision c = generation.get().decideConnection(who, d);
                if (decision == null || (!decision.allowed() && c.allowed())) {
                    decision = c;
                    where = d;
                }
                if (c.allowed()) {
                    break;
                }
            }
        }
        if (decision instanceof Decision.Deny deny) {
            metrics.decision("connect", "deny", System.nanoTime() - started);
            denyQuietly(open, deny.cause().isolationReason());
            audit(AuditLine.of(clock.instant(), sandbox.value(), "connect", number).decision(deny).identity(who)
                    .destination(where.host().orElse(null), where.address().orElse(to.address()), to.port()));
            return;
        }
        Decision.Allow allow = (Decision.Allow) decision;
        if (allow.inspection() != Inspection.HTTP && handoff != null && open instanceof HandoffCapable capable
                && capable.handoffToken().isPresent()) {
            relayNatively(open, capable, who, where, to, allow, number, started);
            return;
        }
        Socket upstream;
        try {
            upstream = dial(new TcpDestination(where.address().orElse(to.address()), to.port()));
        } catch (IOException e) {
            boolean timeout = e instanceof SocketTimeoutException;
            metrics.decision("connect", "upstream_failed", System.nanoTime() - started);
            denyQuietly(open, timeout ? DenyReason.TIMEOUT : DenyReason.MEDIATION_UNAVAILABLE);
            audit(AuditLine.of(clock.instant(), sandbox.value(), "connect", number).decision(allow)
                    .field("upstream", timeout ? "timeout" : "failed").identity(who)
                    .destination(where.host().orElse(null), where.address().orElse(to.address()), to.port()));
            return;
        }
        metrics.decision("connect", "allow", System.nanoTime() - started);
        ByteChannel channel;
        try {
            channel = open.allow();
        } catch (BackendException e) {
            LiveRelay.closeQuietly(upstream);
            return;
        } finally {
            // After the decision went out: the caller's connect does not wait for the audit line.
            audit(AuditLine.of(clock.instant(), sandbox.value(), "connect", number).decision(allow)
                    .field("upstream", "connected").identity(who)
                    .destination(where.host().orElse(null), where.address().orElse(to.address()), to.port()));
        }
        LiveRelay relay = new LiveRelay(new Admission(who, where, allow), number, channel, upstream);
        relays.add(relay);
        metrics.relayOpened();
        try {
            if (policies.number() != number) {
                // A reload slipped in between the decision and the registration: re-check now.
                recheck(relay, policies.current());
            }
            if (!relay.closed()) {
                if (allow.inspection() == Inspection.HTTP) {
                    inspect(relay, channel, upstream, where);
                } else {
                    OpaqueRelay.run(relay, channel, upstream, metrics, RELAY_BUFFER_BYTES);
                }
            }
        } catch (IOException | RuntimeException e) {
            // The relay ends on any error; both sides are closed below.
        } finally {
            relays.remove(relay);
            relay.close();
            metrics.relayClosed();
        }
    }

    /**
     * Relays an opaque connection outside both JVMs' byte paths: the upstream socket is dialled
     * raw, the runtime passes the workload's relay socket over the descriptor lane, and
     * {@link SpliceRelay} moves the bytes between the two kernel sockets. Admission, audit,
     * revocation and the relay bound are the same as for a relay over the link.
     */
    private void relayNatively(PendingTcpOpen open, HandoffCapable capable, IdentityResolution who, Destination where,
                               TcpDestination to, Decision.Allow allow, long number, long started) {
        InetAddress address = where.address().orElse(to.address());
        OwnedFd upstream;
        try {
            upstream = TcpSockets.dial(new InetSocketAddress(address, to.port()), connectTimeout);
        } catch (LinuxException e) {
            boolean timeout = e.errno() == ETIMEDOUT;
            metrics.decision("connect", "upstream_failed", System.nanoTime() - started);
            denyQuietly(open, timeout ? DenyReason.TIMEOUT : DenyReason.MEDIATION_UNAVAILABLE);
            audit(AuditLine.of(clock.instant(), sandbox.value(), "connect", number).decision(allow)
                    .field("upstream", timeout ? "timeout" : "failed").identity(who)
                    .destination(where.host().orElse(null), address, to.port()));
            return;
        }
        metrics.decision("connect", "allow", System.nanoTime() - started);
        byte[] token = capable.handoffToken().orElseThrow();
        java.util.concurrent.CompletableFuture<OwnedFd> arriving;
        try {
            arriving = handoff.expect(token);
        } catch (SupervisorException e) {
            upstream.close();
            denyQuietly(open, DenyReason.EXHAUSTED);
            audit(AuditLine.of(clock.instant(), sandbox.value(), "connect", number).decision(allow)
                    .field("upstream", "handoff_refused").identity(who)
                    .destination(where.host().orElse(null), address, to.port()));
            return;
        }
        OwnedFd workload;
        // Recorded once the relay runs (or the hand-off failed): the caller's first bytes do not wait for it.
        Runnable connected = () -> audit(AuditLine.of(clock.instant(), sandbox.value(), "connect", number).decision(allow)
                .field("upstream", "connected").field("relay", "native").identity(who)
                .destination(where.host().orElse(null), address, to.port()));
        try {
            capable.allowHandoff().whenComplete((ended, failed) -> {
                if (failed != null) {
                    arriving.completeExceptionally(failed);
                }
            });
            workload = arriving.get(HANDOFF_WAIT.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
        } catch (BackendException | java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException
                 | java.util.concurrent.CancellationException e) {
            handoff.forget(token);
            upstream.close();
            connected.run();
            return;
        } catch (InterruptedException e) {
            handoff.forget(token);
            upstream.close();
            connected.run();
            Thread.currentThread().interrupt();
            return;
        }
        if (!TcpSockets.isTcp(workload.value())) {
            // Only the runtime can send here, and it sends TCP sockets: anything else ends the connection.
            LOGGER.log(System.Logger.Level.WARNING, "the runtime handed over something that is not a TCP socket: closed");
            workload.close();
            upstream.close();
            connected.run();
            return;
        }
        java.util.concurrent.CompletableFuture<SpliceRelay.Outcome> done = new java.util.concurrent.CompletableFuture<>();
        SpliceRelay.Handle spliced;
        try {
            spliced = splice.add(workload, upstream, done::complete);
        } catch (LinuxException e) {
            // Refused (the bound, or the relay closed): both sockets are closed, the workload sees its connection end.
            return;
        } finally {
            connected.run();
        }
        LiveRelay relay = new LiveRelay(new Admission(who, where, allow), number, spliced::close, () -> { });
        relays.add(relay);
        metrics.relayOpened();
        try {
            if (policies.number() != number) {
                recheck(relay, policies.current());
            }
            SpliceRelay.Outcome outcome = done.join();
            metrics.bytesOut(outcome.bytesAtoB());
            metrics.bytesIn(outcome.bytesBtoA());
        } finally {
            relays.remove(relay);
            relay.close();
            metrics.relayClosed();
        }
    }

    /**
     * Relays an inspected connection: plain HTTP as is, TLS (recognised by its first byte, a
     * handshake record) terminated with a leaf of the sandbox's CA and re-encrypted upstream
     * with normal verification of the admitted name.
     */
    private void inspect(LiveRelay relay, ByteChannel channel, Socket upstream, Destination where) throws IOException {
        PushbackInputStream in = new PushbackInputStream(channel.input(), 1);
        int first = in.read();
        if (first < 0) {
            return;
        }
        in.unread(first);
        if (first != TLS_HANDSHAKE_RECORD) {
            new HttpRelay(this, relay, in, channel.output(), upstream.getInputStream(), upstream.getOutputStream(), false).run();
            // Ended in order: the workload reads every byte relayed, then its end of stream.
            channel.output().close();
            return;
        }
        String name = where.host().orElseGet(() -> where.address().orElseThrow().getHostAddress());
        SSLEngine engine = authority.serverContext(name).createSSLEngine();
        engine.setUseClientMode(false);
        TlsStreams workloadTls = new TlsStreams(engine, in, channel.output());
        workloadTls.handshake();
        SSLSocket upstreamTls;
        try {
            upstreamTls = (SSLSocket) upstreamTls().getSocketFactory().createSocket(upstream, name, where.port(), true);
            SSLParameters p = upstreamTls.getSSLParameters();
            p.setEndpointIdentificationAlgorithm("HTTPS");
            if (where.host().isPresent()) {
                p.setServerNames(List.of(new SNIHostName(name)));
            }
            upstreamTls.setSSLParameters(p);
            upstream.setSoTimeout((int) connectTimeout.toMillis());
            upstreamTls.startHandshake();
            upstream.setSoTimeout(0);
        } catch (IOException | SupervisorException e) {
            HttpRelay failed = new HttpRelay(this, relay, workloadTls.input(), workloadTls.output(), InputStream.nullInputStream(),
                    OutputStream.nullOutputStream(), true);
            audit(AuditLine.of(clock.instant(), sandbox.value(), "tls", policies.number())
                    .outcome("deny", "UPSTREAM_TLS", "TLS to " + name + " failed verification or handshake")
                    .identity(relay.admission().identity()).destination(where.host().orElse(null),
                            where.address().orElse(null), where.port()));
            failed.refuseAll(502, "UPSTREAM_TLS", "TLS to " + name + " failed: " + e.getMessage());
            workloadTls.closeOutbound();
            channel.output().close();
            return;
        }
        new HttpRelay(this, relay, workloadTls.input(), workloadTls.output(), upstreamTls.getInputStream(),
                upstreamTls.getOutputStream(), true).run();
        // Only an orderly end says close_notify, behind every record relayed; an error cuts instead.
        workloadTls.closeOutbound();
        channel.output().close();
    }

    /**
     * The upstream TLS context, built once on first use: parsing the system trust anchors costs a
     * cold JVM ~0.2 s of CPU, which every sandbox start would pay while the two JVMs share the
     * host's cores, though most sandboxes never inspect a TLS connection.
     *
     * @throws SupervisorException if it cannot be built (the connection is then refused)
     */
    private SSLContext upstreamTls() {
        synchronized (upstreamTlsLock) {
            if (upstreamTlsContext == null) {
                upstreamTlsContext = Objects.requireNonNull(upstreamTrust.get(), "upstream TLS context");
            }
            return upstreamTlsContext;
        }
    }

    private static SSLContext defaultUpstreamTls() {
        try {
            return SSLContext.getDefault();
        } catch (NoSuchAlgorithmException e) {
            throw new SupervisorException("no default TLS context for upstream connections", e);
        }
    }

    private Socket dial(TcpDestination to) throws IOException {
        Socket s = new Socket();
        try {
            s.setTcpNoDelay(true);
            s.connect(new InetSocketAddress(to.address(), to.port()), (int) connectTimeout.toMillis());
            return s;
        } catch (IOException e) {
            s.close();
            throw e;
        }
    }

    private static void denyQuietly(PendingTcpOpen open, DenyReason reason) {
        try {
            open.deny(reason);
        } catch (BackendException e) {
            // Already decided or the caller went away: nothing was admitted.
        }
    }

    private void recheckAll(Optional<PolicyGeneration> now) {
        for (LiveRelay r : relays) {
            recheck(r, now);
        }
    }

    private void recheck(LiveRelay relay, Optional<PolicyGeneration> now) {
        String reason;
        if (now.isEmpty()) {
            reason = policies.denyAll().reason();
        } else {
            Decision d = now.get().recheck(relay.admission());
            if (d.allowed()) {
                return;
            }
            reason = d.reason();
        }
        relay.revoke(reason);
        Destination where = relay.admission().destination();
        audit(AuditLine.of(clock.instant(), sandbox.value(), "revoke", policies.number())
                .outcome("deny", "REVOKED", reason).identity(relay.admission().identity())
                .destination(where.host().orElse(null), where.address().orElse(null), where.port()));
    }

    void auditRequest(LiveRelay relay, Destination where, HttpHead request, Decision decision, String outcome, String cause,
                      String reason, long nanos) {
        AuditLine line = AuditLine.of(clock.instant(), sandbox.value(), "request", policies.number());
        if (decision != null) {
            line.decision(decision);
        } else {
            line.outcome(outcome, cause, reason);
        }
        if (request != null) {
            line.request(request.method(), request.target());
        }
        line.identity(relay.admission().identity())
                .destination(where.host().orElse(null), where.address().orElse(null), where.port());
        metrics.decision("request", decision != null ? (decision.allowed() ? "allow" : "deny") : outcome, nanos);
        audit(line);
    }

    void auditSupervisor(String kind, IdentityResolution who, String host, TcpDestination to, String outcome,
                         String cause, String reason, long nanos) {
        metrics.decision(kind, outcome, nanos);
        audit(AuditLine.of(clock.instant(), sandbox.value(), kind, policies.number()).outcome(outcome, cause, reason)
                .identity(who).destination(host, to == null ? null : to.address(), to == null ? 0 : to.port()));
    }

    void audit(AuditLine line) {
        try {
            audit.record(line.write());
        } catch (RuntimeException e) {
            // A failing sink must not turn a denial into an allow or kill a relay; it is the sink's to report.
        }
    }

    boolean liveLoop() {
        return running;
    }

    NetworkMediationSource source() {
        return source;
    }

    void loopEnded() {
        running = false;
    }

    /** @return the sandbox's interception CA certificate, PEM, for the runtime to install in the workload's trust store */
    String interceptionCaPem() {
        return authority.caCertificatePem();
    }

    InterceptionAuthority authority() {
        return authority;
    }

    /**
     * @return the connections holding a relay slot: live relays and those still being opened or
     *         closed (the bound admission counts; a relay leaves the live set before its slot frees)
     */
    int activeRelays() {
        return maxActiveRelays - relaySlots.availablePermits();
    }

    PolicyInstallation policies() {
        return policies;
    }

    DnsPins pins() {
        return pins;
    }

    HostAliases aliases() {
        return aliases;
    }

    Credentials credentials() {
        return credentials;
    }

    MediationMetrics metrics() {
        return metrics;
    }

    /** @return the DNS plane, for tests of its bounds */
    DnsPlane dnsPlane() {
        return dns;
    }

    Clock clock() {
        return clock;
    }

    String sandbox() {
        return sandbox.value();
    }

    int relayBufferBytes() {
        return RELAY_BUFFER_BYTES;
    }

    /** @return native relays open now (for leak checks); 0 without a descriptor lane */
    int nativeRelays() {
        return splice == null ? 0 : splice.open();
    }

    /** @return handed-off decisions still waiting for their socket (for leak checks) */
    int handoffsWaiting() {
        return handoff == null ? 0 : handoff.waiting();
    }

    /** Stops both loops, closes the source (pending requests fail closed) and every relay. Idempotent. */
    @Override
    public void close() {
        running = false;
        NetworkMediationSource s = source;
        if (s != null) {
            s.close();
        }
        for (LiveRelay r : relays) {
            r.close();
        }
        join(tcpLoop);
        join(dnsLoop);
        if (splice != null) {
            splice.close();
        }
        if (handoff != null) {
            handoff.close();
        }
        credentials.destroy();
    }

    private static void join(Thread t) {
        if (t != null) {
            try {
                t.join(ACCEPT_POLL.toMillis() * 4);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** Trusted configuration of one sandbox's mediation. */
    static final class Builder {
        private SandboxId sandbox;
        private PolicyInstallation policies;
        private HostAliases aliases = HostAliases.none();
        private HostResolver resolver = HostResolver.system();
        private Credentials credentials = Credentials.none();
        private AuditSink audit = AuditSink.logger();
        private MediationMetrics metrics = new MediationMetrics();
        private Clock clock = Clock.systemUTC();
        private Duration connectTimeout = CONNECT_TIMEOUT;
        private int maxActiveRelays = MAX_ACTIVE_RELAYS;
        private int maxDnsInFlight = DnsPlane.MAX_IN_FLIGHT;
        private Supplier<SSLContext> upstreamTls;
        private HandoffListener handoff;

        private Builder() {
        }

        /**
         * The descriptor lane beside a Unix link: opaque connections announced with a token are
         * then relayed natively. The mediation owns it from here (closes it).
         */
        Builder handoff(HandoffListener v) {
            handoff = Objects.requireNonNull(v);
            return this;
        }

        Builder sandbox(SandboxId v) {
            sandbox = v;
            return this;
        }

        Builder policies(PolicyInstallation v) {
            policies = v;
            return this;
        }

        Builder aliases(HostAliases v) {
            aliases = Objects.requireNonNull(v);
            return this;
        }

        Builder resolver(HostResolver v) {
            resolver = Objects.requireNonNull(v);
            return this;
        }

        Builder credentials(Credentials v) {
            credentials = Objects.requireNonNull(v);
            return this;
        }

        Builder audit(AuditSink v) {
            audit = Objects.requireNonNull(v);
            return this;
        }

        Builder metrics(MediationMetrics v) {
            metrics = Objects.requireNonNull(v);
            return this;
        }

        Builder clock(Clock v) {
            clock = Objects.requireNonNull(v);
            return this;
        }

        /** At most {@link #CONNECT_TIMEOUT}. */
        Builder connectTimeout(Duration v) {
            if (v.isNegative() || v.isZero() || v.compareTo(CONNECT_TIMEOUT) > 0) {
                throw new SupervisorException("the connect timeout must be in (0, " + CONNECT_TIMEOUT + "]");
            }
            connectTimeout = v;
            return this;
        }

        /** At most {@link #MAX_ACTIVE_RELAYS}; lower for a small sandbox (and for tests at the bound). */
        Builder maxActiveRelays(int v) {
            if (v < 1 || v > MAX_ACTIVE_RELAYS) {
                throw new SupervisorException("maxActiveRelays must be in 1.." + MAX_ACTIVE_RELAYS);
            }
            maxActiveRelays = v;
            return this;
        }

        /** At most {@link DnsPlane#MAX_IN_FLIGHT}. */
        Builder maxDnsInFlight(int v) {
            if (v < 1 || v > DnsPlane.MAX_IN_FLIGHT) {
                throw new SupervisorException("maxDnsInFlight must be in 1.." + DnsPlane.MAX_IN_FLIGHT);
            }
            maxDnsInFlight = v;
            return this;
        }

        /**
         * Trusted configuration only: the TLS context upstream certificates are verified with
         * (default: the JDK's, with its default trust store), made at the first inspected TLS
         * connection. Tests pass one trusting a test CA.
         */
        Builder upstreamTls(Supplier<SSLContext> v) {
            upstreamTls = Objects.requireNonNull(v);
            return this;
        }

        SandboxMediation build() {
            return new SandboxMediation(this);
        }
    }
}
