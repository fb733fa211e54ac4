package openshell.protocol;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.MethodDescriptor;

/**
 * A grpc-java channel whose calls are streams of the link's one HTTP/2 connection.
 */
final class LinkChannel extends Channel {
    private final SupervisorLink link;

    LinkChannel(SupervisorLink link) {
        this.link = link;
    }

    @Override
    public <Q, R> ClientCall<Q, R> newCall(MethodDescriptor<Q, R> method, CallOptions options) {
        return new LinkCall<>(link, method, options);
    }

    @Override
    public String authority() {
        return link.serverName();
    }
}
