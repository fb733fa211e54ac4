package openshell.supervisor;

import com.google.protobuf.ByteString;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import openshell.isolation.BackendException;
import openshell.isolation.BackendKey;
import openshell.isolation.BoundBoundary;
import openshell.isolation.BoundaryExec;
import openshell.isolation.BoundaryPortForward;
import openshell.isolation.BoundaryProcess;
import openshell.isolation.ConfirmationEvidence;
import openshell.isolation.ExecSession;
import openshell.isolation.ExecSpec;
import openshell.isolation.ExitStatus;
import openshell.isolation.IsolationBackend;
import openshell.isolation.NetworkMediationSource;
import openshell.isolation.ProcessSignal;
import openshell.isolation.ReadyBoundary;
import openshell.isolation.RunningBoundary;
import openshell.isolation.SandboxContext;
import openshell.isolation.TerminalSize;
import openshell.isolation.VerifiedTopologyDescriptor;
import openshell.isolation.spi.IsolationBackendProvider;
import openshell.isolation.spi.LinearHandle;
import openshell.protocol.CreditedStream;
import openshell.protocol.ProtocolException;
import openshell.protocol.SupervisorLink;
import openshell.protocol.wire.AttachRequest;
import openshell.protocol.wire.ConfirmRequest;
import openshell.protocol.wire.ConfirmResult;
import openshell.protocol.wire.ExecRequest;
import openshell.protocol.wire.ProcessInput;
import openshell.protocol.wire.PortForwardRequest;
import openshell.protocol.wire.ProcessOutput;
import openshell.protocol.wire.ResizeRequest;
import openshell.protocol.wire.SignalRequest;
import openshell.protocol.wire.StartAgentRequest;
import openshell.protocol.wire.TerminateBoundaryRequest;
import openshell.protocol.wire.TerminateRequest;
import openshell.protocol.wire.WaitRequest;
import openshell.protocol.wire.WaitResult;

/**
 * The Isolation Backend for the OpenShell sandbox runtime ({@code openshell-sandbox}, version
 * 1): every step of the contract is a Sandbox Protocol call on one {@link SupervisorLink}.
 * Where the link comes from is the supervisor's launch material (the pinned CA, the token slot,
 * the channel), which the backend never reads from a descriptor a workload could influence.
 */
public final class OpenShellRuntimeBackend implements IsolationBackend {
    /** The registered name and version. */
    public static final BackendKey KEY = new BackendKey("openshell-sandbox", 1);
    /** Deadline of every control call but Wait (which takes the caller's timeout). */
    static final Duration CALL_DEADLINE = Duration.ofSeconds(30);
    /** How much sooner than its deadline a wait asks the runtime to answer "still running" (at most a quarter of it). */
    static final Duration WAIT_ANSWER_MARGIN = Duration.ofSeconds(1);
    /**
     * Deadline of startAgent and exec: the runtime may wait for a launcher through two steps of
     * its own bound (ProcessTree.LAUNCH_WAIT, 60 s each) before the process exists.
     */
    static final Duration START_DEADLINE = Duration.ofSeconds(150);
    /** Links tried for one attach: each died before the runtime served it (TLS failed, or UNAVAILABLE); it redials. */
    static final int MAX_ATTACH_ATTEMPTS = 5;

    private final Function<VerifiedTopologyDescriptor, SupervisorLink> links;

    OpenShellRuntimeBackend(Function<VerifiedTopologyDescriptor, SupervisorLink> links) {
        this.links = Objects.requireNonNull(links);
    }

    /**
     * A backend whose links come from the supervisor's launch material.
     *
     * @param links opens the one link to the runtime of a verified descriptor (TLS up, tokens attached)
     * @return the backend
     */
    public static OpenShellRuntimeBackend over(Function<VerifiedTopologyDescriptor, SupervisorLink> links) {
        return new OpenShellRuntimeBackend(links);
    }

    /** The launch material the supervisor's main installed: how to open the link to its runtime. */
    private static final AtomicReference<Function<VerifiedTopologyDescriptor, SupervisorLink>> INSTALLED =
            new AtomicReference<>();

