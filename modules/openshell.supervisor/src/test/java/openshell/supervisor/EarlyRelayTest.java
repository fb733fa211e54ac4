package openshell.supervisor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import openshell.isolation.ByteChannel;
import openshell.isolation.DenyReason;
import openshell.isolation.PendingTcpOpen;
import openshell.protocol.wire.ExecutableFile;
import openshell.protocol.wire.Identity;
import openshell.protocol.wire.PendingConnection;
import openshell.protocol.wire.PendingConnectionsRequest;
import openshell.protocol.wire.RelayDecision;
import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;
import org.junit.jupiter.api.Test;

/**
 * The Relay stream that carries a connect's decision is opened when the open is taken, before
 * the decision (issue 9: the stream's set-up on both ends overlaps the policy decision and the
 * upstream dial): over real TLS on a real socket, the runtime sees the stream first, then exactly
 * one decision on it, and no second stream.
 */
class EarlyRelayTest {
    private static final Duration WAIT = Duration.ofSeconds(60);

    /** A runtime that announces one connect and records every Relay stream and its first message. */
    private static final class Recording extends MediationOnlyRuntime {
        final boolean resolved;
        final AtomicInteger streams = new AtomicInteger();
        final CountDownLatch streamOpened = new CountDownLatch(1);
        final CompletableFuture<RelayDecision> firstDecision = new CompletableFuture<>();

        Recording(boolean resolved) {
            this.resolved = resolved;
        }

        @Override
        public void pendingConnections(PendingConnectionsRequest request, StreamObserver<PendingConnection> observer) {
            PendingConnection.Builder announced = PendingConnection.newBuilder().setConnectionId("c1")
                    .setDestinationHost("192.0.2.7").setDestinationAddress(ByteString.copyFrom(new byte[] {(byte) 192, 0, 2, 7}))
                    .setDestinationPort(8443).setSocketInode(42);
            if (resolved) {
                announced.setIdentity(Identity.newBuilder().setExecutable(ExecutableFile.newBuilder().setPath("/usr/bin/nc")));
            } else {
                announced.setUnresolvedReason("test");
            }
            observer.onNext(announced.build());
        }

        @Override
        public StreamObserver<RelayUp> relay(StreamObserver<RelayDown> down) {
            streams.incrementAndGet();
            streamOpened.countDown();
            return new StreamObserver<>() {
                @Override
                public void onNext(RelayUp up) {
                    if (up.hasDecision() && firstDecision.complete(up.getDecision()) && !up.getDecision().getAllow()) {
                        down.onCompleted();
                    }
                }

                @Override
                public void onError(Throwable t) {
                    firstDecision.completeExceptionally(t);
                }

                @Override
                public void onCompleted() {
                    firstDecision.completeExceptionally(new AssertionError("the stream ended without a decision"));
                }
            };
        }
    }

    @Test
    void aTakenOpensStreamIsOpenBeforeItsDenialAndCarriesIt() throws Exception {
        Recording runtime = new Recording(false);
        MediationReopenTest.withMediation(runtime, mediation -> {
            Optional<PendingTcpOpen> open = mediation.acceptTcp(WAIT);
            assertTrue(open.isPresent(), "the announcement arrived");
            assertTrue(runtime.streamOpened.await(WAIT.toSeconds(), TimeUnit.SECONDS), "the stream opened before any decision");
            assertFalse(runtime.firstDecision.isDone(), "nothing was decided yet");
            open.get().deny(DenyReason.POLICY);
            RelayDecision decision = runtime.firstDecision.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertEquals("c1", decision.getConnectionId());
            assertFalse(decision.getAllow());
            assertEquals(RemoteMediation.errno(DenyReason.POLICY), decision.getDenyErrno());
            assertEquals(1, runtime.streams.get(), "the denial went on the early stream, not a second one");
        });
    }

    @Test
    void aTakenOpensAllowGoesOnItsEarlyStream() throws Exception {
        Recording runtime = new Recording(true);
        MediationReopenTest.withMediation(runtime, mediation -> {
            PendingTcpOpen open = mediation.acceptTcp(WAIT).orElseThrow();
            assertTrue(runtime.streamOpened.await(WAIT.toSeconds(), TimeUnit.SECONDS), "the stream opened before any decision");
            assertFalse(runtime.firstDecision.isDone(), "nothing was decided yet");
            ByteChannel relay = open.allow();
            try {
                RelayDecision decision = runtime.firstDecision.get(WAIT.toSeconds(), TimeUnit.SECONDS);
                assertEquals("c1", decision.getConnectionId());
                assertTrue(decision.getAllow());
                assertEquals(1, runtime.streams.get(), "the allow went on the early stream, not a second one");
            } finally {
                relay.close();
            }
        });
    }

    @Test
    void anUnresolvedIdentityIsDeniedOnTheEarlyStreamWhenAllowed() throws Exception {
        Recording runtime = new Recording(false);
        MediationReopenTest.withMediation(runtime, mediation -> {
            PendingTcpOpen open = mediation.acceptTcp(WAIT).orElseThrow();
            try {
                open.allow();
                throw new AssertionError("an unresolved identity was allowed");
            } catch (openshell.isolation.BackendException e) {
                assertEquals(openshell.isolation.BackendException.Kind.DENIED, e.kind());
            }
            RelayDecision decision = runtime.firstDecision.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertFalse(decision.getAllow(), "fails closed");
            assertEquals(RemoteMediation.errno(DenyReason.IDENTITY_UNRESOLVED), decision.getDenyErrno());
            assertEquals(1, runtime.streams.get());
        });
    }

    @Test
    void anOpenNeverTakenIsDeniedOnAStreamOfItsOwnAtClose() throws Exception {
        Recording runtime = new Recording(true);
        MediationReopenTest.withMediation(runtime, mediation -> {
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (mediation.queuedOpens() == 0 && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertEquals(1, mediation.queuedOpens(), "the announcement is queued, not taken");
            assertEquals(0, runtime.streams.get(), "no stream before the open is taken");
            mediation.close();
            RelayDecision decision = runtime.firstDecision.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertFalse(decision.getAllow(), "a drained open is denied");
            assertEquals(RemoteMediation.errno(DenyReason.MEDIATION_UNAVAILABLE), decision.getDenyErrno());
            assertEquals(1, runtime.streams.get());
        });
    }
}
