package openshell.protocol;

import java.time.Duration;
import java.time.Instant;

import com.google.protobuf.ByteString;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import openshell.protocol.wire.ConfirmRequest;
import openshell.protocol.wire.DnsAnswer;
import openshell.protocol.wire.DnsQuery;
import openshell.protocol.wire.ExecRequest;
import openshell.protocol.wire.PendingConnection;
import openshell.protocol.wire.PendingConnectionsRequest;
import openshell.protocol.wire.PortForwardRequest;
import openshell.protocol.wire.ProcessInput;
import openshell.protocol.wire.ProcessOutput;
import openshell.protocol.wire.RelayDecision;
import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;
import openshell.protocol.wire.ResizeRequest;
import openshell.protocol.wire.SandboxRuntimeGrpc.SandboxRuntimeBlockingStub;
import openshell.protocol.wire.SignalRequest;
import openshell.protocol.wire.StartAgentRequest;
import openshell.protocol.wire.TerminateBoundaryRequest;
import openshell.protocol.wire.TerminateRequest;
import openshell.protocol.wire.UpdateProviderEnvironmentRequest;
import openshell.protocol.wire.WaitRequest;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ControlPlaneTest {
    private static final Duration WAIT = Duration.ofSeconds(20);

    @ParameterizedTest
    @MethodSource("openshell.protocol.Topologies#all")
    void everyControlOperationRoundTrips(Launch.Kind kind, Initiator initiator) {
        try (Launch launch = new Launch(kind, initiator); SupervisorLink link = launch.attached()) {
            SandboxRuntimeBlockingStub stub = Launch.blocking(link);
            assertTrue(stub.confirm(RequestDigest.stamp(ConfirmRequest.newBuilder().setPolicyDigest("p").build(), "1"))
                    .getConfirmed());
            assertEquals("agent-claude", stub.startAgent(RequestDigest.stamp(
                    StartAgentRequest.newBuilder().addArgv("claude").build(), "2")).getProcessId());
            assertTrue(stub.exec(RequestDigest.stamp(exec(Instant.now().plusSeconds(30)), "3")).getProcessId()
                    .startsWith("exec-"));
            assertEquals(7, stub.wait(RequestDigest.stamp(WaitRequest.newBuilder().setProcessId("p").build(), "4"))
                    .getExit().getCode());
            assertTrue(stub.signal(RequestDigest.stamp(SignalRequest.newBuilder().setSignal(15).build(), "5"))
                    .getDelivered());
            assertEquals(9, stub.terminate(RequestDigest.stamp(TerminateRequest.newBuilder().setProcessId("p").build(),
                    "6")).getExit().getSignal());
            assertTrue(stub.terminateBoundary(RequestDigest.stamp(
                    TerminateBoundaryRequest.newBuilder().setReason("done").build(), "7")).getTerminated());
            assertTrue(stub.resize(RequestDigest.stamp(ResizeRequest.newBuilder().setColumns(120).setRows(40).build(),
                    "8")).getResized());
            assertEquals(4, stub.updateProviderEnvironment(RequestDigest.stamp(
                    UpdateProviderEnvironmentRequest.newBuilder().putEnvironment("K", "V").setCredentialEpoch(4).build(),
                    "9")).getAppliedEpoch());
            assertEquals("fwd-8080", stub.portForward(RequestDigest.stamp(
                    PortForwardRequest.newBuilder().setSandboxPort(8080).build(), "10")).getForwardId());
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.protocol.Topologies#all")
    void replayReturnsTheRecordedResultAndOtherDigestIsRefused(Launch.Kind kind, Initiator initiator) {
        try (Launch launch = new Launch(kind, initiator); SupervisorLink link = launch.attached()) {
            SandboxRuntimeBlockingStub stub = Launch.blocking(link);
            ExecRequest request = RequestDigest.stamp(exec(Instant.now().plusSeconds(30)), "exec-once");
            String first = stub.exec(request).getProcessId();
            int executions = launch.service.executions.get();
            assertEquals(first, stub.exec(request).getProcessId());
            assertEquals(executions, launch.service.executions.get(), "a replay must not run the operation again");

            ExecRequest other = RequestDigest.stamp(exec(Instant.now().plusSeconds(31)).toBuilder()
                    .addArgv("--other").build(), "exec-once");
            StatusRuntimeException mismatch = assertThrows(StatusRuntimeException.class, () -> stub.exec(other));
            assertTrue(mismatch.getStatus().getDescription().contains(Refusal.DIGEST_MISMATCH.name()));

            ExecRequest forged = request.toBuilder().addArgv("--smuggled").build();
            StatusRuntimeException invalid = assertThrows(StatusRuntimeException.class, () -> stub.exec(forged));
            assertTrue(invalid.getStatus().getDescription().contains(Refusal.DIGEST_INVALID.name()));
            assertEquals(executions, launch.service.executions.get());
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.protocol.Topologies#all")
    void expiredExecIsRefused(Launch.Kind kind, Initiator initiator) {
        try (Launch launch = new Launch(kind, initiator); SupervisorLink link = launch.attached()) {
            ExecRequest late = RequestDigest.stamp(exec(Instant.now().minusMillis(1)), "late");
            StatusRuntimeException refused = assertThrows(StatusRuntimeException.class,
                    () -> Launch.blocking(link).exec(late));
            assertTrue(refused.getStatus().getDescription().contains(Refusal.EXEC_EXPIRED.name()));
            // Replaying the same id returns the same refusal: it never starts late.
            StatusRuntimeException again = assertThrows(StatusRuntimeException.class,
                    () -> Launch.blocking(link).exec(late));
            assertEquals(refused.getStatus().getDescription(), again.getStatus().getDescription());
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.protocol.Topologies#all")
    void streamsCarryProcessIoRelayAndDns(Launch.Kind kind, Initiator initiator) {
        try (Launch launch = new Launch(kind, initiator); SupervisorLink link = launch.attached()) {
            StreamProbe<ProcessOutput> output = new StreamProbe<>();
            StreamObserver<ProcessInput> input = Launch.async(link).attachProcess(output);
            input.onNext(ProcessInput.newBuilder().setProcessId("exec-1").build());
            input.onNext(ProcessInput.newBuilder().setStdin(ByteString.copyFromUtf8("hello")).build());
            input.onNext(ProcessInput.newBuilder().setStdinClosed(true).build());
            input.onCompleted();
            output.await(WAIT);
            assertNull(output.error);
            assertEquals("hello", output.received.get(0).getStdout().toStringUtf8());
            assertEquals(0, output.received.get(1).getExit().getCode(), "exit comes after the drained output");

            StreamProbe<PendingConnection> pending = new StreamProbe<>();
            Launch.async(link).pendingConnections(PendingConnectionsRequest.getDefaultInstance(), pending);
            pending.await(WAIT);
            assertEquals("c1", pending.received.get(0).getConnectionId());

            StreamProbe<RelayDown> down = new StreamProbe<>();
            StreamObserver<RelayUp> up = Launch.async(link).relay(down);
            up.onNext(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder().setConnectionId("c1").setAllow(true))
                    .build());
            up.onNext(RelayUp.newBuilder().setData(ByteString.copyFromUtf8("GET /")).build());
            up.onNext(RelayUp.newBuilder().setHalfClose(true).build());
            up.onCompleted();
            down.await(WAIT);
            assertEquals("GET /", down.received.get(0).getData().toStringUtf8());
            assertTrue(down.received.get(1).getHalfClose());

            StreamProbe<RelayDown> denied = new StreamProbe<>();
            StreamObserver<RelayUp> deniedUp = Launch.async(link).relay(denied);
            deniedUp.onNext(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder().setConnectionId("c2")
                    .setAllow(false).setDenyErrno(111)).build());
            deniedUp.onCompleted();
            denied.await(WAIT);
            assertTrue(denied.received.isEmpty(), "a denied connection carries no bytes");

            StreamProbe<DnsQuery> queries = new StreamProbe<>();
            StreamObserver<DnsAnswer> answers = Launch.async(link).dns(new StreamObserver<>() {
                @Override
                public void onNext(DnsQuery query) {
                    queries.onNext(query);
                }

                @Override
                public void onError(Throwable t) {
                    queries.onError(t);
                }

                @Override
                public void onCompleted() {
                    queries.onCompleted();
                }
            });
            // The runtime asks first; answer what it asked.
            answers.onNext(DnsAnswer.newBuilder().setQueryId(queries.awaitFirst(WAIT).getQueryId())
                    .setMessage(ByteString.copyFromUtf8("a1")).build());
            queries.await(WAIT);
            answers.onCompleted();
            assertEquals("a1", launch.service.dnsAnswers.get(1L).getMessage().toStringUtf8());
        }
    }

    static ExecRequest exec(Instant deadline) {
        return ExecRequest.newBuilder().addArgv("/bin/true").setAdmissionDeadlineEpochMillis(deadline.toEpochMilli())
                .build();
    }
}
