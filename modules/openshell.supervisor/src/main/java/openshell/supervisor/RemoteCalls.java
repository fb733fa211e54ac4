package openshell.supervisor;

import com.google.protobuf.Message;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import openshell.isolation.BackendException;
import openshell.protocol.RequestDigest;
import openshell.protocol.SupervisorLink;
import openshell.protocol.wire.SandboxRuntimeGrpc;

/**
 * Control calls to the runtime over one link: each stamped with a fresh request id and its
 * digest, bounded by a deadline, and with the runtime's refusal turned back into the contract's
 * {@link BackendException} kind (the runtime leads its status description with the kind).
 */
final class RemoteCalls {
    private final SupervisorLink link;

    RemoteCalls(SupervisorLink link) {
        this.link = link;
    }

    SupervisorLink link() {
        return link;
    }

    SandboxRuntimeGrpc.SandboxRuntimeStub async() {
        return SandboxRuntimeGrpc.newStub(link.channel());
    }

    <Q extends Message, R> R call(String operation, Q request, Duration deadline,
                                  java.util.function.BiFunction<SandboxRuntimeGrpc.SandboxRuntimeBlockingStub, Q, R> call) {
        if (!link.isOpen()) {
            throw new BackendException(BackendException.Kind.UNAVAILABLE, operation + ": the link to the runtime is closed");
        }
        Q stamped = RequestDigest.stamp(request, operation + "-" + UUID.randomUUID());
        try {
            return call.apply(SandboxRuntimeGrpc.newBlockingStub(link.channel())
                    .withDeadlineAfter(deadline.toMillis(), TimeUnit.MILLISECONDS), stamped);
        } catch (StatusRuntimeException e) {
            throw backendException(operation, e);
        }
    }

    <Q extends Message, R> R call(String operation, Q request,
                                  java.util.function.BiFunction<SandboxRuntimeGrpc.SandboxRuntimeBlockingStub, Q, R> call) {
        return call(operation, request, OpenShellRuntimeBackend.CALL_DEADLINE, call);
    }

    static BackendException backendException(String operation, StatusRuntimeException e) {
        String description = e.getStatus().getDescription() == null ? "" : e.getStatus().getDescription();
        for (BackendException.Kind kind : BackendException.Kind.values()) {
            String prefix = kind.name() + ": ";
            if (description.startsWith(prefix)) {
                return new BackendException(kind, operation + ": " + description.substring(prefix.length()), e);
            }
        }
        BackendException.Kind kind = switch (e.getStatus().getCode()) {
            case UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED -> BackendException.Kind.UNAVAILABLE;
            case PERMISSION_DENIED, UNAUTHENTICATED -> BackendException.Kind.DENIED;
            case INVALID_ARGUMENT, FAILED_PRECONDITION -> BackendException.Kind.INVALID;
            default -> BackendException.Kind.FAILED;
        };
        return new BackendException(kind, operation + ": " + e.getStatus().getCode() + " " + description, e);
    }

    static boolean deadlineExceeded(BackendException e) {
        return e.getCause() instanceof StatusRuntimeException s && s.getStatus().getCode() == Status.Code.DEADLINE_EXCEEDED;
    }

}
