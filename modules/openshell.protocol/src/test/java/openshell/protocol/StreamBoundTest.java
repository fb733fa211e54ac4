package openshell.protocol;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import openshell.protocol.wire.ConfirmRequest;
import openshell.protocol.wire.RelayDecision;
import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link ProtocolLimits#MAX_PRE_AUTH_STREAMS} at the bound: an unauthenticated link gets
 * that many refused calls, and is closed at the next stream.
 *
 * <p>{@link ProtocolLimits#MAX_CONCURRENT_STREAMS} at the bound: that many relay streams stay
 * open together on one link; the next call is refused alone (RESOURCE_EXHAUSTED) while the
 * link and its open streams carry on; a finished stream's slot is usable again. (Without
 * the supervisor's own bound, Helidon 4.1.7's server answers one stream too many by closing
 * the whole connection.)
 */
class StreamBoundTest {
    static final Duration WAIT = Duration.ofSeconds(20);
    static final ByteString PING = ByteString.copyFromUtf8("ping");

    @ParameterizedTest
    @EnumSource(Launch.Kind.class)
    void theBoundHoldsOpenStreamsAndRefusesOnlyTheNextCall(Launch.Kind kind) {
        try (Launch launch = new Launch(kind, Initiator.SUPERVISOR); SupervisorLink link = launch.attached()) {
            List<Relay> open = new ArrayList<>();
            for (int i = 0; i < ProtocolLimits.MAX_CONCURRENT_STREAMS; i++) {
                open.add(Relay.open(link, "echo-" + i));
            }
            assertEquals(ProtocolLimits.MAX_CONCURRENT_STREAMS, link.openStreams());

            StatusRuntimeException refused = assertThrows(StatusRuntimeException.class, () -> confirm(link, "over"));
            assertEquals(Status.Code.RESOURCE_EXHAUSTED, refused.getStatus().getCode());
            StreamProbe<RelayDown> overStream = new StreamProbe<>();
            Launch.async(link).relay(overStream);
            overStream.await(WAIT);
            assertEquals(Status.Code.RESOURCE_EXHAUSTED, Status.fromThrowable(overStream.error).getCode());
            assertTrue(link.isOpen());

            // Every open stream still works; finishing one frees its slot for a new call.
            open.forEach(Relay::echo);
            open.removeFirst().finish();
            assertTrue(confirm(link, "freed"));
            open.forEach(Relay::finish);
            open.clear();
            assertEquals(0, link.openStreams());
            for (int i = 0; i < ProtocolLimits.MAX_CONCURRENT_STREAMS; i++) {
                open.add(Relay.open(link, "again-" + i));
            }
            open.forEach(Relay::finish);
            assertTrue(confirm(link, "after"));
            assertTrue(link.isOpen());
        }
    }

    @ParameterizedTest
    @EnumSource(Launch.Kind.class)
    void anUnauthenticatedLinkIsClosedPastThePreAuthStreamBound(Launch.Kind kind) throws Exception {
        try (Launch launch = new Launch(kind, Initiator.SUPERVISOR);
             SupervisorLink link = launch.dialWith(new TokenSlot(new TokenPair("unused", "not-a-token", 1,
                     Instant.now().plus(Duration.ofMinutes(30))), Clock.systemUTC()))) {
            for (int i = 0; i < ProtocolLimits.MAX_PRE_AUTH_STREAMS; i++) {
                int call = i;
                StatusRuntimeException refused = assertThrows(StatusRuntimeException.class,
                        () -> Launch.blocking(link).attach(Launch.attachRequest("pre-auth-" + call)));
                assertEquals(Status.Code.UNAUTHENTICATED, refused.getStatus().getCode(), "call " + i);
            }
            assertTrue(link.isOpen());
            StatusRuntimeException over = assertThrows(StatusRuntimeException.class,
                    () -> Launch.blocking(link).attach(Launch.attachRequest("pre-auth-over")));
            assertEquals(Status.Code.UNAVAILABLE, over.getStatus().getCode(), over.getStatus().toString());
            link.closed().get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
            assertFalse(link.isOpen());
            // The runtime still serves an authenticated supervisor.
            try (SupervisorLink good = launch.link()) {
                assertEquals(Launch.GENERATION,
                        Launch.blocking(good).attach(Launch.attachRequest("good")).getRuntimeGeneration());
            }
        }
    }

    private static boolean confirm(SupervisorLink link, String id) {
        return Launch.blocking(link).confirm(RequestDigest.stamp(
                ConfirmRequest.newBuilder().setPolicyDigest("p").build(), "bound-" + id)).getConfirmed();
    }

    /** One open echo relay, proven open by one echoed message; every wait is bounded. */
    private static final class Relay implements StreamObserver<RelayDown> {
        private final BlockingQueue<RelayDown> received = new LinkedBlockingQueue<>();
        private final CountDownLatch done = new CountDownLatch(1);
        private volatile Throwable error;
        private StreamObserver<RelayUp> up;

        static Relay open(SupervisorLink link, String id) {
            Relay relay = new Relay();
            relay.up = Launch.async(link).relay(relay);
            relay.up.onNext(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder().setConnectionId(id)
                    .setAllow(true)).build());
            relay.echo();
            return relay;
        }

        void echo() {
            up.onNext(RelayUp.newBuilder().setData(PING).build());
            try {
                RelayDown echoed = received.poll(WAIT.toMillis(), TimeUnit.MILLISECONDS);
                assertNull(error, "relay failed");
                assertNotNull(echoed, "no echo within " + WAIT);
                assertEquals(PING, echoed.getData());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }

        void finish() {
            up.onNext(RelayUp.newBuilder().setHalfClose(true).build());
            up.onCompleted();
            try {
                assertTrue(done.await(WAIT.toMillis(), TimeUnit.MILLISECONDS), "relay did not end within " + WAIT);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
            assertNull(error, "relay failed");
        }

        @Override
        public void onNext(RelayDown value) {
            if (value.hasGrant()) {
                return; // credit bookkeeping (CreditedStream), not echoed bytes
            }
            received.add(value);
        }

        @Override
        public void onError(Throwable t) {
            error = t;
            done.countDown();
        }

        @Override
        public void onCompleted() {
            done.countDown();
        }
    }
}
