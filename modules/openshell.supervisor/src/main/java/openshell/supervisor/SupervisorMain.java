package openshell.supervisor;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.ServiceLoader;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import openshell.isolation.AgentSpec;
import openshell.isolation.BackendException;
import openshell.isolation.BackendRegistry;
import openshell.isolation.BoundBoundary;
import openshell.isolation.ExitStatus;
import openshell.isolation.IsolationBackend;
import openshell.isolation.NetworkMediationSource;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.ReadyBoundary;
import openshell.isolation.RunningBoundary;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.TopologyDescriptor;
import openshell.isolation.VerifiedTopologyDescriptor;
import openshell.isolation.WorkloadIdentity;
import openshell.isolation.WorkloadTrust;
import openshell.policy.Policy;
import openshell.policy.PolicyException;
import openshell.policy.PolicyGeneration;
import openshell.policy.WorkloadPaths;
import openshell.protocol.ImageModules;
import openshell.protocol.Initiator;
import openshell.protocol.LaunchBundles;
import openshell.protocol.LaunchRehearsal;
import openshell.protocol.ProtocolException;
import openshell.protocol.SupervisorBundle;
import openshell.protocol.Refusal;
import openshell.protocol.SupervisorEndpoint;
import openshell.protocol.SupervisorLink;
import openshell.protocol.TokenPair;
import openshell.protocol.TokenSlot;
import openshell.protocol.Transport;
import openshell.protocol.UnixPeerPolicy;
import openshell.supervisor.spi.GatewaySessionClient;

/**
 * The supervisor's entry point, as the process driver starts it on the host:
 * {@code --sandbox ID --generation N --channel SOCKET --bundle-stdin [--runtime-uid UID]
 * [--runtime-pid PID] [--admin-port P] [--audit-file FILE]}, the supervisor launch bundle on
 * standard input (a warm spare, started before its sandbox exists, gets {@code --late-arguments}
 * instead of the sandbox and generation, and reads them from standard input ahead of its bundle).
 * It validates the bundle and the policy, listens on the channel for the runtime
 * (runtime-initiated; only the runtime's uid may connect and, with {@code --runtime-pid}, only a
 * process descending from that pid, the one the driver started for the runtime), resolves {@code openshell-sandbox}@1 by exact name and
 * version through {@code ServiceLoader} (no fallback), runs attach, takes the mediation source,
 * starts {@code SandboxMediation} over it, confirms, starts the agent, starts the admin server on
 * loopback and prints one JSON readiness line on standard output. Audit lines go to standard
 * error (or the audit file). It exits with the agent's status (128 + signal when signalled), or
 * on SIGTERM after terminating the boundary first.
 *
 * <p>The bundle's operator host aliases and upstream trust anchors (trusted gateway configuration)
 * configure the mediation, which is built before attach: its per-sandbox interception CA goes into
 * the {@link SandboxContext}'s workload trust, which the backend installs in the workload's trust
 * store before the agent starts.
 */
public final class SupervisorMain {
    /** What a spare parses while it waits: every part of a policy a launch's parse meets. */
    static final String REHEARSAL_POLICY = """
            version: 1
            filesystem_policy:
              read_only: [/usr]
              read_write: [/tmp]
            network_policies:
              rehearsal:
                endpoints:
                  - host: rehearsal.invalid
                    ports: [443]
                    protocol: rest
                    rules:
                      - method: GET
                        path: /r
                binaries:
                  - path: /usr/bin/true
            """;
    /** Exit status for bad arguments, bundle or policy. */
    static final int EXIT_USAGE = 64;
    /** Exit status when the backend, attach, confirm or startAgent fails. */
    static final int EXIT_BOUNDARY_FAILED = 70;
    /** Longest wait for the runtime to dial in and attach. */
    static final Duration ATTACH_WAIT = Duration.ofSeconds(120);
    /** After the agent's exit, the longest wait for its last output lines to be handed to the gateway. */
    static final Duration AGENT_LOG_DRAIN = Duration.ofSeconds(5);
    /**
     * After the agent's exit, the longest wait for the gateway's execs to end and report their
     * exit; one still running then is ended with the sandbox.
     */
    static final Duration EXEC_DRAIN = Duration.ofSeconds(2);
    /** The backend this main drives: the OpenShell sandbox runtime, by exact name and version. */
    static final openshell.isolation.BackendKey BACKEND = OpenShellRuntimeBackend.KEY;

