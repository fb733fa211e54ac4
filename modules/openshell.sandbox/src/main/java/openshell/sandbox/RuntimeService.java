package openshell.sandbox;

import com.google.protobuf.ByteString;
import com.google.protobuf.Message;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import openshell.isolation.AgentSpec;
import openshell.isolation.BackendException;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.ByteChannel;
import openshell.isolation.ConfirmationEvidence;
import openshell.isolation.DenyReason;
import openshell.isolation.ExecSession;
import openshell.isolation.ExecSpec;
import openshell.isolation.Executable;
import openshell.isolation.IdentityResolution;
import openshell.isolation.PendingDnsQuery;
import openshell.isolation.PendingTcpOpen;
import openshell.isolation.ProcessSignal;
import openshell.isolation.TerminalSize;
import openshell.isolation.WorkloadTrust;
import openshell.linux.LinuxException;
import openshell.protocol.ControlLedger;
import openshell.protocol.CreditedStream;
import openshell.protocol.DescriptorLane;
import openshell.protocol.ExecAdmission;
import openshell.protocol.ProtocolException;
import openshell.protocol.RuntimeEndpoint;
import openshell.protocol.wire.AttachRequest;
import openshell.protocol.wire.AttachResult;
import openshell.protocol.wire.ConfirmRequest;
import openshell.protocol.wire.ConfirmResult;
import openshell.protocol.wire.Control;
import openshell.protocol.wire.DnsAnswer;
import openshell.protocol.wire.DnsQuery;
import openshell.protocol.wire.ExecRequest;
import openshell.protocol.wire.ExecResult;
import openshell.protocol.wire.ExecutableFile;
import openshell.protocol.wire.ExitStatus;
import openshell.protocol.wire.OutputLost;
import openshell.protocol.wire.Identity;
import openshell.protocol.wire.PendingConnection;
import openshell.protocol.wire.PendingConnectionsRequest;
import openshell.protocol.wire.PortForwardRequest;
import openshell.protocol.wire.PortForwardResult;
import openshell.protocol.wire.ProcessInput;
import openshell.protocol.wire.ProcessOutput;
import openshell.protocol.wire.RelayDecision;
import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;
import openshell.protocol.wire.ResizeRequest;
import openshell.protocol.wire.ResizeResult;
import openshell.protocol.wire.SandboxRuntimeGrpc;
import openshell.protocol.wire.SignalRequest;
import openshell.protocol.wire.SignalResult;
import openshell.protocol.wire.StartAgentRequest;
import openshell.protocol.wire.StartAgentResult;
import openshell.protocol.wire.TerminateBoundaryRequest;
import openshell.protocol.wire.TerminateBoundaryResult;
import openshell.protocol.wire.TerminateRequest;
import openshell.protocol.wire.TerminateResult;
import openshell.protocol.wire.UpdateProviderEnvironmentRequest;
import openshell.protocol.wire.UpdateProviderEnvironmentResult;
import openshell.protocol.wire.WaitRequest;
import openshell.protocol.wire.WaitResult;

/**
 * The Sandbox Protocol served over {@link RuntimeControl}: control calls go through the
 * generation's {@link ControlLedger} (same id and digest, same result, never re-run), process
 * I/O and mediation are streams. A {@link BackendException} becomes a gRPC status whose
 * description starts with its kind, so the supervisor can restore the kind; nothing else of the
 * runtime's state leaks into a status.
 */
final class RuntimeService extends SandboxRuntimeGrpc.SandboxRuntimeImplBase {
    /** Longest a single Wait call blocks on the runtime side; the request's {@code max_wait_millis} is normally shorter. */
    static final Duration MAX_WAIT_CALL = Duration.ofHours(1);
    /** The terminal of a tty exec that names no size. */
    static final TerminalSize DEFAULT_TERMINAL = new TerminalSize(80, 24);
    /** Largest chunk of process output or relay bytes put in one message (one HTTP/2 frame). */
    static final int MAX_CHUNK_BYTES = CreditedStream.MAX_CHUNK_BYTES;
    /** How often an attached output stream looks whether its client is still there. */
    static final Duration EXIT_SLICE = Duration.ofSeconds(1);
    /** How often the mediation streams look whether their call was cancelled while nothing is pending. */
    static final Duration MEDIATION_POLL = Duration.ofMillis(500);
    /** Most port-forward connections made and not yet claimed by their Relay stream; more are refused UNAVAILABLE. */
    static final int MAX_UNCLAIMED_FORWARDS = 64;
    /** Longest a port-forward connection waits for its Relay stream before it is closed. */
    static final Duration FORWARD_CLAIM_WAIT = Duration.ofSeconds(30);
    private static final java.util.concurrent.ScheduledExecutorService FORWARD_EXPIRY =
            Executors.newSingleThreadScheduledExecutor(Thread.ofPlatform().daemon(true).name("forward-expiry").factory());

    private static final System.Logger LOGGER = System.getLogger(RuntimeService.class.getName());
    /** Platform threads for control operations, at most {@link ControlThreads#MAX_CONTROL_THREADS}. */
    private static final ControlThreads CONTROL_THREADS = new ControlThreads(ControlThreads.MAX_CONTROL_THREADS);

