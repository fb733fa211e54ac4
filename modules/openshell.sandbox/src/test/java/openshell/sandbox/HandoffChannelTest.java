package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import openshell.linux.OwnedFd;
import openshell.linux.UnixSockets;
import openshell.protocol.DescriptorLane;
import openshell.protocol.wire.DnsAnswer;
import openshell.protocol.wire.DnsQuery;
import openshell.protocol.wire.PendingConnection;
import openshell.protocol.wire.RelayDecision;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The runtime's end of the descriptor lane against a plain socket standing in for the supervisor:
 * the key goes first, an announcement or query too large for a frame stays off the lane, decisions
 * and answers arrive, and anything else from the other end ends the lane (so its connects fail
 * closed).
 */
class HandoffChannelTest {
    private static final Duration WAIT = Duration.ofSeconds(10);

    private static DescriptorLane.Frame next(OwnedFd peer) {
        UnixSockets.Message m = UnixSockets.receive(peer.value(), DescriptorLane.MAX_FRAME_BYTES, WAIT).orElseThrow();
        return DescriptorLane.Frame.decode(m.data());
    }

    /** Queues what the lane delivers. */
    private static final class Received implements HandoffChannel.Receiver {
        final BlockingQueue<RelayDecision> decisions = new LinkedBlockingQueue<>();
        final BlockingQueue<DnsAnswer> answers = new LinkedBlockingQueue<>();

        @Override
        public void decision(RelayDecision decision) {
            decisions.add(decision);
        }

        @Override
        public void answer(DnsAnswer answer) {
            answers.add(answer);
        }

        boolean isEmpty() {
            return decisions.isEmpty() && answers.isEmpty();
        }
    }

    private interface Body {
        void run(HandoffChannel lane, OwnedFd supervisor) throws Exception;
    }

    private static void withLane(Path dir, Body body) throws Exception {
        Path link = dir.resolve("link.sock");
        try (OwnedFd listener = UnixSockets.listenSeqpacket(DescriptorLane.pathFor(link))) {
            HandoffChannel lane = HandoffChannel.connect(link).orElseThrow();
            try (OwnedFd supervisor = UnixSockets.accept(listener.value(), WAIT).orElseThrow()) {
                body.run(lane, supervisor);
            } finally {
                lane.close();
            }
        }
    }

    @Test
    void theKeyGoesFirstThenAnnouncementsAndDecisionsComeBack(@TempDir Path dir) throws Exception {
        withLane(dir, (lane, supervisor) -> {
            byte[] key = DescriptorLane.newKey();
            Received received = new Received();
            CountDownLatch ended = new CountDownLatch(1);
            lane.key(key, received, ended::countDown);
            assertTrue(lane.keyed());
            DescriptorLane.Frame hello = next(supervisor);
            assertEquals(DescriptorLane.Kind.HELLO, hello.kind());
            assertArrayEquals(key, hello.body());

            PendingConnection small = PendingConnection.newBuilder().setConnectionId("c1").setDestinationPort(80).build();
            assertTrue(lane.announce(small));
            DescriptorLane.Frame announced = next(supervisor);
            assertEquals(DescriptorLane.Kind.ANNOUNCE, announced.kind());
            assertEquals(small, PendingConnection.parseFrom(announced.body()));

            // Larger than a frame: stays off the lane (the caller announces it on the stream).
            PendingConnection large = small.toBuilder().setExecutable("x".repeat(DescriptorLane.MAX_BODY_BYTES)).build();
            assertFalse(lane.announce(large));
            assertEquals(Optional.empty(), UnixSockets.receive(supervisor.value(), DescriptorLane.MAX_FRAME_BYTES, Duration.ofMillis(100)));

            RelayDecision deny = RelayDecision.newBuilder().setConnectionId("c1").setAllow(false).setDenyErrno(13).build();
            UnixSockets.send(supervisor.value(), new DescriptorLane.Frame(DescriptorLane.Kind.DECISION, deny.toByteArray()).encode());
            assertEquals(deny, received.decisions.poll(WAIT.toMillis(), TimeUnit.MILLISECONDS));

            DnsQuery query = DnsQuery.newBuilder().setQueryId(7).setMessage(ByteString.copyFrom(new byte[] {1, 2})).build();
            assertTrue(lane.query(query));
            DescriptorLane.Frame asked = next(supervisor);
            assertEquals(DescriptorLane.Kind.QUERY, asked.kind());
            assertEquals(query, DnsQuery.parseFrom(asked.body()));
            assertFalse(lane.query(query.toBuilder().setMessage(ByteString.copyFrom(new byte[DescriptorLane.MAX_BODY_BYTES])).build()),
                    "a query too large for a frame goes on the stream");
            DnsAnswer answer = DnsAnswer.newBuilder().setQueryId(7).setMessage(ByteString.copyFrom(new byte[] {3})).build();
            UnixSockets.send(supervisor.value(), new DescriptorLane.Frame(DescriptorLane.Kind.ANSWER, answer.toByteArray()).encode());
            assertEquals(answer, received.answers.poll(WAIT.toMillis(), TimeUnit.MILLISECONDS));

            byte[] token = DescriptorLane.newToken();
            lane.failed(token);
            DescriptorLane.Frame failed = next(supervisor);
            assertEquals(DescriptorLane.Kind.FAILED, failed.kind());
            assertArrayEquals(token, failed.body());

            // Closed by us: the lane's end is not reported as a loss.
            lane.close();
            assertTrue(UnixSockets.receive(supervisor.value(), DescriptorLane.MAX_FRAME_BYTES, WAIT).orElseThrow().endOfStream(),
                    "closing the lane shuts it down at once");
            assertFalse(ended.await(300, TimeUnit.MILLISECONDS));
        });
    }

