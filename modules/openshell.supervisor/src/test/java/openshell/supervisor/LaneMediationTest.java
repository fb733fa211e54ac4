package openshell.supervisor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.grpc.stub.StreamObserver;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import openshell.isolation.DenyReason;
import openshell.isolation.PendingDnsQuery;
import openshell.isolation.PendingTcpOpen;
import openshell.linux.OwnedFd;
import openshell.linux.UnixSockets;
import openshell.protocol.DescriptorLane;
import openshell.protocol.wire.DnsAnswer;
import openshell.protocol.wire.DnsQuery;
import openshell.protocol.wire.PendingConnection;
import openshell.protocol.wire.PendingConnectionsRequest;
import openshell.protocol.wire.RelayDecision;
import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;
import org.junit.jupiter.api.Test;

/**
 * The supervisor's mediation with a descriptor lane, over a real TLS link and the real lane
 * socket: the lane key travels in the PendingConnections request, connects and DNS queries
 * announced on the lane are decided back on it without any Relay stream, an answer too large for
 * a frame goes on the Dns stream instead, and a lane announcement that cannot be queued is denied.
 */
class LaneMediationTest {
    private static final Duration WAIT = Duration.ofSeconds(30);

    /** A runtime that records its PendingConnections request, Relay streams and Dns answers. */
    private static final class Recording extends MediationOnlyRuntime {
        final CompletableFuture<PendingConnectionsRequest> request = new CompletableFuture<>();
        final AtomicInteger relays = new AtomicInteger();
        final BlockingQueue<DnsAnswer> streamAnswers = new LinkedBlockingQueue<>();

        @Override
        public void pendingConnections(PendingConnectionsRequest r, StreamObserver<PendingConnection> observer) {
            request.complete(r);
        }

        @Override
        public StreamObserver<RelayUp> relay(StreamObserver<RelayDown> down) {
            relays.incrementAndGet();
            return new StreamObserver<>() {
                @Override
                public void onNext(RelayUp value) {
                }

                @Override
                public void onError(Throwable t) {
                }

                @Override
                public void onCompleted() {
                    down.onCompleted();
                }
            };
        }

        @Override
        public StreamObserver<DnsAnswer> dns(StreamObserver<DnsQuery> queries) {
            return new StreamObserver<>() {
                @Override
                public void onNext(DnsAnswer answer) {
                    streamAnswers.add(answer);
                }

                @Override
                public void onError(Throwable t) {
                }

                @Override
                public void onCompleted() {
                    queries.onCompleted();
                }
            };
        }
    }

    private static PendingConnection announcement(String id) {
        return PendingConnection.newBuilder().setConnectionId(id).setDestinationHost("192.0.2.7")
                .setDestinationAddress(ByteString.copyFrom(new byte[] {(byte) 192, 0, 2, 7}))
                .setDestinationPort(8443).setSocketInode(42).setUnresolvedReason("test")
                .setHandoffToken(ByteString.copyFrom(DescriptorLane.newToken())).build();
    }

    private static DescriptorLane.Frame next(OwnedFd lane) {
        return DescriptorLane.Frame.decode(UnixSockets.receive(lane.value(), DescriptorLane.MAX_FRAME_BYTES, WAIT)
                .orElseThrow().data());
    }

    private static void send(OwnedFd lane, DescriptorLane.Kind kind, byte[] body) {
        UnixSockets.send(lane.value(), new DescriptorLane.Frame(kind, body).encode());
    }

    private interface OnLane {
        void run(RemoteMediation mediation, OwnedFd lane, MediationMetrics metrics) throws Exception;
    }

    /** Lane arrivals as the mediation's push receives them. */
    private static final class Pushed implements LaneSource.Arrivals {
        final BlockingQueue<PendingTcpOpen> opens = new LinkedBlockingQueue<>();
        final BlockingQueue<PendingDnsQuery> queries = new LinkedBlockingQueue<>();
        final BlockingQueue<String> threads = new LinkedBlockingQueue<>();

        @Override
        public void tcp(PendingTcpOpen open) {
            threads.add(Thread.currentThread().getName());
            opens.add(open);
        }

        @Override
        public void dns(PendingDnsQuery query) {
            threads.add(Thread.currentThread().getName());
            queries.add(query);
        }
    }

    /** A mediation over a real link that offered its lane, and a lane connection that presented the key. */
    private static void withLane(Recording runtime, OnLane body) throws Exception {
        withLane(runtime, Optional.empty(), body);
    }

