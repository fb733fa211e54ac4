package openshell.protocol;

import java.time.Clock;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

import com.google.protobuf.ByteString;
import com.google.protobuf.Message;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;

import openshell.protocol.wire.AttachRequest;
import openshell.protocol.wire.AttachResult;
import openshell.protocol.wire.ConfirmRequest;
import openshell.protocol.wire.ConfirmResult;
import openshell.protocol.wire.DnsAnswer;
import openshell.protocol.wire.DnsQuery;
import openshell.protocol.wire.ExecRequest;
import openshell.protocol.wire.ExecResult;
import openshell.protocol.wire.ExitStatus;
import openshell.protocol.wire.PendingConnection;
import openshell.protocol.wire.PendingConnectionsRequest;
import openshell.protocol.wire.PortForwardRequest;
import openshell.protocol.wire.PortForwardResult;
import openshell.protocol.wire.ProcessInput;
import openshell.protocol.wire.ProcessOutput;
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
 * A small runtime service for the acceptance tests: control operations go through the real
 * ledger and exec admission; streams echo so both directions are observable. It is a test
 * double of the sandbox runtime, not of the protocol under test.
 */
final class TestRuntime extends SandboxRuntimeGrpc.SandboxRuntimeImplBase {
    final ControlLedger ledger;
    final AtomicInteger executions = new AtomicInteger();
    /** {@link RuntimeEndpoint#linkHeard()} as the last control call saw it. */
    volatile Runnable linkHeard = () -> { };
    final Map<Long, DnsAnswer> dnsAnswers = new ConcurrentHashMap<>();
    /** Relays the supervisor cancelled, as this service was told (CreditedStream's cancel handler). */
    final AtomicInteger relayCancels = new AtomicInteger();
    /** Released to let a stalled relay ({@code stall}) read again. */
    final CountDownLatch stalled = new CountDownLatch(1);
    /** Counted down when a stalled relay stopped reading. */
    final CountDownLatch stallEntered = new CountDownLatch(1);
    private final Clock clock;

    TestRuntime(long generation, Clock clock) {
        this.ledger = new ControlLedger(generation);
        this.clock = clock;
    }

    private <R extends Message> void control(Message request, StreamObserver<R> observer, Supplier<R> operation) {
        linkHeard = RuntimeEndpoint.linkHeard();
        R result;
        try {
            result = ledger.execute(request, () -> {
                executions.incrementAndGet();
                return operation.get();
            });
        } catch (ProtocolException e) {
            observer.onError(Status.FAILED_PRECONDITION.withDescription(e.refusal().name()).asRuntimeException());
            return;
        }
        observer.onNext(result);
        observer.onCompleted();
    }

    @Override
    public void attach(AttachRequest request, StreamObserver<AttachResult> observer) {
        control(request, observer, () -> AttachResult.getDefaultInstance());
    }

    @Override
    public void confirm(ConfirmRequest request, StreamObserver<ConfirmResult> observer) {
        control(request, observer, () -> ConfirmResult.newBuilder().setConfirmed(!request.getPolicyDigest().isEmpty()).build());
    }

    @Override
    public void startAgent(StartAgentRequest request, StreamObserver<StartAgentResult> observer) {
        control(request, observer, () -> StartAgentResult.newBuilder().setProcessId("agent-" + request.getArgv(0)).build());
    }

    @Override
    public void exec(ExecRequest request, StreamObserver<ExecResult> observer) {
        control(request, observer, () -> {
            ExecAdmission.admit(request, clock);
            return ExecResult.newBuilder().setProcessId("exec-" + executions.get()).build();
        });
    }

    @Override
    public void wait(WaitRequest request, StreamObserver<WaitResult> observer) {
        control(request, observer, () -> WaitResult.newBuilder().setExit(ExitStatus.newBuilder().setCode(7)).build());
    }

    @Override
    public void signal(SignalRequest request, StreamObserver<SignalResult> observer) {
        control(request, observer, () -> SignalResult.newBuilder().setDelivered(request.getSignal() == 15).build());
    }

    @Override
    public void terminate(TerminateRequest request, StreamObserver<TerminateResult> observer) {
        control(request, observer, () -> TerminateResult.newBuilder().setExit(ExitStatus.newBuilder().setSignal(9)).build());
    }

    @Override
    public void terminateBoundary(TerminateBoundaryRequest request, StreamObserver<TerminateBoundaryResult> observer) {
        control(request, observer, () -> TerminateBoundaryResult.newBuilder().setTerminated(true).build());
    }

    @Override
    public void resize(ResizeRequest request, StreamObserver<ResizeResult> observer) {
        control(request, observer, () -> ResizeResult.newBuilder().setResized(request.getColumns() == 120).build());
    }

    @Override
    public void updateProviderEnvironment(UpdateProviderEnvironmentRequest request,
                                          StreamObserver<UpdateProviderEnvironmentResult> observer) {
        control(request, observer, () -> UpdateProviderEnvironmentResult.newBuilder()
                .setAppliedEpoch(request.getCredentialEpoch()).build());
    }