    /**
     * The line the driver and the tests wait for, keys in this order (they match its start), every
     * value escaped by the JSON library: a kernel string or id with quotes or newlines cannot forge it.
     */
    static String readyLine(int adminPort, String sandbox, long generation, String kernel, int controls,
                            long policyGeneration) {
        return AuditLine.JSON.createObjectBuilder().add("ready", true).add("admin", "http://127.0.0.1:" + adminPort)
                .add("sandbox", sandbox).add("generation", generation).add("backend", BACKEND.name() + "@" + BACKEND.version())
                .add("kernel", String.valueOf(kernel)).add("controls", controls).add("policyGeneration", policyGeneration)
                .build().toString();
    }

    private SupervisorMain() {
    }

    /**
     * A spare runs a launch's cold code once while it waits: the protocol's
     * ({@link openshell.protocol.LaunchRehearsal}), the policy parser and the backend lookup.
     */
    static void rehearse(PrintStream err) {
        try {
            openshell.protocol.LaunchRehearsal.run();
            Policy.parse(REHEARSAL_POLICY.getBytes(StandardCharsets.UTF_8));
            BackendRegistry.load();
        } catch (RuntimeException | LinkageError e) {
            // It only warms up: the real launch runs the same code and reports its own failures.
            err.println("openshell-supervisor: the warm spare's rehearsal failed: " + e);
        }
    }

    /**
     * The launch arguments.
     *
     * @param sandbox    the sandbox id
     * @param generation the runtime generation
     * @param channel    the socket the runtime dials
     * @param runtimeUid the runtime's host uid, the only peer admitted on the channel
     * @param runtimePid the process the driver started for the runtime: only it or a descendant may connect
     * @param adminPort  admin port on 127.0.0.1 (0: any)
     * @param auditFile  where audit lines go instead of standard error
     */
    record Arguments(String sandbox, long generation, Path channel, Optional<Long> runtimeUid, Optional<Long> runtimePid,
                     int adminPort, Optional<Path> auditFile) {
        static final String USAGE = "usage: --sandbox ID --generation N --channel SOCKET --bundle-stdin "
                + "[--runtime-uid UID] [--runtime-pid PID] [--admin-port P] [--audit-file FILE] (or --late-arguments "
                + "with --sandbox and --generation first on standard input)";

        /** The flag that makes the supervisor read {@link #LATE_OPTIONS} from standard input before its bundle. */
        static final String LATE = LaunchBundles.LATE_ARGUMENTS;
        /** What a warm spare learns only when it is given its sandbox. */
        static final Set<String> LATE_OPTIONS = Set.of("--sandbox", "--generation");

        /**
         * The command line, and with {@link #LATE} the late arguments read from {@code stdin}
         * (which then holds the bundle that follows them).
         */
        static Arguments read(List<String> args, InputStream stdin) throws IOException {
            return parse(LaunchBundles.withLateArguments(args, stdin, LATE_OPTIONS));
        }

        static Arguments parse(List<String> args) {
            Set<String> seen = new HashSet<>();
            String sandbox = null;
            Path channel = null;
            Long runtimeUid = null;
            Long runtimePid = null;
            Path audit = null;
            long generation = -1;
            int adminPort = 0;
            boolean stdinBundle = false;
            for (int i = 0; i < args.size(); i++) {
                String arg = args.get(i);
                if (!seen.add(arg)) {
                    throw new IllegalArgumentException(arg + " given twice");
                }
                if (arg.equals("--bundle-stdin")) {
                    stdinBundle = true;
                    continue;
                }
                if (i + 1 >= args.size()) {
                    throw new IllegalArgumentException(arg.startsWith("--") ? arg + " needs a value" : "unknown argument " + arg);
                }
                String value = args.get(++i);
                switch (arg) {
                    case "--sandbox" -> sandbox = value;
                    case "--generation" -> generation = number(arg, value);
                    case "--channel" -> channel = Path.of(value);
                    case "--runtime-uid" -> runtimeUid = number(arg, value);
                    case "--runtime-pid" -> runtimePid = number(arg, value);
                    case "--admin-port" -> adminPort = (int) number(arg, value);
                    case "--audit-file" -> audit = Path.of(value);
                    default -> throw new IllegalArgumentException("unknown argument " + arg);
                }
            }
            if (sandbox == null || channel == null || generation < 0 || !stdinBundle || adminPort > 65535) {
                throw new IllegalArgumentException(USAGE);
            }
            return new Arguments(sandbox, generation, channel, Optional.ofNullable(runtimeUid),
                    Optional.ofNullable(runtimePid), adminPort, Optional.ofNullable(audit));
        }

        private static long number(String arg, String value) {
            try {
                long n = Long.parseLong(value);
                if (n < 0) {
                    throw new NumberFormatException();
                }
                return n;
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(arg + " must be a non-negative number: " + value);
            }
        }
    }