    private final RuntimeControl control;
    private final ControlLedger ledger;
    private final Clock clock;
    private final Set<Long> attachedProcesses = ConcurrentHashMap.newKeySet();
    private final Map<String, PendingTcpOpen> pendingOpens = new ConcurrentHashMap<>();
    private final AtomicLong connectionIds = new AtomicLong();
    private final AtomicBoolean announcing = new AtomicBoolean();
    private final AtomicBoolean answeringDns = new AtomicBoolean();
    private final Map<String, ByteChannel> forwards = new ConcurrentHashMap<>();
    /** Tokens of announced connections the supervisor may take over the descriptor lane. */
    private final Map<String, byte[]> handoffTokens = new ConcurrentHashMap<>();
    private final Optional<java.nio.file.Path> linkSocket;
    /** Where DNS answers that come on the lane go: the current Dns stream's waiting queries. */
    private volatile java.util.function.Consumer<DnsAnswer> laneAnswers = answer -> { };
    /** The descriptor lane of the current announcer, if it has one. */
    private volatile Optional<HandoffChannel> handoff = Optional.empty();

    RuntimeService(RuntimeControl control, long generation, Clock clock) {
        this(control, generation, clock, Optional.empty());
    }

    /**
     * @param linkSocket the Unix link's socket file, beside which the supervisor may offer a
     *                   descriptor lane ({@link HandoffChannel}); empty for none
     */
    RuntimeService(RuntimeControl control, long generation, Clock clock, Optional<java.nio.file.Path> linkSocket) {
        this.control = control;
        this.ledger = new ControlLedger(generation);
        this.clock = clock;
        this.linkSocket = linkSocket;
    }

    private <R extends Message> void control(Message request, StreamObserver<R> observer, Supplier<R> operation) {
        R result;
        try {
            result = onPlatformThread(() -> ledger.execute(request, operation));
        } catch (ProtocolException e) {
            observer.onError(Status.FAILED_PRECONDITION.withDescription(e.refusal().name() + ": " + e.getMessage())
                    .asRuntimeException());
            return;
        } catch (BackendException e) {
            observer.onError(status(e).asRuntimeException());
            return;
        }
        observer.onNext(result);
        observer.onCompleted();
    }

    /** Control operations running now, in this process (for tests of the threads' release). */
    static int activeControlThreads() {
        return CONTROL_THREADS.active();
    }

    /** Runs a control operation on a bounded platform thread; see {@link ControlThreads}. */
    private static <R> R onPlatformThread(Supplier<R> operation) {
        return CONTROL_THREADS.run(operation);
    }

    static Status status(BackendException e) {
        Status base = switch (e.kind()) {
            case INVALID -> Status.FAILED_PRECONDITION;
            case DENIED -> Status.PERMISSION_DENIED;
            case UNAVAILABLE -> Status.UNAVAILABLE;
            case FAILED -> Status.INTERNAL;
            case TERMINATED -> Status.ABORTED;
        };
        // The message already starts with the kind ("INVALID: ...").
        return base.withDescription(e.getMessage());
    }

    @Override
    public void attach(AttachRequest request, StreamObserver<AttachResult> observer) {
        control(request, observer, () -> {
            control.attach(request.getSupervisorId(), ledger.runtimeGeneration());
            return AttachResult.newBuilder().setRuntimeGeneration(ledger.runtimeGeneration()).build();
        });
    }

    @Override
    public void confirm(ConfirmRequest request, StreamObserver<ConfirmResult> observer) {
        control(request, observer, () -> {
            ConfirmationEvidence evidence = control.confirm(request.getPolicyDigest());
            ConfirmResult.Builder result = ConfirmResult.newBuilder().setConfirmed(true)
                    .setKernel(evidence.kernel()).setPolicySha256(evidence.policySha256())
                    .setDirectEgressFailed(evidence.directEgressFailed());
            evidence.controls().forEach(c -> result.addControls(Control.newBuilder().setName(c.name()).setMechanism(c.mechanism())));
            return result.build();
        });
    }

    @Override
    public void startAgent(StartAgentRequest request, StreamObserver<StartAgentResult> observer) {
        control(request, observer, () -> {
            AgentSpec spec = new AgentSpec(request.getArgvList(), request.getEnvironmentMap(), directory(request.getWorkingDirectory()));
            WorkloadTrust trust = WorkloadTrust.ofPem(request.getWorkloadTrustPem());
            return StartAgentResult.newBuilder().setProcessId(Long.toString(control.startAgent(spec, trust))).build();
        });
    }

    @Override
    public void exec(ExecRequest request, StreamObserver<ExecResult> observer) {
        control(request, observer, () -> {
            ExecAdmission.admit(request, clock);
            ExecSpec.Builder spec = ExecSpec.builder(request.getArgvList()).environment(request.getEnvironmentMap())
                    .workingDirectory(directory(request.getWorkingDirectory()));
            if (request.getTty()) {
                boolean sized = request.getTtyColumns() != 0 || request.getTtyRows() != 0;
                spec.pty(sized ? new TerminalSize(request.getTtyColumns(), request.getTtyRows()) : DEFAULT_TERMINAL);
            }
            return ExecResult.newBuilder().setProcessId(Long.toString(control.exec(spec.build()))).build();
        });
    }