    @Test
    void anythingButADecisionFromTheSupervisorEndsTheLane(@TempDir Path dir) throws Exception {
        byte[][] bad = {
                new DescriptorLane.Frame(DescriptorLane.Kind.ANNOUNCE, new byte[] {1}).encode(),
                new DescriptorLane.Frame(DescriptorLane.Kind.QUERY, new byte[] {1}).encode(),
                new DescriptorLane.Frame(DescriptorLane.Kind.ANSWER, new byte[] {(byte) 0xff}).encode(),
                new byte[] {'Z'},
                new DescriptorLane.Frame(DescriptorLane.Kind.DECISION, new byte[] {(byte) 0xff, (byte) 0xff}).encode(),
        };
        for (byte[] datagram : bad) {
            withLane(dir, (lane, supervisor) -> {
                Received received = new Received();
                CountDownLatch ended = new CountDownLatch(1);
                lane.key(DescriptorLane.newKey(), received, ended::countDown);
                next(supervisor);
                UnixSockets.send(supervisor.value(), datagram);
                assertTrue(ended.await(WAIT.toMillis(), TimeUnit.MILLISECONDS), "the lane ended after " + datagram.length + " bytes");
                assertFalse(lane.keyed());
                assertTrue(received.isEmpty());
            });
        }
        // The supervisor's end going away ends it the same way.
        withLane(dir, (lane, supervisor) -> {
            CountDownLatch ended = new CountDownLatch(1);
            lane.key(DescriptorLane.newKey(), new Received(), ended::countDown);
            next(supervisor);
            UnixSockets.shutdown(supervisor.value());
            assertTrue(ended.await(WAIT.toMillis(), TimeUnit.MILLISECONDS));
        });
    }

    @Test
    void descriptorsFromTheSupervisorAreClosedAndEndTheLane(@TempDir Path dir) throws Exception {
        withLane(dir, (lane, supervisor) -> {
            CountDownLatch ended = new CountDownLatch(1);
            lane.key(DescriptorLane.newKey(), new Received(), ended::countDown);
            next(supervisor);
            java.util.List<OwnedFd> pipe = OwnedFd.pipe();
            try (OwnedFd read = pipe.get(0)) {
                try (OwnedFd write = pipe.get(1)) {
                    RelayDecision d = RelayDecision.newBuilder().setConnectionId("c1").setAllow(true).setHandoff(true).build();
                    UnixSockets.send(supervisor.value(), new DescriptorLane.Frame(DescriptorLane.Kind.DECISION,
                            d.toByteArray()).encode(), write.value());
                }
                assertTrue(ended.await(WAIT.toMillis(), TimeUnit.MILLISECONDS));
                assertEquals(0, read.read(new byte[1], WAIT), "the descriptor that came was closed");
            }
        });
    }

    @Test
    void aLinkPathTooLongForTheLaneMeansNoLane(@TempDir Path dir) {
        String base = dir + "/";
        Path link = Path.of(base + "a".repeat(DescriptorLane.MAX_PATH_BYTES - base.length() - DescriptorLane.SUFFIX.length() + 1));
        assertEquals(Optional.empty(), HandoffChannel.connect(link));
    }
}
