package openshell.protocol;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.MethodDescriptor;

/**
 * A grpc-java channel whose calls are streams of one HTTP/2 connection (a link, or the gateway's).
 */
final class LinkChannel extends Channel {
    private final CallHost link;

    LinkChannel(CallHost link) {
        this.link = link;
    }

    @Override
    public <Q, R> ClientCall<Q, R> newCall(MethodDescriptor<Q, R> method, CallOptions options) {
        return new LinkCall<>(link, method, options);
    }

    @Override
    public String authority() {
        return link.authority();
    }
}
