package openshell.protocol;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import org.junit.jupiter.api.Test;

import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The credit rules of one stream end, with an in-memory peer: the sender stops at exactly
 * {@link CreditedStream#MAX_IN_FLIGHT} unacknowledged messages and resumes on a grant; the
 * receiver acknowledges what it delivered and fails a peer that sends beyond its credit.
 */
class CreditedStreamTest {
    private static final Duration WAIT = Duration.ofSeconds(20);
    private static final Duration STILL_BLOCKED = Duration.ofMillis(300);

    /** What the stream wrote to its peer. */
    private static final class Peer implements StreamObserver<RelayDown> {
        final List<RelayDown> written = new CopyOnWriteArrayList<>();
        final CompletableFuture<Throwable> failed = new CompletableFuture<>();

        @Override
        public void onNext(RelayDown value) {
            written.add(value);
        }

        @Override
        public void onError(Throwable t) {
            failed.complete(t);
        }

        @Override
        public void onCompleted() {
        }

        int granted() {
            return written.stream().filter(RelayDown::hasGrant).mapToInt(RelayDown::getGrant).sum();
        }
    }

    private static StreamObserver<RelayUp> handler(CountDownLatch release, List<RelayUp> delivered) {
        return new StreamObserver<>() {
            @Override
            public void onNext(RelayUp value) {
                try {
                    release.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                delivered.add(value);
            }

            @Override
            public void onError(Throwable t) {
            }

            @Override
            public void onCompleted() {
            }
        };
    }

    private static RelayUp data(int i) {
        return RelayUp.newBuilder().setData(ByteString.copyFromUtf8("m" + i)).build();
    }

    @Test
    void senderBlocksAtExactlyMaxInFlightAndResumesOnAGrant() throws Exception {
        Peer peer = new Peer();
        CreditedStream<RelayUp, RelayDown> stream = CreditedStream.create(CreditedStream.Kind.RUNTIME_RELAY,
                handler(new CountDownLatch(0), new CopyOnWriteArrayList<>()), Thread.ofVirtual().factory());
        stream.connect(peer);
        for (int i = 0; i < CreditedStream.MAX_IN_FLIGHT; i++) {
            stream.send(RelayDown.newBuilder().setData(ByteString.copyFromUtf8("d" + i)).build());
        }
        assertEquals(CreditedStream.MAX_IN_FLIGHT, peer.written.size(), "the first MAX_IN_FLIGHT go out at once");
        assertEquals(0, stream.availableCredits());
        CompletableFuture<Void> next = CompletableFuture.runAsync(
                () -> stream.send(RelayDown.newBuilder().setData(ByteString.copyFromUtf8("over")).build()),
                task -> Thread.ofVirtual().start(task));
        assertThrows(TimeoutException.class, () -> next.get(STILL_BLOCKED.toMillis(), TimeUnit.MILLISECONDS),
                "message MAX_IN_FLIGHT + 1 waits for a grant");
        assertEquals(CreditedStream.MAX_IN_FLIGHT, peer.written.size());
        stream.inbound().onNext(RelayUp.newBuilder().setGrant(1).build());
        next.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
        assertEquals(CreditedStream.MAX_IN_FLIGHT + 1, peer.written.size());
        assertEquals(0, stream.availableCredits());
    }

    @Test
    void grantsNeedNoCreditAndAcknowledgeEveryDeliveredMessage() throws Exception {
        Peer peer = new Peer();
        List<RelayUp> delivered = new CopyOnWriteArrayList<>();
        CreditedStream<RelayUp, RelayDown> stream = CreditedStream.create(CreditedStream.Kind.RUNTIME_RELAY,
                handler(new CountDownLatch(0), delivered), Thread.ofVirtual().factory());
        stream.connect(peer);
        // This end has spent all its own credit: its grants must still go out.
        for (int i = 0; i < CreditedStream.MAX_IN_FLIGHT; i++) {
            stream.send(RelayDown.newBuilder().setData(ByteString.copyFromUtf8("d" + i)).build());
        }
        int total = 3 * CreditedStream.MAX_IN_FLIGHT;
        for (int i = 0; i < total; i++) {
            stream.inbound().onNext(data(i));
            long deadline = System.nanoTime() + WAIT.toNanos();
            // A well-behaved peer sends only while it holds credit: here, at most MAX_IN_FLIGHT unacknowledged.
            while (i + 1 - peer.granted() >= CreditedStream.MAX_IN_FLIGHT && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
        }
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (peer.granted() < total && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertEquals(total, peer.granted(), "every delivered message is granted back");
        assertEquals(total, delivered.size());
        assertEquals(List.of("m0", "m1", "m2"), delivered.subList(0, 3).stream().map(m -> m.getData().toStringUtf8()).toList());
        assertTrue(!peer.failed.isDone());
    }

    @Test
    void aPeerBeyondItsCreditFailsTheStream() throws Exception {
        Peer peer = new Peer();
        CountDownLatch stuck = new CountDownLatch(1);
        CreditedStream<RelayUp, RelayDown> stream = CreditedStream.create(CreditedStream.Kind.RUNTIME_RELAY,
                handler(stuck, new CopyOnWriteArrayList<>()), Thread.ofVirtual().factory());
        stream.connect(peer);
        try {
            for (int i = 0; i < CreditedStream.MAX_IN_FLIGHT; i++) {
                stream.inbound().onNext(data(i));
            }
            assertTrue(!stream.isEnded(), "MAX_IN_FLIGHT unacknowledged is within the credit");
            stream.inbound().onNext(data(CreditedStream.MAX_IN_FLIGHT));
            Throwable failure = peer.failed.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
            assertEquals(Status.Code.RESOURCE_EXHAUSTED, Status.fromThrowable(failure).getCode());
            assertTrue(stream.isEnded());
            assertThrows(ProtocolException.class, () -> stream.send(RelayDown.newBuilder().setHalfClose(true).build()));
        } finally {
            stuck.countDown();
        }
    }

    @Test
    void aGrantOfMoreThanWasSentOrAnOversizedChunkFailsTheStream() throws Exception {
        Peer peer = new Peer();
        CreditedStream<RelayUp, RelayDown> stream = CreditedStream.create(CreditedStream.Kind.RUNTIME_RELAY,
                handler(new CountDownLatch(0), new CopyOnWriteArrayList<>()), Thread.ofVirtual().factory());
        stream.connect(peer);
        stream.send(RelayDown.newBuilder().setData(ByteString.copyFromUtf8("one")).build());
        stream.inbound().onNext(RelayUp.newBuilder().setGrant(2).build());
        assertEquals(Status.Code.FAILED_PRECONDITION,
                Status.fromThrowable(peer.failed.get(WAIT.toMillis(), TimeUnit.MILLISECONDS)).getCode());

        Peer other = new Peer();
        CreditedStream<RelayUp, RelayDown> big = CreditedStream.create(CreditedStream.Kind.RUNTIME_RELAY,
                handler(new CountDownLatch(0), new CopyOnWriteArrayList<>()), Thread.ofVirtual().factory());
        big.connect(other);
        big.inbound().onNext(RelayUp.newBuilder().setData(ByteString.copyFrom(new byte[CreditedStream.MAX_CHUNK_BYTES])).build());
        big.inbound().onNext(RelayUp.newBuilder().setData(ByteString.copyFrom(new byte[CreditedStream.MAX_CHUNK_BYTES + 1])).build());
        assertEquals(Status.Code.RESOURCE_EXHAUSTED,
                Status.fromThrowable(other.failed.get(WAIT.toMillis(), TimeUnit.MILLISECONDS)).getCode());
    }
}