    /**
     * Installs the launch material of this supervisor process (one sandbox per process): the
     * backends the {@link Provider} creates open their link with it. Only {@code SupervisorMain}
     * calls this, after validating its launch bundle (and the black-box conformance suite, which
     * plays the supervisor, through a command-line export: the package is not exported).
     *
     * @param links opens the one link to the runtime (TLS pinned, tokens attached)
     * @return uninstalls it again
     */
    public static Runnable installLaunchMaterial(Function<VerifiedTopologyDescriptor, SupervisorLink> links) {
        Objects.requireNonNull(links);
        if (!INSTALLED.compareAndSet(null, links)) {
            throw new SupervisorException("launch material is already installed in this supervisor");
        }
        return () -> INSTALLED.compareAndSet(links, null);
    }

    /**
     * The provider {@code ServiceLoader} finds. Its backends open their link with the launch
     * material {@code SupervisorMain} installed; without it (a process that is not a supervisor
     * main), attach fails UNAVAILABLE instead of guessing.
     */
    public static final class Provider implements IsolationBackendProvider {
        /** Creates the provider (ServiceLoader). */
        public Provider() {
        }

        @Override
        public BackendKey key() {
            return KEY;
        }

        @Override
        public IsolationBackend create() {
            return new OpenShellRuntimeBackend(descriptor -> {
                Function<VerifiedTopologyDescriptor, SupervisorLink> links = INSTALLED.get();
                if (links == null) {
                    throw new BackendException(BackendException.Kind.UNAVAILABLE,
                            "no supervisor launch material installed for " + KEY + " (only the supervisor main has it)");
                }
                return links.apply(descriptor);
            });
        }
    }

    @Override
    public BackendKey key() {
        return KEY;
    }

    @Override
    public BoundBoundary attach(VerifiedTopologyDescriptor descriptor, SandboxContext context) {
        if (!KEY.equals(descriptor.backend())) {
            throw new BackendException(BackendException.Kind.INVALID, "descriptor is for " + descriptor.backend() + ", not " + KEY);
        }
        RemoteCalls calls = null;
        for (int attempt = 1; calls == null; attempt++) {
            SupervisorLink link;
            try {
                link = links.apply(descriptor);
            } catch (ProtocolException e) {
                // A dial whose TLS failed (the runtime gave up on it): the runtime dials again.
                if (e.refusal() != openshell.protocol.Refusal.TRANSPORT_FAILED || attempt >= MAX_ATTACH_ATTEMPTS) {
                    throw new BackendException(BackendException.Kind.UNAVAILABLE, "no link to the runtime: " + e.getMessage(), e);
                }
                continue;
            }
            RemoteCalls candidate = new RemoteCalls(link);
            try {
                candidate.call("attach", AttachRequest.newBuilder().setSupervisorId(context.sessionId().value()).build(),
                        (stub, request) -> stub.attach(request));
                calls = candidate;
            } catch (BackendException e) {
                link.close();
                // The runtime drops a link that no authenticated call reached within its handshake
                // timeout (a queued dial, a loaded machine) and dials again: take the next one.
                if (e.kind() != BackendException.Kind.UNAVAILABLE || attempt >= MAX_ATTACH_ATTEMPTS) {
                    throw e;
                }
            } catch (RuntimeException e) {
                link.close();
                throw e;
            }
        }
        return new Bound(calls, context);
    }

    private static final class Bound implements BoundBoundary {
        private final LinearHandle handle = new LinearHandle("bound boundary");
        private final RemoteCalls calls;
        private final SandboxContext context;
        private RemoteMediation mediation;

        Bound(RemoteCalls calls, SandboxContext context) {
            this.calls = calls;
            this.context = context;
        }

        @Override
        public synchronized NetworkMediationSource mediation() {
            handle.checkLive();
            if (mediation != null) {
                throw new BackendException(BackendException.Kind.INVALID, "the mediation source is already taken");
            }
            mediation = new RemoteMediation(calls);
            return mediation;
        }