    /**
     * Entry point.
     *
     * @param args see the class comment
     */
    public static void main(String[] args) {
        System.exit(run(List.of(args), System.in, System.out, System.err));
    }

    static int run(List<String> args, InputStream stdin, PrintStream out, PrintStream err) {
        Arguments arguments;
        SupervisorBundle bundle;
        PolicyInstallation policies;
        Credentials credentials;
        UnixPeerPolicy runtimePeer;
        try {
            ImageModules.check(Path.of(System.getProperty("java.home")));
        } catch (IOException e) {
            err.println("openshell-supervisor: refusing to start: " + e.getMessage());
            return EXIT_BOUNDARY_FAILED;
        }
        // The second core warms the bundle's, TLS's and Helidon's classes while this thread reads
        // and parses (nothing secret is involved: see LaunchRehearsal.primeAhead).
        LaunchRehearsal.primeAhead();
        try {
            if (args.contains(Arguments.LATE)) {
                rehearse(err);
                // A warm spare: started, and waiting for its sandbox (the driver reads this line).
                out.println(LaunchBundles.SPARE_WAITING);
                out.flush();
            }
            arguments = Arguments.read(args, stdin);
            runtimePeer = runtimePeer(arguments);
            byte[] bytes = LaunchBundles.read(stdin);
            try {
                bundle = LaunchBundles.supervisorBundle(bytes);
            } finally {
                Arrays.fill(bytes, (byte) 0);
            }
            if (!bundle.sandboxId().equals(arguments.sandbox()) || bundle.generation() != arguments.generation()) {
                throw new IllegalArgumentException("the launch bundle is for " + bundle.sandboxId() + "@"
                        + bundle.generation() + ", not " + arguments.sandbox() + "@" + arguments.generation());
            }
            // Policy paths that are symlinks in the workload's view (/usr/bin/python3) also match their
            // targets, which is what the kernel reports; seen through the runtime's root, which is the
            // workload's (its mount namespace). Without the runtime's pid, paths match as written.
            WorkloadPaths paths = arguments.runtimePid()
                    .map(pid -> WorkloadPaths.within(Path.of("/proc", Long.toString(pid), "root")))
                    .orElse(WorkloadPaths.asWritten());
            policies = new PolicyInstallation(PolicyGeneration.first(Policy.parse(bundle.policyYaml()), paths),
                    PolicyInstallation.OnInvalid.KEEP_LAST_VALID);
            List<CredentialProvider> providers = new ArrayList<>();
            for (LaunchBundles.Credential c : bundle.credentials()) {
                byte[] secret = c.secret();
                try {
                    providers.add(CredentialProvider.of(c.name(), secret, Set.copyOf(c.hosts())));
                } finally {
                    Arrays.fill(secret, (byte) 0);
                }
            }
            credentials = Credentials.of(providers);
        } catch (PolicyException e) {
            err.println("openshell-supervisor: the policy is invalid: " + (e.problems().isEmpty() ? e.getMessage()
                    : e.problems().stream().map(Object::toString).toList()));
            return EXIT_USAGE;
        } catch (IllegalArgumentException | IOException | ProtocolException | SupervisorException | BackendException e) {
            err.println("openshell-supervisor: " + e.getMessage());
            return EXIT_USAGE;
        }
        try {
            return new Session(arguments, runtimePeer, bundle, policies, credentials, out, err).run();
        } finally {
            credentials.destroy();
        }
    }

