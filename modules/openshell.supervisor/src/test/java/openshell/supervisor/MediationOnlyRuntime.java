package openshell.supervisor;

import io.grpc.stub.StreamObserver;
import openshell.protocol.wire.AttachRequest;
import openshell.protocol.wire.AttachResult;
import openshell.protocol.wire.DnsAnswer;
import openshell.protocol.wire.DnsQuery;
import openshell.protocol.wire.SandboxRuntimeGrpc;

/**
 * A recording runtime for the mediation tests: it attaches as generation 1, its DNS stream never
 * asks (ignores answers, ends its side when the supervisor ends its own), and each test says what
 * its PendingConnections and Relay streams do.
 */
abstract class MediationOnlyRuntime extends SandboxRuntimeGrpc.SandboxRuntimeImplBase {
    @Override
    public void attach(AttachRequest request, StreamObserver<AttachResult> observer) {
        observer.onNext(AttachResult.newBuilder().setRuntimeGeneration(1).build());
        observer.onCompleted();
    }

    @Override
    public StreamObserver<DnsAnswer> dns(StreamObserver<DnsQuery> queries) {
        return new StreamObserver<>() {
            @Override
            public void onNext(DnsAnswer answer) {
            }

            @Override
            public void onError(Throwable t) {
            }

            @Override
            public void onCompleted() {
                queries.onCompleted();
            }
        };
    }
}