        @Override
        public ReadyBoundary confirm() {
            return handle.transition(() -> {
                synchronized (this) {
                    if (mediation == null || !mediation.live()) {
                        throw new BackendException(BackendException.Kind.INVALID, "confirm needs the mediation source taken and live first");
                    }
                }
                ConfirmResult result = calls.call("confirm", ConfirmRequest.newBuilder()
                        .setPolicyDigest(context.policy().sha256()).build(), (stub, request) -> stub.confirm(request));
                if (!result.getConfirmed()) {
                    throw new BackendException(BackendException.Kind.FAILED, "the runtime did not confirm its controls");
                }
                ConfirmationEvidence evidence = new ConfirmationEvidence(result.getControlsList().stream()
                        .map(c -> new ConfirmationEvidence.Control(c.getName(), c.getMechanism())).toList(),
                        result.getKernel(), result.getPolicySha256(), result.getDirectEgressFailed());
                return new Ready(calls, context, evidence);
            });
        }

        @Override
        public void abort() {
            handle.checkLive();
            handle.consume();
            RemoteMediation taken;
            synchronized (this) {
                taken = mediation;
            }
            if (taken != null) {
                taken.close();
            }
            terminateQuietly(calls);
        }
    }

    private static final class Ready implements ReadyBoundary {
        private final LinearHandle handle = new LinearHandle("ready boundary");
        private final RemoteCalls calls;
        private final SandboxContext context;
        private final ConfirmationEvidence evidence;

        Ready(RemoteCalls calls, SandboxContext context, ConfirmationEvidence evidence) {
            this.calls = calls;
            this.context = context;
            this.evidence = evidence;
        }

        @Override
        public ConfirmationEvidence evidence() {
            handle.checkLive();
            return evidence;
        }

        @Override
        public RunningBoundary startAgent() {
            return handle.transition(() -> {
                String id = calls.call("startAgent", StartAgentRequest.newBuilder().addAllArgv(context.agent().argv())
                        .putAllEnvironment(context.agent().environment())
                        .setWorkingDirectory(context.agent().workingDirectory())
                        .setWorkloadTrustPem(context.trust().pem()).build(), START_DEADLINE,
                        (stub, request) -> stub.startAgent(request)).getProcessId();
                return new Running(calls, new RemoteProcess(calls, id, null));
            });
        }

        @Override
        public void abort() {
            handle.checkLive();
            handle.consume();
            terminateQuietly(calls);
        }
    }

    /**
     * Follows the agent's output of a boundary this backend started, as lines (the supervisor's
     * sandbox log). Not part of the isolation contract: another backend's agent has no retained
     * output to follow.
     *
     * @param running the running boundary
     * @param sink    receives the lines, in order
     * @return the follower, or empty for a boundary of another backend
     */
    static Optional<AgentLog> followAgent(RunningBoundary running, java.util.function.Consumer<java.util.List<String>> sink) {
        if (running instanceof Running ours) {
            return Optional.of(AgentLog.follow(ours.calls, ours.agent.id(), sink));
        }
        return java.util.Optional.empty();
    }

    private static void terminateQuietly(RemoteCalls calls) {
        try {
            calls.call("terminateBoundary", TerminateBoundaryRequest.newBuilder().setReason("aborted").build(),
                    (stub, request) -> stub.terminateBoundary(request));
        } catch (BackendException e) {
            // The runtime terminates the workload itself when the supervisor goes (its loss bound).
        }
    }

    private static final class Running implements RunningBoundary {
        private final RemoteCalls calls;
        private final RemoteProcess agent;
        private final AtomicBoolean terminated = new AtomicBoolean();

        Running(RemoteCalls calls, RemoteProcess agent) {
            this.calls = calls;
            this.agent = agent;
        }

        @Override
        public BoundaryProcess agent() {
            return agent;
        }

        @Override
        public BoundaryExec exec() {
            return spec -> {
                requireRunning();
                return RemoteSession.start(calls, spec);
            };
        }

        @Override
        public BoundaryPortForward portForward() {
            return target -> {
                requireRunning();
                if (!target.address().equals(java.net.InetAddress.getLoopbackAddress())) {
                    // PortForwardRequest carries a port only: the runtime connects to 127.0.0.1.
                    throw new BackendException(BackendException.Kind.UNAVAILABLE, "protocol version 1 forwards to "
                            + java.net.InetAddress.getLoopbackAddress().getHostAddress() + " only, not " + target.address());
                }
                String id = calls.call("portForward", PortForwardRequest.newBuilder().setSandboxPort(target.port()).build(),
                        (stub, request) -> stub.portForward(request)).getForwardId();
                return RemoteMediation.claim(calls, id);
            };
        }

