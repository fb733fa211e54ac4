package openshell.perf.protocol;

import java.util.concurrent.atomic.AtomicReference;

import com.google.protobuf.ByteString;
import io.grpc.stub.StreamObserver;

import openshell.protocol.ControlLedger;
import openshell.protocol.CreditedStream;
import openshell.protocol.wire.AttachRequest;
import openshell.protocol.wire.AttachResult;
import openshell.protocol.wire.ConfirmRequest;
import openshell.protocol.wire.ConfirmResult;
import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;
import openshell.protocol.wire.SandboxRuntimeGrpc;

/**
 * The runtime side of the benchmark: control calls go through the real ledger; a relay
 * named {@code sink} counts what it receives, {@code source-N} sends N bytes.
 */
final class BenchRuntime extends SandboxRuntimeGrpc.SandboxRuntimeImplBase {
    static final int CHUNK = CreditedStream.MAX_CHUNK_BYTES;

    private final ControlLedger ledger;

    BenchRuntime(long generation) {
        this.ledger = new ControlLedger(generation);
    }

    @Override
    public void attach(AttachRequest request, StreamObserver<AttachResult> observer) {
        observer.onNext(ledger.execute(request, AttachResult::getDefaultInstance));
        observer.onCompleted();
    }

    @Override
    public void confirm(ConfirmRequest request, StreamObserver<ConfirmResult> observer) {
        observer.onNext(ledger.execute(request, () -> ConfirmResult.newBuilder().setConfirmed(true).build()));
        observer.onCompleted();
    }

    @Override
    public StreamObserver<RelayUp> relay(StreamObserver<RelayDown> down) {
        AtomicReference<CreditedStream<RelayUp, RelayDown>> self = new AtomicReference<>();
        StreamObserver<RelayUp> handler = new StreamObserver<>() {
            private long sunk;

            @Override
            public void onNext(RelayUp up) {
                CreditedStream<RelayUp, RelayDown> stream = self.get();
                if (up.hasDecision()) {
                    String id = up.getDecision().getConnectionId();
                    if (id.startsWith("source-")) {
                        long bytes = Long.parseLong(id.substring("source-".length()));
                        Thread.ofVirtual().start(() -> {
                            ByteString chunk = ByteString.copyFrom(new byte[CHUNK]);
                            for (long sent = 0; sent < bytes; sent += CHUNK) {
                                stream.send(RelayDown.newBuilder().setData(chunk).build());
                            }
                            stream.complete();
                        });
                    }
                } else if (up.hasData()) {
                    sunk += up.getData().size();
                } else if (up.getHalfClose()) {
                    stream.send(RelayDown.newBuilder().setData(ByteString.copyFromUtf8(Long.toString(sunk))).build());
                    stream.complete();
                }
            }

            @Override
            public void onError(Throwable t) {
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
}