    /**
     * Who may dial the channel: the runtime's uid (this process's user without one) and, given its
     * pid, only processes under it. Made before anything starts, so a JVM that cannot read a peer's
     * pid, or a runtime already gone, fails the launch instead of weakening the check.
     */
    static UnixPeerPolicy runtimePeer(Arguments arguments) {
        UnixPeerPolicy user = arguments.runtimeUid().map(UnixPeerPolicy::uid)
                .orElse(UnixPeerPolicy.sameUser());
        return arguments.runtimePid().map(pid -> user.and(UnixPeerPolicy.processTree(pid))).orElse(user);
    }

    /** One run of the boundary, from listening to the agent's exit. */
    private static final class Session {
        private final Arguments arguments;
        private final UnixPeerPolicy runtimePeer;
        private final SupervisorBundle bundle;
        private final PolicyInstallation policies;
        private final Credentials credentials;
        private final PrintStream out;
        private final PrintStream err;
        private final AtomicReference<RunningBoundary> running = new AtomicReference<>();
        private final AtomicBoolean stopping = new AtomicBoolean();

        Session(Arguments arguments, UnixPeerPolicy runtimePeer, SupervisorBundle bundle, PolicyInstallation policies,
                Credentials credentials, PrintStream out, PrintStream err) {
            this.arguments = arguments;
            this.runtimePeer = runtimePeer;
            this.bundle = bundle;
            this.policies = policies;
            this.credentials = credentials;
            this.out = out;
            this.err = err;
        }