    @Override
    public void portForward(PortForwardRequest request, StreamObserver<PortForwardResult> observer) {
        control(request, observer, () -> PortForwardResult.newBuilder().setForwardId("fwd-" + request.getSandboxPort()).build());
    }

    @Override
    public StreamObserver<ProcessInput> attachProcess(StreamObserver<ProcessOutput> output) {
        return new StreamObserver<>() {
            @Override
            public void onNext(ProcessInput input) {
                switch (input.getKindCase()) {
                case STDIN -> output.onNext(ProcessOutput.newBuilder().setStdout(input.getStdin()).build());
                case STDIN_CLOSED -> {
                    output.onNext(ProcessOutput.newBuilder().setExit(ExitStatus.newBuilder().setCode(0)).build());
                    output.onCompleted();
                }
                default -> {
                    // the process id names the process; nothing to echo
                }
                }
            }

            @Override
            public void onError(Throwable t) {
            }

            @Override
            public void onCompleted() {
            }
        };
    }

    @Override
    public void pendingConnections(PendingConnectionsRequest request, StreamObserver<PendingConnection> observer) {
        observer.onNext(PendingConnection.newBuilder().setConnectionId("c1").setDestinationHost("example.org")
                .setDestinationPort(443).setPid(42).setExecutable("/usr/bin/curl").build());
        observer.onCompleted();
    }

    /**
     * Relays under message credits, like the real runtime. The connection id picks the behaviour:
     * {@code source-N} sends N bytes; {@code sink} counts what arrives; {@code stall} blocks on
     * its first data message until {@link #stalled} is released (a workload that stops reading);
     * anything else echoes.
     */
    @Override
    public StreamObserver<RelayUp> relay(StreamObserver<RelayDown> down) {
        AtomicReference<CreditedStream<RelayUp, RelayDown>> self = new AtomicReference<>();
        StreamObserver<RelayUp> handler = new StreamObserver<>() {
            private boolean decided;
            private boolean allowed;
            private String id = "";
            private long sunk;

            @Override
            public void onNext(RelayUp up) {
                CreditedStream<RelayUp, RelayDown> stream = self.get();
                if (!decided) {
                    decided = true;
                    allowed = up.hasDecision() && up.getDecision().getAllow();
                    id = up.getDecision().getConnectionId();
                    if (!allowed) {
                        stream.complete();
                    } else if (id.startsWith("source-")) {
                        long bytes = Long.parseLong(id.substring("source-".length()));
                        Thread.ofVirtual().start(() -> {
                            ByteString chunk = ByteString.copyFrom(new byte[CreditedStream.MAX_CHUNK_BYTES]);
                            for (long sent = 0; sent < bytes; sent += chunk.size()) {
                                stream.send(RelayDown.newBuilder().setData(chunk).build());
                            }
                            stream.send(RelayDown.newBuilder().setHalfClose(true).build());
                            stream.complete();
                        });
                    }
                    return;
                }
                if (!allowed) {
                    return;
                }
                if (id.equals("stall") && up.hasData()) {
                    stallEntered.countDown();
                    try {
                        stalled.await();
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    return;
                }
                if (id.equals("sink")) {
                    if (up.hasData()) {
                        sunk += up.getData().size();
                    } else if (up.getHalfClose()) {
                        stream.send(RelayDown.newBuilder().setData(ByteString.copyFromUtf8(Long.toString(sunk))).build());
                        stream.send(RelayDown.newBuilder().setHalfClose(true).build());
                        stream.complete();
                    }
                    return;
                }
                switch (up.getKindCase()) {
                case DATA -> stream.send(RelayDown.newBuilder().setData(up.getData()).build());
                case HALF_CLOSE -> {
                    stream.send(RelayDown.newBuilder().setHalfClose(true).build());
                    stream.complete();
                }
                default -> stream.fail(Status.INVALID_ARGUMENT.withDescription("second decision"));
                }
            }

            @Override
            public void onError(Throwable t) {
                if (Status.fromThrowable(t).getCode() == Status.Code.CANCELLED) {
                    relayCancels.incrementAndGet();
                }
            }

            @Override
            public void onCompleted() {
            }
        };
        CreditedStream<RelayUp, RelayDown> stream = CreditedStream.create(CreditedStream.Kind.RUNTIME_RELAY, handler,
                Thread.ofVirtual().factory());
        self.set(stream);
        stream.connect(down);
        return stream.inbound();
    }

    @Override
    public StreamObserver<DnsAnswer> dns(StreamObserver<DnsQuery> queries) {
        queries.onNext(DnsQuery.newBuilder().setQueryId(1).setMessage(com.google.protobuf.ByteString.copyFromUtf8("q1")).build());
        return new StreamObserver<>() {
            @Override
            public void onNext(DnsAnswer answer) {
                dnsAnswers.put(answer.getQueryId(), answer);
                queries.onCompleted();
            }

            @Override
            public void onError(Throwable t) {
            }

            @Override
            public void onCompleted() {
            }
        };
    }
}
