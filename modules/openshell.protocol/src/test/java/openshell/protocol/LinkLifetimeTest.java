package openshell.protocol;

import java.time.Duration;

import com.google.protobuf.ByteString;
import io.grpc.stub.StreamObserver;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import openshell.protocol.wire.ConfirmRequest;
import openshell.protocol.wire.RelayDecision;
import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * One link lives as long as a sandbox session and carries one stream per mediated TCP
 * connection, so finished calls and streams must give their HTTP/2 stream slot back. This
 * runs far more sequential calls and streams than the runtime's HTTP/2 stream limit
 * ({@link ProtocolLimits#MAX_CONCURRENT_STREAMS} plus {@link ProtocolLimits#STREAM_RELEASE_SLACK})
 * on one link, ending each of the ways a stream ends: the client first (unary calls, echo
 * relays), the runtime first (refused relays, whose client never half-closes), and a
 * client cancel (RST_STREAM).
 *
 * <p>On plain Helidon 4.1.7 it fails near call 1,024: Helidon's gRPC handler reports
 * HALF_CLOSED_LOCAL for a finished call, so {@code Http2ServerStream} never reaches CLOSED
 * and {@code Http2Connection} never frees the slot. {@link StreamRelease} fixes that.
 */
class LinkLifetimeTest {
    /** About three times the concurrent-stream bound: a leak of one slot per call cannot pass. */
    static final int CALLS = 3_000;
    /** More than the runtime's HTTP/2 stream limit (1,280): enough to expose a leak of one slot each. */
    static final int ENDINGS = 1_500;
    static final Duration STREAM_WAIT = Duration.ofSeconds(20);

    @ParameterizedTest
    @EnumSource(Launch.Kind.class)
    void oneLinkCarriesManyMoreCallsAndStreamsThanTheConcurrentBound(Launch.Kind kind) {
        try (Launch launch = new Launch(kind, Initiator.SUPERVISOR); SupervisorLink link = launch.attached()) {
            long start = System.nanoTime();
            for (int i = 0; i < CALLS; i++) {
                assertTrue(Launch.blocking(link).confirm(RequestDigest.stamp(
                        ConfirmRequest.newBuilder().setPolicyDigest("p").build(), "life-" + i)).getConfirmed(),
                        "unary call " + i);
            }
            long unary = System.nanoTime() - start;
            ByteString ping = ByteString.copyFromUtf8("ping");
            for (int i = 0; i < CALLS; i++) {
                StreamProbe<RelayDown> down = new StreamProbe<>();
                StreamObserver<RelayUp> up = Launch.async(link).relay(down);
                up.onNext(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder().setConnectionId("echo-" + i)
                        .setAllow(true)).build());
                up.onNext(RelayUp.newBuilder().setData(ping).build());
                up.onNext(RelayUp.newBuilder().setHalfClose(true).build());
                up.onCompleted();
                down.await(STREAM_WAIT);
                assertNull(down.error, "stream " + i);
                assertEquals(2, down.received.size(), "stream " + i);
                assertEquals(ping, down.received.get(0).getData(), "stream " + i);
                assertTrue(down.received.get(1).getHalfClose(), "stream " + i);
            }
            long streams = System.nanoTime() - start - unary;
            System.out.printf("link-lifetime %s: %d unary calls in %d ms, %d streams in %d ms on one link%n",
                    kind, CALLS, unary / 1_000_000, CALLS, streams / 1_000_000);
            assertTrue(link.isOpen());
        }
    }

    private static void pause() {
        try {
            Thread.sleep(10);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    @ParameterizedTest
    @EnumSource(Launch.Kind.class)
    void streamsTheRuntimeEndsOrTheSupervisorCancelsAlsoGiveTheirSlotBack(Launch.Kind kind) {
        try (Launch launch = new Launch(kind, Initiator.SUPERVISOR); SupervisorLink link = launch.attached()) {
            for (int i = 0; i < ENDINGS; i++) {
                // Refused: the runtime completes at once; this side never half-closes.
                StreamProbe<RelayDown> down = new StreamProbe<>();
                StreamObserver<RelayUp> up = Launch.async(link).relay(down);
                up.onNext(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder().setConnectionId("deny-" + i)
                        .setAllow(false)).build());
                down.await(STREAM_WAIT);
                assertNull(down.error, "refused stream " + i);
            }
            ByteString ping = ByteString.copyFromUtf8("ping");
            for (int i = 0; i < ENDINGS; i++) {
                StreamProbe<RelayDown> down = new StreamProbe<>();
                StreamObserver<RelayUp> up = Launch.async(link).relay(down);
                up.onNext(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder().setConnectionId("cancel-" + i)
                        .setAllow(true)).build());
                up.onNext(RelayUp.newBuilder().setData(ping).build());
                assertEquals(ping, down.awaitFirst(STREAM_WAIT).getData(), "cancelled stream " + i);
                up.onError(new IllegalStateException("the sandboxed connection was reset"));
                down.await(STREAM_WAIT);
                assertEquals(io.grpc.Status.Code.CANCELLED, io.grpc.Status.fromThrowable(down.error).getCode(),
                        "cancelled stream " + i);
            }
            assertEquals(0, link.openStreams());
            // The runtime's service was told of every cancel, and no stream task is left waiting.
            long deadline = System.nanoTime() + STREAM_WAIT.toNanos();
            while ((launch.service.relayCancels.get() < ENDINGS || launch.runtime.streamTasks() > 0)
                    && System.nanoTime() < deadline) {
                pause();
            }
            assertEquals(ENDINGS, launch.service.relayCancels.get());
            assertEquals(0, launch.runtime.streamTasks());
            assertTrue(Launch.blocking(link).confirm(RequestDigest.stamp(
                    ConfirmRequest.newBuilder().setPolicyDigest("p").build(), "after-endings")).getConfirmed());
            assertTrue(link.isOpen());
        }
    }
}