        int run() {
            TokenSlot tokens = new TokenSlot(bundle.tokens(), Clock.systemUTC());
            SupervisorEndpoint endpoint = SupervisorEndpoint.builder()
                    .transport(Transport.unix(arguments.channel()))
                    .initiator(Initiator.RUNTIME)
                    .pin(bundle.pin())
                    .tokens(tokens)
                    .peerPolicy(runtimePeer)
                    .build();
            AuditSink audit;
            PrintStream auditFile = null;
            try {
                if (arguments.auditFile().isPresent()) {
                    auditFile = new PrintStream(Files.newOutputStream(arguments.auditFile().get()), true, StandardCharsets.UTF_8);
                }
            } catch (IOException e) {
                err.println("openshell-supervisor: cannot open the audit file: " + e.getMessage());
                return EXIT_USAGE;
            }
            PrintStream auditOut = auditFile != null ? auditFile : err;
            // Every line also goes to the sandbox's log at the gateway once the session is open (bounded).
            AuditForward forward = new AuditForward();
            audit = line -> {
                synchronized (auditOut) {
                    auditOut.println(line);
                }
                forward.record(line);
            };
            Thread hook = Thread.ofPlatform().unstarted(this::terminate);
            Runtime.getRuntime().addShutdownHook(hook);
            SandboxMediation mediation = null;
            Optional<GatewaySessionClient.Session> gateway = Optional.empty();
            Optional<AgentLog> agentLog = Optional.empty();
            Thread attachWatch = null;
            long attachDeadline = System.nanoTime() + ATTACH_WAIT.toNanos();
            EarlyLink early = new EarlyLink();
            Runnable uninstall = OpenShellRuntimeBackend.installLaunchMaterial(d -> early.take(() -> connect(endpoint, attachDeadline)));
            try {
                endpoint.listen();
                arguments.runtimeUid().ifPresent(uid -> giveSocketTo(uid));
                // The runtime dials as soon as we listen: its link's TLS handshake runs while the
                // backend is loaded and the mediation's interception CA and upstream trust are built.
                early.start(() -> connect(endpoint, attachDeadline));
                // accept() has no timeout: closing the endpoint is what ends a wait for a runtime that never dials.
                AtomicBoolean attached = new AtomicBoolean();
                attachWatch = Thread.ofPlatform().daemon().name("attach-watch").start(() -> {
                    try {
                        Thread.sleep(ATTACH_WAIT);
                        if (!attached.get()) {
                            err.println("openshell-supervisor: the runtime did not attach within " + ATTACH_WAIT);
                            endpoint.close();
                        }
                    } catch (InterruptedException e) {
                        // attached in time
                    }
                });
                BackendRegistry registry = BackendRegistry.load();
                VerifiedTopologyDescriptor descriptor = registry.verify(TopologyDescriptor.of(BACKEND,
                        arguments.channel().toString().getBytes(StandardCharsets.UTF_8)), BACKEND);
                IsolationBackend backend = registry.backend(descriptor);
                SandboxId sandboxId = new SandboxId(bundle.sandboxId());
                // Built before attach: its interception CA is what the runtime adds to the workload's trust store.
                mediation = mediation(sandboxId, audit);
                SandboxContext context = new SandboxContext(sandboxId,
                        new SandboxSessionId(bundle.sessionId()), PolicySnapshot.of(1, bundle.policyYaml()),
                        new AgentSpec(bundle.agent().argv(), bundle.agent().environment(), bundle.agent().workingDirectory()),
                        new WorkloadIdentity(bundle.workloadUid(), bundle.workloadGid(), List.of(bundle.workloadGid())),
                        WorkloadTrust.ofPem(mediation.interceptionCaPem()));
                BoundBoundary bound = attach(backend, descriptor, context, attachDeadline);
                attached.set(true);
                attachWatch.interrupt();
                NetworkMediationSource source = bound.mediation();
                mediation.start(source);
                ReadyBoundary ready = bound.confirm();
                // Read before startAgent: a consumed ready handle answers nothing (the contract).
                openshell.isolation.ConfirmationEvidence evidence = ready.evidence();
                // A weaker confinement the policy allowed (landlock best_effort) is never silent: audit and log say so.
                evidence.controls().stream().filter(c -> c.mechanism().contains("NOT FULLY ENFORCED")).forEach(c -> {
                    audit.record(jakarta.json.Json.createObjectBuilder().add("time", java.time.Instant.now().toString())
                            .add("event", "confinement-degraded").add("sandbox", bundle.sandboxId()).add("control", c.name())
                            .add("mechanism", c.mechanism()).build().toString());
                    err.println("openshell-supervisor: WARNING: " + c.name() + ": " + c.mechanism());
                });
                if (!evidence.directEgressFailed()) {
                    ready.abort();
                    throw new BackendException(BackendException.Kind.FAILED,
                            "the runtime reports that direct egress did not fail: refusing to start the agent");
                }
                running.set(ready.startAgent());
                if (stopping.get()) {
                    running.get().terminate();
                }
                gateway = openGateway(tokens);
                gateway.ifPresent(g -> forward.attach(g::log));
                // The agent's output goes to the sandbox's log at the gateway (openshell sandbox logs).
                Optional<GatewaySessionClient.Session> logTo = gateway;
                agentLog = logTo.flatMap(g -> OpenShellRuntimeBackend.followAgent(running.get(), g::log));
                SandboxMediation live = mediation;
                try (AdminServer admin = AdminServer.start("127.0.0.1", arguments.adminPort(),
                        () -> running.get().running(), live)) {
                    out.println(readyLine(admin.port(), bundle.sandboxId(), bundle.generation(), evidence.kernel(),
                            evidence.controls().size(), policies.number()));
                    out.flush();
                    ExitStatus status = running.get().agent().awaitExit();
                    err.println("openshell-supervisor: the agent ended: " + status);
                    long[] lane = live.metrics().laneFrames();
                    err.println("openshell-supervisor: the descriptor lane carried " + lane[0] + " connects and "
                            + lane[1] + " DNS queries");
                    // Its last lines reach the gateway before the session closes (bounded).
                    agentLog.ifPresent(log -> awaitQuietly(log.ended(), AGENT_LOG_DRAIN));
                    // An exec that ended with the agent still reports its exit to its caller (bounded).
                    gateway.ifPresent(this::awaitExecsEnded);
                    return switch (status) {
                        case ExitStatus.Exited e -> e.code();
                        case ExitStatus.Signaled s -> 128 + s.signal();
                    };
                }
            } catch (BackendException | ProtocolException | SupervisorException e) {
                err.println("openshell-supervisor: " + (stopping.get() ? "stopped: " : "boundary failed: ") + e.getMessage());
                return EXIT_BOUNDARY_FAILED;
            } catch (Exception e) {
                err.println("openshell-supervisor: " + e);
                return EXIT_BOUNDARY_FAILED;
            } finally {
                uninstall.run();
                endpoint.close();
                early.discard();
                if (attachWatch != null) {
                    attachWatch.interrupt();
                }
                agentLog.ifPresent(AgentLog::close);
                forward.close();
                gateway.ifPresent(GatewaySessionClient.Session::close);
                terminate();
                if (mediation != null) {
                    mediation.close();
                }
                if (auditFile != null) {
                    auditFile.close();
                }
                try {
                    Runtime.getRuntime().removeShutdownHook(hook);
                } catch (IllegalStateException e) {
                    // Shutting down already: the hook runs terminate(), which is idempotent.
                }
            }
        }