        private void requireRunning() {
            if (!running()) {
                throw new BackendException(BackendException.Kind.TERMINATED, "the boundary is no longer running");
            }
        }

        @Override
        public boolean running() {
            return !terminated.get() && calls.link().isOpen() && agent.awaitExit(Duration.ZERO).isEmpty();
        }

        @Override
        public void terminate() {
            if (terminated.compareAndSet(false, true)) {
                terminateQuietly(calls);
            }
        }
    }

    /** A workload process known by its runtime id; its exit may also arrive on its I/O stream. */
    static final class RemoteProcess implements BoundaryProcess {
        private final RemoteCalls calls;
        private final String id;
        private final CompletableFuture<ExitStatus> exit;

        RemoteProcess(RemoteCalls calls, String id, CompletableFuture<ExitStatus> exit) {
            this.calls = calls;
            this.id = id;
            this.exit = exit == null ? new CompletableFuture<>() : exit;
        }

        @Override
        public ExitStatus awaitExit() {
            while (true) {
                Optional<ExitStatus> status = awaitExit(CALL_DEADLINE);
                if (status.isPresent()) {
                    return status.get();
                }
            }
        }

        @Override
        public Optional<ExitStatus> awaitExit(Duration timeout) {
            if (exit.isDone()) {
                return Optional.of(exit.join());
            }
            if (timeout.isZero() || timeout.isNegative()) {
                return Optional.empty();
            }
            try {
                // The runtime answers "still running" a little before the call's deadline: its control
                // thread is free again by the time the next wait asks (a unary call's deadline reaches
                // the runtime as nothing at all).
                Duration margin = timeout.dividedBy(4).compareTo(WAIT_ANSWER_MARGIN) < 0 ? timeout.dividedBy(4)
                        : WAIT_ANSWER_MARGIN;
                WaitResult result = calls.call("wait", WaitRequest.newBuilder().setProcessId(id)
                                .setMaxWaitMillis(Math.max(1, timeout.minus(margin).toMillis())).build(), timeout,
                        (stub, request) -> stub.wait(request));
                if (!result.hasExit()) {
                    return Optional.empty();
                }
                ExitStatus known = status(result.getExit());
                exit.complete(known);
                return Optional.of(known);
            } catch (BackendException e) {
                if (RemoteCalls.deadlineExceeded(e)) {
                    return Optional.empty();
                }
                throw e;
            }
        }

        @Override
        public void signal(ProcessSignal signal) {
            calls.call("signal", SignalRequest.newBuilder().setProcessId(id).setSignal(signal.number()).build(),
                    (stub, request) -> stub.signal(request));
        }

        @Override
        public void terminate() {
            ExitStatus status = status(calls.call("terminate", TerminateRequest.newBuilder().setProcessId(id).build(),
                    (stub, request) -> stub.terminate(request)).getExit());
            exit.complete(status);
        }

        String id() {
            return id;
        }

        static ExitStatus status(openshell.protocol.wire.ExitStatus status) {
            return switch (status.getOutcomeCase()) {
                case CODE -> new ExitStatus.Exited(status.getCode());
                case SIGNAL -> new ExitStatus.Signaled(status.getSignal());
                default -> throw new BackendException(BackendException.Kind.FAILED, "the runtime sent an exit status without an outcome");
            };
        }
    }

    /** An exec'd process and its I/O stream: stdout and stderr apart (merged when it has a terminal). */
    static final class RemoteSession implements ExecSession {
        private final RemoteProcess process;
        private final CreditedStream<ProcessOutput, ProcessInput> input;
        private final InboundBytes stdout = new InboundBytes();
        private final InboundBytes stderr = new InboundBytes();
        private final OutputStream stdin;
        private final Optional<Terminal> terminal;
        private final AtomicBoolean stdinClosed = new AtomicBoolean();