    @Override
    public void updateProviderEnvironment(UpdateProviderEnvironmentRequest request,
                                          StreamObserver<UpdateProviderEnvironmentResult> observer) {
        control(request, observer, () -> UpdateProviderEnvironmentResult.newBuilder().setAppliedEpoch(
                control.updateProviderEnvironment(request.getEnvironmentMap(), request.getCredentialEpoch())).build());
    }

    @Override
    public void wait(WaitRequest request, StreamObserver<WaitResult> observer) {
        control(request, observer, () -> {
            Duration bound = request.getMaxWaitMillis() > 0 && request.getMaxWaitMillis() < MAX_WAIT_CALL.toMillis()
                    ? Duration.ofMillis(request.getMaxWaitMillis()) : MAX_WAIT_CALL;
            Optional<openshell.isolation.ExitStatus> exit = control.await(processId(request.getProcessId()), bound);
            WaitResult.Builder result = WaitResult.newBuilder();
            exit.ifPresent(status -> result.setExit(wire(status)));
            return result.build();
        });
    }

    @Override
    public void signal(SignalRequest request, StreamObserver<SignalResult> observer) {
        control(request, observer, () -> {
            control.signal(processId(request.getProcessId()), signal(request.getSignal()));
            return SignalResult.newBuilder().setDelivered(true).build();
        });
    }

    @Override
    public void terminate(TerminateRequest request, StreamObserver<TerminateResult> observer) {
        control(request, observer, () -> {
            long process = processId(request.getProcessId());
            control.session(process).process().terminate();
            openshell.isolation.ExitStatus exit = control.await(process, MAX_WAIT_CALL).orElseThrow(() -> new BackendException(
                    BackendException.Kind.FAILED, "process " + process + " survived terminate"));
            return TerminateResult.newBuilder().setExit(wire(exit)).build();
        });
    }

    @Override
    public void terminateBoundary(TerminateBoundaryRequest request, StreamObserver<TerminateBoundaryResult> observer) {
        control(request, observer, () -> {
            control.terminate();
            return TerminateBoundaryResult.newBuilder().setTerminated(true).build();
        });
    }

