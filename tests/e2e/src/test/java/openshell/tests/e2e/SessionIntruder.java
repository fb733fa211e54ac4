package openshell.tests.e2e;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import io.helidon.common.tls.Tls;
import io.helidon.webclient.grpc.GrpcClient;
import openshell.protocol.wire.GatewayMessage;
import openshell.protocol.wire.GatewaySessionGrpc;
import openshell.protocol.wire.SessionHello;
import openshell.protocol.wire.SupervisorBundle;
import openshell.protocol.wire.SupervisorMessage;

/**
 * An attacker holding a copy of a supervisor's launch bundle (its token pair of epoch 1) who
 * opens the gateway's supervisor session with it, as the real supervisor does, to take the
 * sandbox's session over.
 */
final class SessionIntruder {
    /** How long the gateway may take to answer a hello. */
    static final int ANSWER_SECONDS = 60;

    /**
     * What the gateway did with the intruder's hello.
     *
     * @param received messages the gateway sent (config, tokens: a seized session)
     * @param ending   how the stream ended
     */
    record Attempt(List<GatewayMessage> received, Throwable ending) {
        /** {@link #refusal()} of a stream the gateway ended without an error status. */
        static final String COMPLETED = "completed";

        /** @return the gRPC status description, or the stream's end if it was not a gRPC status */
        String refusal() {
            if (ending == null) {
                return COMPLETED;
            }
            return ending instanceof StatusRuntimeException s ? s.getStatus().getCode() + ": "
                    + s.getStatus().getDescription() : String.valueOf(ending);
        }
    }

    private SessionIntruder() {
    }

    /**
     * @param bundle a captured supervisor launch bundle
     * @return its gateway-audience token
     */
    static String gatewayToken(Path bundle) throws Exception {
        return SupervisorBundle.parseFrom(Files.readAllBytes(bundle)).getGatewayToken();
    }

    /**
     * @param bundle a captured supervisor launch bundle
     * @return the credential epoch of its tokens
     */
    static long epoch(Path bundle) throws Exception {
        return SupervisorBundle.parseFrom(Files.readAllBytes(bundle)).getCredentialEpoch();
    }

    /**
     * Says hello with a token and waits for the gateway to end the stream.
     *
     * @param gatewayUrl the gateway
     * @param sandboxId  the sandbox to seize
     * @param generation the runtime generation the token names
     * @param token      the gateway-audience token
     * @return what happened
     */
    static Attempt hello(String gatewayUrl, String sandboxId, long generation, String token) throws Exception {
        GrpcClient client = GrpcClient.builder().baseUri(gatewayUrl).tls(Tls.builder().enabled(false).build()).build();
        StreamRecorder<GatewayMessage> received = new StreamRecorder<>();
        StreamObserver<SupervisorMessage> out = GatewaySessionGrpc.newStub(client.channel()).open(received);
        out.onNext(SupervisorMessage.newBuilder().setHello(SessionHello.newBuilder().setGatewayToken(token)
                .setSandboxId(sandboxId).setRuntimeGeneration(generation)).build());
        Throwable ending;
        try {
            ending = received.ended().get(ANSWER_SECONDS, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            ending = new AssertionError("the gateway kept the intruder's stream open for " + ANSWER_SECONDS
                    + " s after " + received.messages().size() + " message(s)");
            try {
                out.onCompleted();
            } catch (RuntimeException ignored) {
                // Closing our own end only.
            }
        }
        return new Attempt(received.messages(), ending);
    }
}
