package openshell.supervisor;

import io.grpc.stub.StreamObserver;
import openshell.protocol.wire.DnsAnswer;
import openshell.protocol.wire.DnsQuery;

/**
 * The DNS stream of a recording runtime in the mediation tests that make no queries: it never
 * asks, ignores answers, and ends its side when the supervisor ends its own.
 */
final class SilentDns {
    private SilentDns() {
    }

    static StreamObserver<DnsAnswer> stream(StreamObserver<DnsQuery> queries) {
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
