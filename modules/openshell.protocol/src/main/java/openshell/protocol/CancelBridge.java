package openshell.protocol;

import java.util.concurrent.atomic.AtomicBoolean;

import io.grpc.ForwardingServerCall;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;

/**
 * Tells a runtime service that the supervisor cancelled its call. Helidon 4.1.7's gRPC
 * server never passes RST_STREAM to the call, so a service would keep relaying for a
 * connection nobody reads. Bound outermost around each service, this reaches the whole
 * listener chain: on a reset ({@link ResetTap}, {@link StreamRelease}) it calls
 * {@code onCancel} and makes {@code isCancelled()} true, as grpc-java's own server does.
 */
final class CancelBridge implements ServerInterceptor {
    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                       ServerCallHandler<Q, R> next) {
        AtomicBoolean cancelled = new AtomicBoolean();
        ServerCall<Q, R> watched = new ForwardingServerCall.SimpleForwardingServerCall<>(call) {
            @Override
            public boolean isCancelled() {
                return cancelled.get() || super.isCancelled();
            }
        };
        ServerCall.Listener<Q> listener = next.startCall(watched, headers);
        StreamRelease.current().ifPresent(stream -> stream.onCancel(() -> {
            if (cancelled.compareAndSet(false, true)) {
                listener.onCancel();
            }
        }));
        return listener;
    }
}
