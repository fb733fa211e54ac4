package openshell.protocol;

import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.ForwardingServerCall;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;

import openshell.protocol.wire.AttachRequest;
import openshell.protocol.wire.AttachResult;
import openshell.protocol.wire.SandboxRuntimeGrpc;

/**
 * Checks the bearer token on every call (each unary call and each stream carries its own
 * headers, so a later stream is checked as strictly as the first call), then the session
 * gate: only Attach may run on a link that is not the attached one. Fails closed: a call
 * that cannot be tied to its link is refused.
 */
final class BearerCheck implements ServerInterceptor {
    private static final String BEARER = "Bearer ";

    private final RuntimeEndpoint endpoint;

    BearerCheck(RuntimeEndpoint endpoint) {
        this.endpoint = endpoint;
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                      ServerCallHandler<Q, R> next) {
        CallScope scope = CallScope.current().orElse(null);
        if (scope == null) {
            return refuse(call, Status.UNAUTHENTICATED, Refusal.TRANSPORT_FAILED, "call not tied to a link");
        }
        ServedLink link = scope.link();
        String authorization = scope.authorization().orElse("");
        if (!authorization.startsWith(BEARER)) {
            return refuse(call, Status.UNAUTHENTICATED, Refusal.TOKEN_ABSENT, "no bearer token");
        }
        TokenClaims claims;
        try {
            claims = endpoint.verifier().verify(authorization.substring(BEARER.length()));
        } catch (ProtocolException e) {
            return refuse(call, Status.UNAUTHENTICATED, e.refusal(), e.getMessage());
        }
        if (!link.promote(claims.credentialEpoch())) {
            ServerCall.Listener<Q> refused = refuse(call, Status.RESOURCE_EXHAUSTED, Refusal.CONNECTION_LIMIT,
                    "control connections at " + ProtocolLimits.MAX_CONTROL_CONNECTIONS);
            link.close(Refusal.CONNECTION_LIMIT);
            return refused;
        }
        // The service's calls can tell the watchdog that this link's supervisor was heard elsewhere.
        Runnable heard = link::heard;
        Context withLink = Context.current().withValue(RuntimeEndpoint.LINK_HEARD, heard);
        ServerCallHandler<Q, R> inScope = (c, h) -> Contexts.interceptCall(withLink, c, h, next);
        String method = call.getMethodDescriptor().getFullMethodName();
        if (method.equals(SandboxRuntimeGrpc.getAttachMethod().getFullMethodName())) {
            return attach(call, headers, inScope, link, claims);
        }
        if (!endpoint.gate().isLive(link)) {
            return refuse(call, Status.FAILED_PRECONDITION, Refusal.ATTACH_CONFLICT, "link is not attached");
        }
        return inScope.startCall(call, headers);
    }

    private <Q, R> ServerCall.Listener<Q> attach(ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next,
                                                 ServedLink link, TokenClaims claims) {
        boolean[] resumed = new boolean[1];
        ServerCall<Q, R> stamping = new ForwardingServerCall.SimpleForwardingServerCall<>(call) {
            @Override
            public void sendMessage(R message) {
                if (message instanceof AttachResult result) {
                    @SuppressWarnings("unchecked")
                    R stamped = (R) result.toBuilder()
                            .setRuntimeGeneration(claims.runtimeGeneration())
                            .setResumed(resumed[0])
                            .build();
                    super.sendMessage(stamped);
                } else {
                    super.sendMessage(message);
                }
            }
        };
        ServerCall.Listener<Q> delegate = next.startCall(stamping, headers);
        return new ServerCall.Listener<>() {
            private boolean refused;

            @Override
            public void onMessage(Q message) {
                if (refused) {
                    return;
                }
                try {
                    resumed[0] = endpoint.gate().attach(((AttachRequest) message).getSupervisorId(),
                            claims.credentialEpoch(), link);
                } catch (ProtocolException e) {
                    refused = true;
                    call.close(Status.FAILED_PRECONDITION.withDescription(e.getMessage()), new Metadata());
                    return;
                }
                delegate.onMessage(message);
            }

            @Override
            public void onHalfClose() {
                if (!refused) {
                    delegate.onHalfClose();
                }
            }

            @Override
            public void onCancel() {
                delegate.onCancel();
            }

            @Override
            public void onComplete() {
                delegate.onComplete();
            }

            @Override
            public void onReady() {
                if (!refused) {
                    delegate.onReady();
                }
            }
        };
    }

    private static <Q, R> ServerCall.Listener<Q> refuse(ServerCall<Q, R> call, Status status, Refusal refusal,
                                                        String detail) {
        // The refusal leads the description: Helidon 4.1.7 cannot send custom trailer metadata.
        call.close(status.withDescription(detail.startsWith(refusal.name()) ? detail : refusal.name() + ": " + detail),
                new Metadata());
        return new ServerCall.Listener<>() {
        };
    }
}
