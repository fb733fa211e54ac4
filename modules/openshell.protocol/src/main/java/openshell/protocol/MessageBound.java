package openshell.protocol;

import com.google.protobuf.MessageLite;
import io.grpc.ForwardingServerCallListener;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;

/**
 * Refuses any received message above {@link ProtocolLimits#MAX_CONTROL_MESSAGE_BYTES}.
 * Relay and process streams send their bytes in chunks below it.
 */
final class MessageBound implements ServerInterceptor {
    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                      ServerCallHandler<Q, R> next) {
        return new ForwardingServerCallListener.SimpleForwardingServerCallListener<>(next.startCall(call, headers)) {
            private boolean refused;

            @Override
            public void onMessage(Q message) {
                if (refused) {
                    return;
                }
                if (message instanceof MessageLite lite
                        && lite.getSerializedSize() > ProtocolLimits.MAX_CONTROL_MESSAGE_BYTES) {
                    refused = true;
                    call.close(Status.RESOURCE_EXHAUSTED.withDescription(Refusal.INVALID_ARGUMENT + ": message of "
                            + lite.getSerializedSize() + " bytes exceeds " + ProtocolLimits.MAX_CONTROL_MESSAGE_BYTES),
                            new Metadata());
                    return;
                }
                super.onMessage(message);
            }

            @Override
            public void onHalfClose() {
                if (!refused) {
                    super.onHalfClose();
                }
            }
        };
    }
}