    private static void withLane(Recording runtime, Optional<LaneSource.Arrivals> arrivals, OnLane body) throws Exception {
        Path dir = Files.createTempDirectory("lane");
        int uid = (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
        try (HandoffListener listener = HandoffListener.listen(dir.resolve("link.sock"), uid).orElseThrow()) {
            MediationReopenTest.withMediation(runtime, false, mediation -> {
                MediationMetrics metrics = new MediationMetrics();
                mediation.useLane(listener, metrics, arrivals);
                byte[] key = runtime.request.get(WAIT.toMillis(), TimeUnit.MILLISECONDS).getLaneKey().toByteArray();
                assertEquals(DescriptorLane.KEY_BYTES, key.length, "the key travels in the PendingConnections request");
                try (OwnedFd lane = UnixSockets.connectSeqpacket(listener.path())) {
                    send(lane, DescriptorLane.Kind.HELLO, key);
                    body.run(mediation, lane, metrics);
                }
            });
        } finally {
            Files.deleteIfExists(dir);
        }
    }

    @Test
    void connectsAndQueriesOnTheLaneAreDecidedOnTheLane() throws Exception {
        Recording runtime = new Recording();
        withLane(runtime, (mediation, lane, metrics) -> {
            send(lane, DescriptorLane.Kind.ANNOUNCE, announcement("c1").toByteArray());
            PendingTcpOpen open = mediation.acceptTcp(WAIT).orElseThrow();
            open.deny(DenyReason.POLICY);
            DescriptorLane.Frame decided = next(lane);
            assertEquals(DescriptorLane.Kind.DECISION, decided.kind());
            RelayDecision decision = RelayDecision.parseFrom(decided.body());
            assertEquals("c1", decision.getConnectionId());
            assertEquals(13, decision.getDenyErrno(), "EACCES");

            DnsQuery query = DnsQuery.newBuilder().setQueryId(5).setMessage(ByteString.copyFrom(new byte[] {1}))
                    .setUnresolvedReason("test").build();
            send(lane, DescriptorLane.Kind.QUERY, query.toByteArray());
            PendingDnsQuery asked = mediation.acceptDns(WAIT).orElseThrow();
            asked.answer(new byte[] {9, 9});
            DescriptorLane.Frame answered = next(lane);
            assertEquals(DescriptorLane.Kind.ANSWER, answered.kind());
            assertEquals(ByteString.copyFrom(new byte[] {9, 9}), DnsAnswer.parseFrom(answered.body()).getMessage());

            // An answer larger than a frame goes on the Dns stream, which the runtime also reads.
            send(lane, DescriptorLane.Kind.QUERY, query.toBuilder().setQueryId(6).build().toByteArray());
            mediation.acceptDns(WAIT).orElseThrow().answer(new byte[DescriptorLane.MAX_BODY_BYTES]);
            DnsAnswer large = runtime.streamAnswers.poll(WAIT.toMillis(), TimeUnit.MILLISECONDS);
            assertEquals(6, large == null ? -1 : large.getQueryId());

            assertEquals(0, runtime.relays.get(), "no Relay stream was opened for lane decisions");
            assertEquals(2, metrics.laneFrames()[1]);
            assertEquals(1, metrics.laneFrames()[0]);
        });
    }

    @Test
    void aLaneAnnouncementOverTheQueueBoundIsDeniedOnTheLane() throws Exception {
        Recording runtime = new Recording();
        withLane(runtime, (mediation, lane, metrics) -> {
            for (int i = 0; i <= RemoteMediation.MAX_QUEUED; i++) {
                send(lane, DescriptorLane.Kind.ANNOUNCE, announcement("c" + i).toByteArray());
            }
            DescriptorLane.Frame refused = next(lane);
            RelayDecision decision = RelayDecision.parseFrom(refused.body());
            assertEquals("c" + RemoteMediation.MAX_QUEUED, decision.getConnectionId(), "the one over the bound");
            assertEquals(11, decision.getDenyErrno(), "EAGAIN (EXHAUSTED)");
            assertEquals(RemoteMediation.MAX_QUEUED, mediation.queuedOpens());
            assertEquals(Optional.empty(), UnixSockets.receive(lane.value(), DescriptorLane.MAX_FRAME_BYTES,
                    Duration.ofMillis(100)), "the queued ones wait for their decision");
        });
    }

    @Test
    void withArrivalsLaneConnectsAndQueriesArePushedStraightFromTheLaneAndNothingIsQueued() throws Exception {
        Recording runtime = new Recording();
        Pushed pushed = new Pushed();
        withLane(runtime, Optional.of(pushed), (mediation, lane, metrics) -> {
            send(lane, DescriptorLane.Kind.ANNOUNCE, announcement("c1").toByteArray());
            PendingTcpOpen open = pushed.opens.poll(WAIT.toMillis(), TimeUnit.MILLISECONDS);
            assertTrue(open != null, "the connect was pushed");
            assertEquals(0, mediation.queuedOpens(), "and not queued for the accept loop");
            assertEquals(Optional.empty(), mediation.acceptTcp(Duration.ofMillis(50)));
            open.deny(DenyReason.POLICY);
            RelayDecision decision = RelayDecision.parseFrom(next(lane).body());
            assertEquals("c1", decision.getConnectionId());
            assertEquals(13, decision.getDenyErrno(), "EACCES, decided back on the lane");

            DnsQuery query = DnsQuery.newBuilder().setQueryId(5).setMessage(ByteString.copyFrom(new byte[] {1}))
                    .setUnresolvedReason("test").build();
            send(lane, DescriptorLane.Kind.QUERY, query.toByteArray());
            PendingDnsQuery asked = pushed.queries.poll(WAIT.toMillis(), TimeUnit.MILLISECONDS);
            assertTrue(asked != null, "the query was pushed");
            assertEquals(Optional.empty(), mediation.acceptDns(Duration.ofMillis(50)));
            asked.answer(new byte[] {9, 9});
            assertEquals(DescriptorLane.Kind.ANSWER, next(lane).kind());

            for (String thread : pushed.threads) {
                assertTrue(thread.startsWith("handoff-read"), "pushed on the lane's reader thread, not a loop: " + thread);
            }

            // Once the source is closed nothing is pushed: the announcement is refused on the lane.
            mediation.close();
            send(lane, DescriptorLane.Kind.ANNOUNCE, announcement("c2").toByteArray());
            RelayDecision refused = RelayDecision.parseFrom(next(lane).body());
            assertEquals("c2", refused.getConnectionId());
            assertTrue(!refused.getAllow(), "a closed source denies");
            assertEquals(0, pushed.opens.size(), "nothing pushed after close");
        });
    }
}
