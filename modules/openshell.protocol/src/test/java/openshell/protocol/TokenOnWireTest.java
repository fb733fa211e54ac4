package openshell.protocol;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.stream.Stream;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Every token rejection, over a real socket with TLS, on the first call and on a later stream. */
class TokenOnWireTest {
    private static final Launch UNIX = new Launch(Launch.Kind.UNIX, Initiator.SUPERVISOR);
    private static final Launch TCP = new Launch(Launch.Kind.TCP, Initiator.SUPERVISOR);

    @AfterAll
    static void close() {
        UNIX.close();
        TCP.close();
    }

    static Stream<Arguments> unixCases() {
        return TokenRejections.cases(UNIX.issuer);
    }

    static Stream<Arguments> tcpCases() {
        return TokenRejections.cases(TCP.issuer);
    }

    private static TokenSlot holding(String sandboxToken, long epoch) {
        // The slot trusts what the gateway gave it; the runtime is the one that must refuse.
        return new TokenSlot(new TokenPair("unused", sandboxToken, epoch, Instant.now().plus(Duration.ofMinutes(30))),
                Clock.systemUTC());
    }

    @ParameterizedTest
    @MethodSource("unixCases")
    void refusedOnTheFirstCallOverUnix(TokenRejections.Case rejection) {
        refusedOnTheFirstCall(UNIX, rejection);
    }

    @ParameterizedTest
    @MethodSource("tcpCases")
    void refusedOnTheFirstCallOverTcp(TokenRejections.Case rejection) {
        refusedOnTheFirstCall(TCP, rejection);
    }

    @ParameterizedTest
    @MethodSource("unixCases")
    void refusedOnALaterStreamOverUnix(TokenRejections.Case rejection) {
        refusedOnALaterStream(UNIX, rejection);
    }

    @ParameterizedTest
    @MethodSource("tcpCases")
    void refusedOnALaterStreamOverTcp(TokenRejections.Case rejection) {
        refusedOnALaterStream(TCP, rejection);
    }

    private static void refusedOnTheFirstCall(Launch launch, TokenRejections.Case rejection) {
        try (SupervisorLink link = launch.dialWith(holding(rejection.token(), 1))) {
            StatusRuntimeException refused = assertThrows(StatusRuntimeException.class,
                    () -> Launch.blocking(link).attach(Launch.attachRequest("first")));
            assertEquals(Status.Code.UNAUTHENTICATED, refused.getStatus().getCode());
            assertTrue(refused.getStatus().getDescription().startsWith(rejection.expected().name()),
                    refused.getStatus().getDescription());
        }
    }

    private static void refusedOnALaterStream(Launch shared, TokenRejections.Case rejection) {
        // A fresh runtime generation per case (same gateway key): each attaches once, as in life.
        try (Launch launch = new Launch(shared.kind, Initiator.SUPERVISOR, shared.issuer);
             SupervisorLink link = launch.link()) {
            Launch.blocking(link).attach(Launch.attachRequest("attach"));
            launch.slot.refresh(new TokenPair("unused", rejection.token(), 2, Instant.now().plus(Duration.ofMinutes(30))));
            StreamProbe<RelayDown> down = new StreamProbe<>();
            StreamObserver<RelayUp> up = Launch.async(link).relay(down);
            up.onCompleted();
            down.await(Duration.ofSeconds(20));
            assertNotNull(down.error, "a stream with a bad token must fail");
            Status status = Status.fromThrowable(down.error);
            assertEquals(Status.Code.UNAUTHENTICATED, status.getCode());
            assertTrue(status.getDescription().startsWith(rejection.expected().name()), status.getDescription());
        }
    }
}