    /**
     * Connects to the workload's loopback port now (so a closed port fails the call) and parks the
     * connection under a fresh id; the supervisor claims it with a Relay stream whose first
     * message is an allowing decision for that id, and the bytes then flow as on any relay.
     */
    @Override
    public void portForward(PortForwardRequest request, StreamObserver<PortForwardResult> observer) {
        control(request, observer, () -> {
            if (forwards.size() >= MAX_UNCLAIMED_FORWARDS) {
                throw new BackendException(BackendException.Kind.UNAVAILABLE, MAX_UNCLAIMED_FORWARDS + " port forwards unclaimed");
            }
            ByteChannel connection = control.portForward(request.getSandboxPort());
            String id = "f" + connectionIds.incrementAndGet();
            forwards.put(id, connection);
            // Never claimed (the supervisor went away): the connection is closed, not leaked.
            FORWARD_EXPIRY.schedule(() -> {
                ByteChannel unclaimed = forwards.remove(id);
                if (unclaimed != null) {
                    unclaimed.close();
                }
            }, FORWARD_CLAIM_WAIT.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
            return PortForwardResult.newBuilder().setForwardId(id).build();
        });
    }

    @Override
    public void resize(ResizeRequest request, StreamObserver<ResizeResult> observer) {
        control(request, observer, () -> {
            control.resize(processId(request.getProcessId()), new TerminalSize(request.getColumns(), request.getRows()));
            return ResizeResult.newBuilder().setResized(true).build();
        });
    }

    /**
     * A process's I/O. The first message names the process ({@code process_id}, or {@code resume}
     * with where the client's copy of each stream ends). The agent's output is retained
     * ({@link OutputJournal}): it is sent from the asked offsets, with an {@code OutputLost} in
     * place of bytes no longer kept; an exec's output is read from its pipes while attached.
     * The exit is sent once both output streams ended; a detach (the stream failed) lets the
     * process be attached again at once.
     */
    @Override
    public StreamObserver<ProcessInput> attachProcess(StreamObserver<ProcessOutput> raw) {
        AtomicReference<CreditedStream<ProcessInput, ProcessOutput>> self = new AtomicReference<>();
        StreamObserver<ProcessInput> handler = new StreamObserver<>() {
            private ExecSession session;
            private long process;
            private final List<OutputJournal.Reader> readers = new java.util.concurrent.CopyOnWriteArrayList<>();

            @Override
            public void onNext(ProcessInput input) {
                try {
                    switch (input.getKindCase()) {
                    case PROCESS_ID -> start(input.getProcessId(), 0, 0, false);
                    case RESUME -> start(input.getResume().getProcessId(), input.getResume().getStdoutOffset(),
                            input.getResume().getStderrOffset(), true);
                    case STDIN -> stdin().write(input.getStdin().toByteArray());
                    case STDIN_CLOSED -> stdin().close();
                    default -> throw new BackendException(BackendException.Kind.INVALID, "empty process input");
                    }
                } catch (BackendException e) {
                    self.get().fail(status(e));
                } catch (IOException e) {
                    // The process closed its stdin: later input has nowhere to go; output continues.
                    LOGGER.log(System.Logger.Level.DEBUG, "stdin of process " + process + ": " + e);
                }
            }

            private OutputStream stdin() {
                if (session == null) {
                    throw new BackendException(BackendException.Kind.INVALID, "the first process input must name the process");
                }
                return session.stdin();
            }

            private void start(String id, long stdoutFrom, long stderrFrom, boolean resume) {
                if (session != null) {
                    throw new BackendException(BackendException.Kind.INVALID, "the process is already named");
                }
                long candidate = processId(id);
                ExecSession s = control.session(candidate);
                Optional<OutputJournal.Pair> retained = control.retainedOutput(candidate);
                if (resume && retained.isEmpty() && (stdoutFrom != 0 || stderrFrom != 0)) {
                    throw new BackendException(BackendException.Kind.INVALID, "process " + id
                            + " is an exec: only the agent's output is retained to resume from");
                }
                if (stdoutFrom < 0 || stderrFrom < 0) {
                    throw new BackendException(BackendException.Kind.INVALID, "an output offset is out of range");
                }
                if (!attachedProcesses.add(candidate)) {
                    throw new BackendException(BackendException.Kind.INVALID, "process " + id + " is already attached");
                }
                session = s;
                process = candidate;
                CountDownLatch drained = new CountDownLatch(2);
                if (retained.isPresent()) {
                    replay(retained.get().stdout().reader(stdoutFrom), false, drained);
                    replay(retained.get().stderr().reader(stderrFrom), true, drained);
                } else {
                    pump(s.stdout(), true, drained);
                    pump(s.stderr(), false, drained);
                }
                Thread.ofVirtual().name("process-" + candidate + "-exit").start(() -> {
                    try {
                        drained.await();
                        Optional<openshell.isolation.ExitStatus> exit = Optional.empty();
                        // In slices: a client gone meanwhile frees the process for the next attach now.
                        while (exit.isEmpty() && !self.get().isEnded()) {
                            exit = control.await(candidate, EXIT_SLICE);
                        }
                        if (exit.isPresent()) {
                            self.get().send(ProcessOutput.newBuilder().setExit(wire(exit.get())).build());
                            self.get().complete();
                        }
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    } catch (RuntimeException e) {
                        try {
                            self.get().fail(Status.INTERNAL.withDescription("FAILED: " + e.getMessage()));
                        } catch (RuntimeException gone) {
                            // the stream itself is gone (link closed): the process can be attached again
                            LOGGER.log(System.Logger.Level.DEBUG, "exit of process " + candidate + " not sent: " + gone);
                        }
                    } finally {
                        readers.forEach(RuntimeService::closeQuietly);
                        attachedProcesses.remove(candidate);
                    }
                });
            }

            // From the journal: a virtual thread (the journal waits on a monitor, not a native poll).
            private void replay(OutputJournal.Reader reader, boolean stderr, CountDownLatch drained) {
                readers.add(reader);
                Thread.ofVirtual().name("process-" + process + (stderr ? "-stderr" : "-stdout")).start(() -> {
                    try (reader) {
                        while (!self.get().isEnded()) {
                            OutputJournal.Chunk chunk = reader.next(MAX_CHUNK_BYTES, EXIT_SLICE);
                            if (chunk instanceof OutputJournal.End) {
                                return;
                            }
                            if (chunk == null) {
                                // Nothing within the slice: look whether the stream ended, then wait again.
                                continue;
                            }
                            self.get().send(switch (chunk) {
                                case OutputJournal.Bytes bytes -> stderr
                                        ? ProcessOutput.newBuilder().setStderr(ByteString.copyFrom(bytes.bytes())).build()
                                        : ProcessOutput.newBuilder().setStdout(ByteString.copyFrom(bytes.bytes())).build();
                                case OutputJournal.Lost lost -> ProcessOutput.newBuilder().setLost(OutputLost.newBuilder()
                                        .setStderr(stderr).setBytes(lost.bytes())).build();
                                case OutputJournal.End end -> throw new IllegalStateException("handled above");
                            });
                        }
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    } catch (RuntimeException e) {
                        LOGGER.log(System.Logger.Level.DEBUG, "output of process " + process + " ended: " + e);
                    } finally {
                        drained.countDown();
                    }
                });
            }

            private void pump(InputStream from, boolean stdout, CountDownLatch drained) {
                // A platform thread: the read is a native poll that would pin a virtual thread's carrier.
                Thread.ofPlatform().daemon(true).name("process-" + process + (stdout ? "-stdout" : "-stderr")).start(() -> {
                    byte[] buffer = new byte[MAX_CHUNK_BYTES];
                    try (from) {
                        int n;
                        while ((n = from.read(buffer)) >= 0) {
                            ByteString chunk = ByteString.copyFrom(buffer, 0, n);
                            ProcessOutput message = stdout ? ProcessOutput.newBuilder().setStdout(chunk).build()
                                    : ProcessOutput.newBuilder().setStderr(chunk).build();
                            self.get().send(message);
                        }
                    } catch (IOException | RuntimeException e) {
                        LOGGER.log(System.Logger.Level.DEBUG, "output of process " + process + " ended: " + e);
                    } finally {
                        drained.countDown();
                    }
                });
            }

            @Override
            public void onError(Throwable t) {
                // The supervisor went away: the process keeps running and can be attached again; the
                // agent is no longer held back by this reader.
                readers.forEach(RuntimeService::closeQuietly);
            }

            @Override
            public void onCompleted() {
            }
        };
        // A platform thread delivers: stdin is written with a native write that would pin a carrier.
        CreditedStream<ProcessInput, ProcessOutput> stream = CreditedStream.create(CreditedStream.Kind.RUNTIME_PROCESS,
                handler, Thread.ofPlatform().daemon(true).name("process-input").factory());
        self.set(stream);
        stream.connect(raw);
        return stream.inbound();
    }

    private static void closeQuietly(AutoCloseable closeable) {
        try {
            closeable.close();
        } catch (Exception ignored) {
            // detaching either way
        }
    }

    @Override
    public void pendingConnections(PendingConnectionsRequest request, StreamObserver<PendingConnection> observer) {
        if (!announcing.compareAndSet(false, true)) {
            observer.onError(Status.FAILED_PRECONDITION.withDescription("INVALID: pending connections are already taken")
                    .asRuntimeException());
            return;
        }
        ServerCallStreamObserver<PendingConnection> call = (ServerCallStreamObserver<PendingConnection>) observer;
        control.supervision(true);
        // Taken on the call's thread: the lane's decisions show the link's keepalive watchdog that
        // the supervisor is there, however late a flood of them makes it answer pings.
        Runnable supervisorHeard = RuntimeEndpoint.linkHeard();
        Thread.ofVirtual().name("pending-connections").start(() -> {
            Optional<HandoffChannel> channel = linkSocket.flatMap(HandoffChannel::connect);
            handoff = channel;
            AtomicBoolean laneLost = new AtomicBoolean();
            boolean keyed = channel.isPresent() && keyLane(channel.get(), request, laneLost, supervisorHeard);
            try {
                // Also ends when supervision is gone (the link dropped, or the supervisor ended its
                // DNS stream): a cancel of a dead link's call may never arrive. A keyed lane that
                // ended ends it too: connects announced there would wait for decisions that cannot
                // come, so they fail closed below and the supervisor takes the stream again.
                while (!call.isCancelled() && control.supervised() && !laneLost.get()) {
                    Optional<PendingTcpOpen> next = control.mediation().acceptTcp(MEDIATION_POLL);
                    if (next.isEmpty()) {
                        continue;
                    }
                    PendingTcpOpen open = next.get();
                    String id = "c" + connectionIds.incrementAndGet();
                    pendingOpens.put(id, open);
                    PendingConnection.Builder announced = PendingConnection.newBuilder().setConnectionId(id)
                            .setDestinationHost(open.destination().address().getHostAddress())
                            .setDestinationAddress(ByteString.copyFrom(open.destination().address().getAddress()))
                            .setDestinationPort(open.destination().port())
                            .setSocketInode(open.socket().inode());
                    if (channel.isPresent() && open instanceof TcpOpen) {
                        byte[] token = HandoffChannel.newToken();
                        handoffTokens.put(id, token);
                        announced.setHandoffToken(ByteString.copyFrom(token));
                    }
                    switch (open.identity()) {
                    case IdentityResolution.Resolved r -> announced.setIdentity(identity(r.identity()))
                            .setExecutable(r.identity().path());
                    case IdentityResolution.Unresolved u -> announced.setUnresolvedReason(u.reason());
                    }
                    PendingConnection message = announced.build();
                    if (!(keyed && open instanceof TcpOpen && channel.get().announce(message))) {
                        observer.onNext(message);
                    }
                }
                if (laneLost.get()) {
                    observer.onCompleted();
                }
            } catch (RuntimeException e) {
                LOGGER.log(System.Logger.Level.WARNING, "announcing pending connections stopped: " + e);
            } finally {
                // Nobody decides any more: egress stops now (held connects, relays), not at a timeout.
                control.supervision(false);
                announcing.set(false);
                // Announced but undecided connections fail closed when their announcer goes.
                // Each on its own: one decided meanwhile (its relay won the race) must not spare the rest.
                pendingOpens.values().forEach(open -> {
                    try {
                        open.deny(DenyReason.MEDIATION_UNAVAILABLE);
                    } catch (RuntimeException alreadyDecided) {
                        LOGGER.log(System.Logger.Level.DEBUG, "pending connect already decided: " + alreadyDecided);
                    }
                });
                pendingOpens.clear();
                handoffTokens.clear();
                handoff = Optional.empty();
                channel.ifPresent(HandoffChannel::close);
            }
        });
    }

    /**
     * Presents the supervisor's lane key, if its request carries one, so connects are announced
     * and decided on the lane; a lane that cannot be keyed leaves them on the stream.
     *
     * @return whether the lane is keyed
     */
    private boolean keyLane(HandoffChannel channel, PendingConnectionsRequest request, AtomicBoolean lost,
                            Runnable supervisorHeard) {
        if (request.getLaneKey().size() != DescriptorLane.KEY_BYTES) {
            return false;
        }
        try {
            channel.key(request.getLaneKey().toByteArray(), new HandoffChannel.Receiver() {
                @Override
                public void decision(RelayDecision decision) {
                    supervisorHeard.run();
                    laneDecision(decision);
                }

                @Override
                public void answer(DnsAnswer answer) {
                    supervisorHeard.run();
                    laneAnswers.accept(answer);
                }
            }, () -> lost.set(true));
            return true;
        } catch (LinuxException e) {
            LOGGER.log(System.Logger.Level.INFO, "the descriptor lane could not be keyed (" + e.getMessage()
                    + "): connects are announced on the stream");
            return false;
        }
    }

    /**
     * Asks a DNS query on the keyed lane, if there is one; its answer comes back on the lane.
     *
     * @return false when it must go on the Dns stream (no keyed lane, too large, the lane failed)
     */
    private boolean askOnLane(DnsQuery query) {
        Optional<HandoffChannel> lane = handoff;
        if (lane.isEmpty() || !lane.get().keyed()) {
            return false;
        }
        try {
            return lane.get().query(query);
        } catch (LinuxException e) {
            // The lane is ending (its announcer fails its connects closed): this one goes on the stream.
            return false;
        }
    }

    /**
     * A decision that came on the lane (on its reader thread, which must not block): a denial is
     * answered at once; an allow with handoff passes the socket on its own thread. Any other allow
     * comes as a Relay stream's first message, so one here fails closed. A decision for a connection
     * no longer pending (decided on a stream, expired, gone) changes nothing.
     */
    private void laneDecision(RelayDecision decision) {
        String id = decision.getConnectionId();
        PendingTcpOpen open = pendingOpens.remove(id);
        byte[] token = handoffTokens.remove(id);
        if (open == null) {
            LOGGER.log(System.Logger.Level.DEBUG, "a lane decision for " + id + ", which is not pending");
            return;
        }
        try {
            if (!decision.getAllow()) {
                open.deny(denyReason(decision.getDenyErrno()));
            } else if (!decision.getHandoff()) {
                LOGGER.log(System.Logger.Level.WARNING, "a lane allow without handoff for " + id + ": denied");
                open.deny(DenyReason.MEDIATION_UNAVAILABLE);
            } else {
                Thread.ofVirtual().name("handoff-" + id).start(() -> {
                    try {
                        handOff(open, token);
                    } catch (BackendException e) {
                        LOGGER.log(System.Logger.Level.DEBUG, "handoff of " + id + " failed: " + e.getMessage());
                    }
                });
            }
        } catch (BackendException alreadyDecided) {
            LOGGER.log(System.Logger.Level.DEBUG, "lane decision for " + id + ": " + alreadyDecided.getMessage());
        }
    }

    /**
     * Passes an allowed connection's relay socket to the supervisor over the lane, under its
     * announced token. Without a token, a lane, or a socket of ours to pass, the connect fails
     * closed; a failed hand-off is reported on the lane so the supervisor stops waiting.
     *
     * @throws BackendException when the connection could not be handed off (its caller got an error)
     */
    private void handOff(PendingTcpOpen open, byte[] token) {
        Optional<HandoffChannel> channel = handoff;
        if (token == null || channel.isEmpty() || !(open instanceof TcpOpen tcp)) {
            open.deny(DenyReason.MEDIATION_UNAVAILABLE);
            throw new BackendException(BackendException.Kind.INVALID, "a handoff for a connection announced without a descriptor lane");
        }
        try {
            tcp.handOff(fd -> channel.get().send(token, fd));
        } catch (BackendException e) {
            channel.get().failed(token);
            throw e;
        }
    }

    /**
     * One mediated connection under message credits ({@link CreditedStream}): the first message
     * decides; then each side sends half_close when its source ends, and the call completes
     * once both directions are closed. Writes to the workload's socket run on the stream's own
     * delivery thread, so a workload that stops reading stalls only its own relay.
     */
    @Override
    public StreamObserver<RelayUp> relay(StreamObserver<RelayDown> down) {
        AtomicReference<CreditedStream<RelayUp, RelayDown>> self = new AtomicReference<>();
        StreamObserver<RelayUp> handler = new StreamObserver<>() {
            private ByteChannel channel;
            private boolean decided;
            private boolean upClosed;
            private boolean downClosed;

            @Override
            public void onNext(RelayUp up) {
                CreditedStream<RelayUp, RelayDown> stream = self.get();
                if (!decided) {
                    decided = true;
                    decide(up, stream);
                    return;
                }
                if (channel == null) {
                    return;
                }
                try {
                    switch (up.getKindCase()) {
                    case DATA -> channel.output().write(up.getData().toByteArray());
                    case HALF_CLOSE -> closeUp();
                    default -> {
                        channel.close();
                        stream.fail(Status.INVALID_ARGUMENT.withDescription("INVALID: a second decision"));
                    }
                    }
                } catch (IOException e) {
                    channel.close();
                    stream.fail(Status.UNAVAILABLE.withDescription("FAILED: the workload's socket closed"));
                }
            }

            private void closeUp() throws IOException {
                if (!upClosed) {
                    upClosed = true;
                    channel.output().close();
                    finishIfDone();
                }
            }

            private void finishIfDone() {
                boolean done;
                synchronized (this) {
                    done = upClosed && downClosed;
                }
                if (done) {
                    self.get().complete();
                    channel.close();
                }
            }

            private void decide(RelayUp up, CreditedStream<RelayUp, RelayDown> stream) {
                ByteChannel forward = up.hasDecision() && up.getDecision().getAllow()
                        ? forwards.remove(up.getDecision().getConnectionId()) : null;
                PendingTcpOpen open = forward == null && up.hasDecision()
                        ? pendingOpens.remove(up.getDecision().getConnectionId()) : null;
                if (forward != null) {
                    channel = forward;
                    pumpDown(channel, up.getDecision().getConnectionId(), stream);
                    return;
                }
                if (open == null) {
                    stream.fail(Status.FAILED_PRECONDITION.withDescription("INVALID: the first relay message must decide an announced connection"));
                    return;
                }
                byte[] token = handoffTokens.remove(up.getDecision().getConnectionId());
                if (!up.getDecision().getAllow()) {
                    open.deny(denyReason(up.getDecision().getDenyErrno()));
                    stream.complete();
                    return;
                }
                if (up.getDecision().getHandoff()) {
                    handOff(open, token, stream);
                    return;
                }
                try {
                    channel = open.allow();
                } catch (BackendException e) {
                    stream.fail(status(e));
                    return;
                }
                pumpDown(channel, up.getDecision().getConnectionId(), stream);
            }

            /**
             * An allowed connection the supervisor relays itself: the workload's relay socket goes
             * over the descriptor lane under the announced token, and the stream ends. Without a
             * token, a channel, or a socket of ours to pass, the connect fails closed.
             */
            private void handOff(PendingTcpOpen open, byte[] token, CreditedStream<RelayUp, RelayDown> stream) {
                try {
                    RuntimeService.this.handOff(open, token);
                } catch (BackendException e) {
                    stream.fail(status(e));
                    return;
                }
                stream.complete();
            }

            private void pumpDown(ByteChannel relayed, String id, CreditedStream<RelayUp, RelayDown> stream) {
                Thread.ofVirtual().name("relay-" + id).start(() -> {
                    // One message per HTTP/2 frame: a full MAX_CHUNK_BYTES message would take two.
                    byte[] buffer = new byte[CreditedStream.FRAME_CHUNK_BYTES];
                    try {
                        InputStream in = relayed.input();
                        int n;
                        while ((n = in.read(buffer)) >= 0) {
                            stream.send(RelayDown.newBuilder().setData(ByteString.copyFrom(buffer, 0, n)).build());
                        }
                        stream.send(RelayDown.newBuilder().setHalfClose(true).build());
                        synchronized (this) {
                            downClosed = true;
                        }
                        finishIfDone();
                    } catch (IOException | RuntimeException e) {
                        relayed.close();
                        stream.fail(Status.UNAVAILABLE.withDescription("FAILED: relay ended: " + e.getMessage()));
                    }
                });
            }

            @Override
            public void onError(Throwable t) {
                if (channel != null) {
                    channel.close();
                }
            }

            @Override
            public void onCompleted() {
                // The caller ended its side: as a half-close if it sent none.
                if (channel != null) {
                    try {
                        closeUp();
                    } catch (IOException e) {
                        channel.close();
                    }
                }
            }
        };
        CreditedStream<RelayUp, RelayDown> stream = CreditedStream.create(CreditedStream.Kind.RUNTIME_RELAY, handler,
                Thread.ofVirtual().name("relay-delivery").factory());
        self.set(stream);
        stream.connect(down);
        return stream.inbound();
    }

    @Override
    public StreamObserver<DnsAnswer> dns(StreamObserver<DnsQuery> queries) {
        if (!answeringDns.compareAndSet(false, true)) {
            queries.onError(Status.FAILED_PRECONDITION.withDescription("INVALID: the DNS plane is already taken").asRuntimeException());
            return new StreamObserver<>() {
                @Override
                public void onNext(DnsAnswer value) {
                }

                @Override
                public void onError(Throwable t) {
                }

                @Override
                public void onCompleted() {
                }
            };
        }
        Map<Long, PendingDnsQuery> waiting = new ConcurrentHashMap<>();
        AtomicLong ids = new AtomicLong();
        AtomicBoolean open = new AtomicBoolean(true);
        ServerCallStreamObserver<DnsQuery> call = (ServerCallStreamObserver<DnsQuery>) queries;
        java.util.function.Consumer<DnsAnswer> deliver = answer -> {
            PendingDnsQuery query = waiting.remove(answer.getQueryId());
            if (query == null) {
                return;
            }
            if (answer.hasMessage()) {
                query.answer(answer.getMessage().toByteArray());
            } else {
                query.refuse(parseReason(answer.getDenyReason()));
            }
        };
        // Asks one query of the supervisor: on the lane if it is keyed, else on this stream.
        java.util.function.Consumer<PendingDnsQuery> ask = pending -> {
            long id = ids.incrementAndGet();
            waiting.put(id, pending);
            if (!open.get()) {
                // The plane ended meanwhile: its sweep may have run before this query was waiting.
                if (waiting.remove(id) != null) {
                    pending.refuse(DenyReason.MEDIATION_UNAVAILABLE);
                }
                return;
            }
            DnsQuery.Builder query = DnsQuery.newBuilder().setQueryId(id).setMessage(ByteString.copyFrom(pending.query()));
            switch (pending.identity()) {
            case IdentityResolution.Resolved r -> query.setIdentity(identity(r.identity()));
            case IdentityResolution.Unresolved u -> query.setUnresolvedReason(u.reason());
            }
            DnsQuery built = query.build();
            try {
                if (!askOnLane(built)) {
                    synchronized (queries) {
                        queries.onNext(built);
                    }
                }
            } catch (RuntimeException e) {
                // Neither the lane nor the stream took it: refused once, here, and no longer waiting.
                if (waiting.remove(id) != null) {
                    pending.refuse(DenyReason.MEDIATION_UNAVAILABLE);
                }
            }
        };
        laneAnswers = deliver;
        control.supervision(true);
        // From now on the relay asks on its own thread (one hand-off less per query); the loop
        // below takes what was queued before, and everything if the broker cannot ask directly.
        control.askDnsDirectly(Optional.of(ask));
        Thread.ofVirtual().name("dns-plane").start(() -> {
            try {
                while (open.get() && !call.isCancelled() && control.supervised()) {
                    Optional<PendingDnsQuery> next = control.mediation().acceptDns(MEDIATION_POLL);
                    if (next.isPresent()) {
                        ask.accept(next.get());
                    }
                }
            } catch (RuntimeException e) {
                LOGGER.log(System.Logger.Level.WARNING, "DNS plane stopped: " + e);
            } finally {
                // The supervisor ends its mediation by completing this stream (a server-streaming
                // call's cancel never reaches the runtime once its request half is closed): it is
                // gone as a decider, so egress stops as when PendingConnections ends.
                control.supervision(false);
                open.set(false);
                control.askDnsDirectly(Optional.empty());
                laneAnswers = answer -> { };
                answeringDns.set(false);
                for (Long id : List.copyOf(waiting.keySet())) {
                    PendingDnsQuery q = waiting.remove(id);
                    if (q != null) {
                        q.refuse(DenyReason.MEDIATION_UNAVAILABLE);
                    }
                }
            }
        });
        return new StreamObserver<>() {
            @Override
            public void onNext(DnsAnswer answer) {
                deliver.accept(answer);
            }

            @Override
            public void onError(Throwable t) {
                open.set(false);
            }

            @Override
            public void onCompleted() {
                open.set(false);
            }
        };
    }

    static Identity identity(BinaryIdentity identity) {
        Identity.Builder wire = Identity.newBuilder().setExecutable(file(identity.executable()))
                .addAllCmdline(identity.diagnosticCmdline());
        identity.ancestors().forEach(a -> wire.addAncestors(file(a)));
        return wire.build();
    }

    private static ExecutableFile file(Executable executable) {
        return ExecutableFile.newBuilder().setPath(executable.path()).setSha256(executable.sha256().orElse("")).build();
    }

    static ExitStatus wire(openshell.isolation.ExitStatus exit) {
        return switch (exit) {
            case openshell.isolation.ExitStatus.Exited e -> ExitStatus.newBuilder().setCode(e.code()).build();
            case openshell.isolation.ExitStatus.Signaled s -> ExitStatus.newBuilder().setSignal(s.signal()).build();
        };
    }

    /** The errno a supervisor names maps to the contract's reason; anything unknown is a policy denial. */
    static DenyReason denyReason(int errno) {
        return switch (errno) {
            case 11 -> DenyReason.EXHAUSTED;
            case 110 -> DenyReason.TIMEOUT;
            case 125 -> DenyReason.MEDIATION_UNAVAILABLE;
            default -> DenyReason.POLICY;
        };
    }

    private static DenyReason parseReason(String name) {
        for (DenyReason reason : DenyReason.values()) {
            if (reason.name().equals(name)) {
                return reason;
            }
        }
        return DenyReason.POLICY;
    }

    private static long processId(String id) {
        try {
            return Long.parseLong(id);
        } catch (NumberFormatException e) {
            throw new BackendException(BackendException.Kind.INVALID, "no process '" + id + "'");
        }
    }

    private static String directory(String requested) {
        return requested.isEmpty() ? "/" : requested;
    }

    private static ProcessSignal signal(int number) {
        for (ProcessSignal s : ProcessSignal.values()) {
            if (s.number() == number) {
                return s;
            }
        }
        throw new BackendException(BackendException.Kind.INVALID, "signal " + number + " may not be sent");
    }
}