        private RemoteSession(RemoteCalls calls, String id, boolean tty) {
            CompletableFuture<ExitStatus> exit = new CompletableFuture<>();
            this.process = new RemoteProcess(calls, id, exit);
            this.input = CreditedStream.create(CreditedStream.Kind.SUPERVISOR_PROCESS, new StreamObserver<>() {
                @Override
                public void onNext(ProcessOutput output) {
                    switch (output.getKindCase()) {
                    case STDOUT -> stdout.deliver(output.getStdout().toByteArray());
                    case STDERR -> stderr.deliver(output.getStderr().toByteArray());
                    case EXIT -> {
                        stdout.end();
                        stderr.end();
                        exit.complete(RemoteProcess.status(output.getExit()));
                    }
                    default -> {
                        // nothing else is defined
                    }
                    }
                }

                @Override
                public void onError(Throwable t) {
                    stdout.fail("process stream failed: " + t.getMessage());
                    stderr.fail("process stream failed: " + t.getMessage());
                }

                @Override
                public void onCompleted() {
                    stdout.end();
                    stderr.end();
                }
            }, Thread.ofVirtual().name("process-" + id + "-output").factory());
            input.connect(calls.async().attachProcess(input.inbound()));
            try {
                input.send(ProcessInput.newBuilder().setProcessId(id).build());
            } catch (ProtocolException e) {
                throw new BackendException(BackendException.Kind.UNAVAILABLE, "the process stream failed: " + e.getMessage(), e);
            }
            this.stdin = new OutputStream() {
                @Override
                public void write(int b) throws IOException {
                    write(new byte[] {(byte) b}, 0, 1);
                }

                @Override
                public void write(byte[] b, int off, int len) throws IOException {
                    if (stdinClosed.get()) {
                        throw new IOException("stdin is closed");
                    }
                    for (int at = off; at < off + len; at += RemoteMediation.MAX_CHUNK_BYTES) {
                        int n = Math.min(RemoteMediation.MAX_CHUNK_BYTES, off + len - at);
                        send(ProcessInput.newBuilder().setStdin(ByteString.copyFrom(b, at, n)).build());
                    }
                }

                @Override
                public void close() throws IOException {
                    if (stdinClosed.compareAndSet(false, true)) {
                        send(ProcessInput.newBuilder().setStdinClosed(true).build());
                    }
                }
            };
            this.terminal = tty ? Optional.of(size -> calls.call("resize", ResizeRequest.newBuilder().setProcessId(id)
                    .setColumns(size.columns()).setRows(size.rows()).build(), (stub, request) -> stub.resize(request)))
                    : Optional.empty();
        }

        static RemoteSession start(RemoteCalls calls, ExecSpec spec) {
            Optional<TerminalSize> size = spec.terminal();
            String id = calls.call("exec", ExecRequest.newBuilder().addAllArgv(spec.argv())
                    .putAllEnvironment(spec.environment()).setWorkingDirectory(spec.workingDirectory())
                    .setTty(size.isPresent())
                    .setTtyColumns(size.map(TerminalSize::columns).orElse(0))
                    .setTtyRows(size.map(TerminalSize::rows).orElse(0))
                    .setAdmissionDeadlineEpochMillis(System.currentTimeMillis() + spec.admission().toMillis()).build(),
                    START_DEADLINE, (stub, request) -> stub.exec(request)).getProcessId();
            return new RemoteSession(calls, id, size.isPresent());
        }

        @Override
        public BoundaryProcess process() {
            return process;
        }

        @Override
        public OutputStream stdin() {
            return stdin;
        }

        @Override
        public InputStream stdout() {
            return stdout;
        }

        @Override
        public InputStream stderr() {
            return stderr;
        }

        @Override
        public Optional<Terminal> terminal() {
            return terminal;
        }

        private void send(ProcessInput message) throws IOException {
            try {
                input.send(message);
            } catch (ProtocolException e) {
                throw new IOException("the process stream closed: " + e.getMessage(), e);
            }
        }

        @Override
        public void close() {
            try {
                stdin.close();
            } catch (IOException e) {
                // the stream is already gone
            }
            // Detaches: the process keeps running on the runtime and can be attached again.
            if (!input.isEnded()) {
                input.fail(io.grpc.Status.CANCELLED.withDescription("session closed by the supervisor"));
            }
        }
    }
}