        /**
         * The sandbox's mediation with the operator's trusted configuration from the bundle: host
         * aliases, the extra upstream trust anchors and the upstream resolver (never anything from
         * the policy).
         */
        private SandboxMediation mediation(SandboxId sandboxId, AuditSink audit) {
            SandboxMediation.Builder builder = SandboxMediation.builder().sandbox(sandboxId).policies(policies)
                    .credentials(credentials).audit(audit)
                    .aliases(HostAliases.of(bundle.hostAliases()))
                    .upstreamTls(() -> UpstreamTrust.context(bundle.upstreamAuthorities()));
            bundle.upstreamResolver().ifPresent(server -> builder.resolver(new UpstreamResolver(server)));
            handoffListener().ifPresent(builder::handoff);
            return builder.build();
        }

        /**
         * The descriptor lane beside the link, for the runtime to pass opaque connections'
         * sockets on (relayed natively then). Without one, everything is relayed over the link, so
         * a failure here costs speed, not safety: it is reported and the sandbox runs on.
         */
        private Optional<HandoffListener> handoffListener() {
            Optional<HandoffListener> listener = Optional.empty();
            try {
                int uid = arguments.runtimeUid().map(Long::intValue)
                        .orElse((Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid"));
                listener = HandoffListener.listen(arguments.channel(), uid);
                if (listener.isPresent() && arguments.runtimeUid().isPresent()) {
                    Files.setAttribute(listener.get().path(), "unix:uid", uid);
                    Files.setAttribute(listener.get().path(), "unix:gid", uid);
                }
                return listener;
            } catch (IOException | RuntimeException e) {
                listener.ifPresent(HandoffListener::close);
                err.println("openshell-supervisor: no descriptor lane, relays use the link: " + e.getMessage());
                return Optional.empty();
            }
        }

        /**
         * Takes the runtime's link. A link whose TLS handshake failed (the runtime gives up a
         * pre-auth link after its handshake timeout, and a cold JVM on a loaded machine can be that
         * slow) is dropped and the runtime's next dial taken, until the deadline.
         */
        private SupervisorLink connect(SupervisorEndpoint endpoint, long deadline) {
            while (true) {
                try {
                    return endpoint.connect();
                } catch (ProtocolException e) {
                    if (stopping.get() || System.nanoTime() > deadline || e.refusal() != Refusal.TRANSPORT_FAILED) {
                        throw e;
                    }
                    err.println("openshell-supervisor: a runtime link failed before it was up (" + e.getMessage()
                            + "); taking the next one");
                }
            }
        }

        /**
         * Attach, taking the runtime's next link while a link dies before its first call is
         * served (UNAVAILABLE): the runtime closes a link that is not authenticated within its
         * handshake timeout, and redials.
         */
        private BoundBoundary attach(IsolationBackend backend, VerifiedTopologyDescriptor descriptor,
                                     SandboxContext context, long deadline) {
            while (true) {
                try {
                    return backend.attach(descriptor, context);
                } catch (BackendException e) {
                    if (stopping.get() || System.nanoTime() > deadline || e.kind() != BackendException.Kind.UNAVAILABLE) {
                        throw e;
                    }
                    err.println("openshell-supervisor: attach failed (" + e.getMessage() + "); retrying on the next link");
                }
            }
        }

        /**
         * The runtime's first link, taken from the endpoint on its own thread as soon as the
         * supervisor listens, so its TLS handshake overlaps the set-up before attach. Attach takes
         * it once; a retry after a link that died takes the endpoint's next one on the caller's
         * thread. A first link nobody took is closed.
         */
        private static final class EarlyLink {
            private final java.util.concurrent.CompletableFuture<SupervisorLink> first = new java.util.concurrent.CompletableFuture<>();
            private final AtomicBoolean taken = new AtomicBoolean();

            void start(java.util.function.Supplier<SupervisorLink> connect) {
                Thread.ofVirtual().name("first-link").start(() -> {
                    try {
                        first.complete(connect.get());
                    } catch (RuntimeException | Error e) {
                        first.completeExceptionally(e);
                    }
                });
            }

            SupervisorLink take(java.util.function.Supplier<SupervisorLink> next) {
                if (!taken.compareAndSet(false, true)) {
                    return next.get();
                }
                try {
                    return first.join();
                } catch (java.util.concurrent.CompletionException e) {
                    // What connect() threw, as if it had been called here.
                    if (e.getCause() instanceof RuntimeException r) {
                        throw r;
                    }
                    if (e.getCause() instanceof Error r) {
                        throw r;
                    }
                    throw e;
                }
            }

            /** Closes the first link if attach never took it (a set-up step before attach failed). */
            void discard() {
                if (taken.compareAndSet(false, true)) {
                    first.thenAccept(SupervisorLink::close);
                }
            }
        }

        /** terminateBoundary first, whatever ends the supervisor (agent exit, SIGTERM, failure). */
        private void terminate() {
            stopping.set(true);
            RunningBoundary r = running.get();
            if (r != null) {
                try {
                    r.terminate();
                } catch (RuntimeException e) {
                    err.println("openshell-supervisor: terminateBoundary failed: " + e.getMessage());
                }
            }
        }

        private void giveSocketTo(long uid) {
            try {
                if (!root()) {
                    // A supervisor that is not root (a container's nobody, the Docker driver's) cannot give the
                    // socket away; it lets every local user connect instead. The peer is still admitted only
                    // by its uid (SO_PEERCRED) and the runtime still proves itself by the launch's pinned TLS.
                    Files.setPosixFilePermissions(arguments.channel(), java.nio.file.attribute.PosixFilePermissions
                            .fromString("rw-rw-rw-"));
                    return;
                }
                // The runtime runs as the sandbox's mapped root: it must be able to connect.
                Files.setAttribute(arguments.channel(), "unix:uid", (int) uid);
                Files.setAttribute(arguments.channel(), "unix:gid", (int) uid);
            } catch (IOException e) {
                throw new SupervisorException("cannot give the channel " + arguments.channel() + " to uid " + uid + ": "
                        + e.getMessage());
            }
        }

        /** Whether this process runs as root (the owner of {@code /proc/self} is the effective uid). */
        private static boolean root() throws IOException {
            return ((Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid")) == 0;
        }

        private void awaitExecsEnded(GatewaySessionClient.Session session) {
            try {
                if (!session.awaitExecsEnded(EXEC_DRAIN)) {
                    err.println("openshell-supervisor: execs of the gateway still ran " + EXEC_DRAIN.toMillis()
                            + " ms after the agent ended; they end with the sandbox");
                }
            } catch (InterruptedException e) {
                // Stopping: the sandbox ends now, its execs with it.
                Thread.currentThread().interrupt();
            }
        }

        private Optional<GatewaySessionClient.Session> openGateway(TokenSlot tokens) {
            if (bundle.gatewayEndpoint().isEmpty()) {
                return Optional.empty();
            }
            Optional<GatewaySessionClient> client = ServiceLoader.load(GatewaySessionClient.class).findFirst();
            if (client.isEmpty()) {
                err.println("openshell-supervisor: the launch names gateway endpoint " + bundle.gatewayEndpoint().get()
                        + " but no gateway session client is installed; running on the bundle's policy and tokens only");
                return Optional.empty();
            }
            GatewaySessionClient.Target target = new GatewaySessionClient.Target(URI.create(bundle.gatewayEndpoint().get()),
                    bundle.sandboxId(), bundle.generation(), tokens.current().gatewayToken());
            return Optional.of(client.get().open(target, new GatewaySessionClient.Callback() {
                @Override
                public GatewaySessionClient.Revision applyPolicy(byte[] policyYaml) {
                    ReloadReport report = policies.reload(policyYaml);
                    return new GatewaySessionClient.Revision(report.outcome() == ReloadReport.Outcome.LOADED,
                            report.generation(), report.reasons());
                }

                @Override
                public void refreshTokens(String gatewayToken, String sandboxToken, long credentialEpoch,
                                          java.time.Instant expiresAt) {
                    tokens.refresh(new TokenPair(gatewayToken, sandboxToken, credentialEpoch, expiresAt));
                }

                @Override
                public openshell.isolation.ExecSession exec(openshell.isolation.ExecSpec spec) {
                    // Only through the active backend's running boundary (invariant 4); before
                    // startAgent there is none and the gateway gets a clear refusal.
                    RunningBoundary boundary = running.get();
                    if (boundary == null) {
                        throw new BackendException(BackendException.Kind.UNAVAILABLE, "the agent has not started");
                    }
                    return boundary.exec().exec(spec);
                }

                @Override
                public openshell.isolation.ByteChannel forward(openshell.isolation.LoopbackTarget target) {
                    // Through the running boundary only, to its own loopback (LoopbackTarget refuses any other host).
                    RunningBoundary boundary = running.get();
                    if (boundary == null) {
                        throw new BackendException(BackendException.Kind.UNAVAILABLE, "the agent has not started");
                    }
                    return boundary.portForward().connect(target);
                }
            }));
        }
    }

    private static void awaitQuietly(java.util.concurrent.CompletableFuture<Void> done, Duration wait) {
        try {
            done.get(wait.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.TimeoutException | java.util.concurrent.ExecutionException e) {
            // the lines not handed on by now stay in the runtime's journal until it ends
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

}
