package openshell.supervisor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
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
 * The descriptor lane's supervisor end on real sockets: a socket is taken only under a token a
 * decision waits for, an announcement only after the lane's key, anything else closes what came
 * and the connection it came on, and every bound holds at its limit.
 */
class HandoffListenerTest {
    private static final Duration WAIT = Duration.ofSeconds(10);

    private static int ownUid() throws Exception {
        return (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
    }

    private static byte[] socketFrame(byte[] token) {
        return new DescriptorLane.Frame(DescriptorLane.Kind.SOCKET, token).encode();
    }

    private static byte[] frame(DescriptorLane.Kind kind, byte[] body) {
        return new DescriptorLane.Frame(kind, body).encode();
    }

    private static boolean closedByPeer(OwnedFd channel) {
        Optional<UnixSockets.Message> end = UnixSockets.receive(channel.value(), DescriptorLane.MAX_FRAME_BYTES, WAIT);
        return end.isPresent() && end.get().endOfStream();
    }

    private static byte[] token(char c) {
        return String.valueOf(c).repeat(DescriptorLane.TOKEN_BYTES).getBytes(StandardCharsets.US_ASCII);
    }

    @Test
    void aSocketSentUnderAnExpectedTokenReachesItsDecision(@TempDir Path dir) throws Exception {
        Path link = dir.resolve("link.sock");
        try (HandoffListener listener = HandoffListener.listen(link, ownUid()).orElseThrow();
             OwnedFd channel = UnixSockets.connectSeqpacket(link.resolveSibling("link.sock" + DescriptorLane.SUFFIX))) {
            CompletableFuture<OwnedFd> arriving = listener.expect(token('a'));
            List<OwnedFd> pipe = OwnedFd.pipe();
            try (OwnedFd read = pipe.get(0); OwnedFd write = pipe.get(1)) {
                UnixSockets.send(channel.value(), socketFrame(token('a')), write.value());
                try (OwnedFd passed = arriving.get(WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
                    passed.write("z".getBytes(StandardCharsets.US_ASCII));
                }
                assertEquals(1, read.read(new byte[1], WAIT));
            }
            assertEquals(0, listener.waiting());
        }
    }

    @Test
    void aSocketUnderAnUnknownTokenIsClosedAndTheChannelStaysUsable(@TempDir Path dir) throws Exception {
        Path link = dir.resolve("link.sock");
        try (HandoffListener listener = HandoffListener.listen(link, ownUid()).orElseThrow();
             OwnedFd channel = UnixSockets.connectSeqpacket(listener.path())) {
            CompletableFuture<OwnedFd> arriving = listener.expect(token('a'));
            List<OwnedFd> pipe = OwnedFd.pipe();
            try (OwnedFd read = pipe.get(0)) {
                try (OwnedFd write = pipe.get(1)) {
                    UnixSockets.send(channel.value(), socketFrame(token('b')), write.value());
                }
                // The only other copy of the write end was closed by the listener: end of file here.
                assertEquals(0, read.read(new byte[1], WAIT), "the stray descriptor was closed (end of file, not a timeout)");
            }
            assertTrue(!arriving.isDone(), "the waiting decision got nothing");
            // A late socket whose decision stopped waiting is closed the same way; the channel goes on.
            listener.forget(token('a'));
            assertEquals(0, listener.waiting());
            CompletableFuture<OwnedFd> next = listener.expect(token('c'));
            List<OwnedFd> second = OwnedFd.pipe();
            try (OwnedFd read = second.get(0); OwnedFd write = second.get(1)) {
                UnixSockets.send(channel.value(), socketFrame(token('c')), write.value());
                try (OwnedFd passed = next.get(WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
                    passed.write("c".getBytes(StandardCharsets.US_ASCII));
                }
                assertEquals(1, read.read(new byte[1], WAIT));
            }
        }
    }

    @Test
    void aSocketFrameWithoutExactlyOneDescriptorClosesTheChannel(@TempDir Path dir) throws Exception {
        Path link = dir.resolve("link.sock");
        try (HandoffListener listener = HandoffListener.listen(link, ownUid()).orElseThrow();
             OwnedFd channel = UnixSockets.connectSeqpacket(listener.path())) {
            CompletableFuture<OwnedFd> arriving = listener.expect(token('a'));
            UnixSockets.send(channel.value(), socketFrame(token('a')));
            Optional<UnixSockets.Message> end = UnixSockets.receive(channel.value(), 16, WAIT);
            assertTrue(end.isPresent() && end.get().endOfStream());
            assertTrue(!arriving.isDone());
        }
    }

    @Test
    void tokensAreExactlyTheirLengthAndExpectedOnce(@TempDir Path dir) throws Exception {
        try (HandoffListener listener = HandoffListener.listen(dir.resolve("l.sock"), ownUid()).orElseThrow()) {
            assertThrows(SupervisorException.class, () -> listener.expect(new byte[DescriptorLane.TOKEN_BYTES - 1]));
            assertThrows(SupervisorException.class, () -> listener.expect(new byte[DescriptorLane.TOKEN_BYTES + 1]));
            listener.expect(token('a'));
            assertThrows(SupervisorException.class, () -> listener.expect(token('a')));
        }
    }

    @Test
    void waitingDecisionsAreBounded(@TempDir Path dir) throws Exception {
        try (HandoffListener listener = HandoffListener.listen(dir.resolve("l.sock"), ownUid()).orElseThrow()) {
            for (int i = 0; i < HandoffListener.MAX_EXPECTED; i++) {
                byte[] t = new byte[DescriptorLane.TOKEN_BYTES];
                java.nio.ByteBuffer.wrap(t).putInt(i);
                listener.expect(t);
            }
            assertEquals(HandoffListener.MAX_EXPECTED, listener.waiting());
            assertThrows(SupervisorException.class, () -> listener.expect(token('z')), "one over the bound");
        }
    }

    @Test
    void connectionsAreBoundedAndAPeerOfAnotherUidIsRefused(@TempDir Path dir) throws Exception {
        Path link = dir.resolve("link.sock");
        List<OwnedFd> held = new ArrayList<>();
        try (HandoffListener listener = HandoffListener.listen(link, ownUid()).orElseThrow()) {
            for (int i = 0; i < HandoffListener.MAX_CONNECTIONS; i++) {
                held.add(UnixSockets.connectSeqpacket(listener.path()));
            }
            try (OwnedFd extra = UnixSockets.connectSeqpacket(listener.path())) {
                Optional<UnixSockets.Message> end = UnixSockets.receive(extra.value(), 16, WAIT);
                assertTrue(end.isPresent() && end.get().endOfStream(), "one connection over the bound is closed");
            }
            for (OwnedFd h : held) {
                assertEquals(Optional.empty(), UnixSockets.receive(h.value(), 16, Duration.ofMillis(50)), "still open");
            }
        } finally {
            held.forEach(OwnedFd::close);
        }
        try (HandoffListener other = HandoffListener.listen(dir.resolve("other.sock"), ownUid() + 1).orElseThrow();
             OwnedFd wrongUid = UnixSockets.connectSeqpacket(other.path())) {
            Optional<UnixSockets.Message> end = UnixSockets.receive(wrongUid.value(), 16, WAIT);
            assertTrue(end.isPresent() && end.get().endOfStream(), "a peer whose uid is not the runtime's is closed");
        }
    }

    @Test
    void aPathTooLongForASocketAddressMeansNoChannel(@TempDir Path dir) throws Exception {
        String base = dir + "/";
        Path link = Path.of(base + "a".repeat(UnixSockets.MAX_PATH_BYTES - base.length() - DescriptorLane.SUFFIX.length() + 1));
        assertEquals(Optional.empty(), HandoffListener.listen(link, ownUid()));
        Path fits = Path.of(base + "b".repeat(UnixSockets.MAX_PATH_BYTES - base.length() - DescriptorLane.SUFFIX.length()));
        try (HandoffListener listener = HandoffListener.listen(fits, ownUid()).orElseThrow()) {
            assertTrue(Files.exists(listener.path()));
        }
    }

    private static final PendingConnection ANNOUNCED = PendingConnection.newBuilder().setConnectionId("c1")
            .setDestinationPort(443).build();

    /** A lane whose announcements and queries are queued here, with the way back to their connection. */
    private static final class Announcements implements HandoffListener.LaneHandler {
        final java.util.concurrent.BlockingQueue<PendingConnection> received = new java.util.concurrent.LinkedBlockingQueue<>();
        final java.util.concurrent.BlockingQueue<DnsQuery> queries = new java.util.concurrent.LinkedBlockingQueue<>();
        volatile HandoffListener.LaneReply reply;

        @Override
        public void announced(PendingConnection announced, HandoffListener.LaneReply back) {
            reply = back;
            received.add(announced);
        }

        @Override
        public void query(DnsQuery query, HandoffListener.LaneReply back) {
            reply = back;
            queries.add(query);
        }
    }

    @Test
    void aKeyedConnectionAnnouncesAndGetsItsDecisionBack(@TempDir Path dir) throws Exception {
        try (HandoffListener listener = HandoffListener.listen(dir.resolve("link.sock"), ownUid()).orElseThrow();
             OwnedFd channel = UnixSockets.connectSeqpacket(listener.path())) {
            Announcements lane = new Announcements();
            byte[] key = listener.openLane(lane);
            assertThrows(SupervisorException.class, () -> listener.openLane(new Announcements()), "opened once");
            UnixSockets.send(channel.value(), frame(DescriptorLane.Kind.HELLO, key));
            UnixSockets.send(channel.value(), frame(DescriptorLane.Kind.ANNOUNCE, ANNOUNCED.toByteArray()));
            assertEquals(ANNOUNCED, lane.received.poll(WAIT.toMillis(), TimeUnit.MILLISECONDS));
            RelayDecision decision = RelayDecision.newBuilder().setConnectionId("c1").setAllow(false).setDenyErrno(13).build();
            lane.reply.decide(decision);
            UnixSockets.Message back = UnixSockets.receive(channel.value(), DescriptorLane.MAX_FRAME_BYTES, WAIT).orElseThrow();
            DescriptorLane.Frame f = DescriptorLane.Frame.decode(back.data());
            assertEquals(DescriptorLane.Kind.DECISION, f.kind());
            assertEquals(decision, RelayDecision.parseFrom(f.body()));

            DnsQuery query = DnsQuery.newBuilder().setQueryId(3).setMessage(com.google.protobuf.ByteString.copyFrom(new byte[] {1})).build();
            UnixSockets.send(channel.value(), frame(DescriptorLane.Kind.QUERY, query.toByteArray()));
            assertEquals(query, lane.queries.poll(WAIT.toMillis(), TimeUnit.MILLISECONDS));
            DnsAnswer answer = DnsAnswer.newBuilder().setQueryId(3).setError("refused").build();
            lane.reply.answer(answer);
            DescriptorLane.Frame a = DescriptorLane.Frame.decode(
                    UnixSockets.receive(channel.value(), DescriptorLane.MAX_FRAME_BYTES, WAIT).orElseThrow().data());
            assertEquals(DescriptorLane.Kind.ANSWER, a.kind());
            assertEquals(answer, DnsAnswer.parseFrom(a.body()));
            DnsAnswer tooLarge = answer.toBuilder().setMessage(com.google.protobuf.ByteString.copyFrom(new byte[DescriptorLane.MAX_BODY_BYTES])).build();
            assertThrows(SupervisorException.class, () -> lane.reply.answer(tooLarge), "an answer larger than a frame is not sent on the lane");
        }
    }

    @Test
    void anAnnouncementBeforeTheKeyOrUnderAWrongKeyClosesTheConnectionAndReachesNobody(@TempDir Path dir) throws Exception {
        try (HandoffListener listener = HandoffListener.listen(dir.resolve("link.sock"), ownUid()).orElseThrow()) {
            Announcements lane = new Announcements();
            byte[] key = listener.openLane(lane);
            try (OwnedFd unkeyed = UnixSockets.connectSeqpacket(listener.path())) {
                UnixSockets.send(unkeyed.value(), frame(DescriptorLane.Kind.ANNOUNCE, ANNOUNCED.toByteArray()));
                assertTrue(closedByPeer(unkeyed), "an announcement without the key closes the connection");
            }
            try (OwnedFd unkeyed = UnixSockets.connectSeqpacket(listener.path())) {
                UnixSockets.send(unkeyed.value(), frame(DescriptorLane.Kind.QUERY, DnsQuery.newBuilder().setQueryId(1).build().toByteArray()));
                assertTrue(closedByPeer(unkeyed), "a DNS query without the key closes the connection");
            }
            byte[] wrong = key.clone();
            wrong[0] ^= 1;
            try (OwnedFd wrongKey = UnixSockets.connectSeqpacket(listener.path())) {
                UnixSockets.send(wrongKey.value(), frame(DescriptorLane.Kind.HELLO, wrong));
                assertTrue(closedByPeer(wrongKey), "a wrong key closes the connection");
            }
            try (OwnedFd twice = UnixSockets.connectSeqpacket(listener.path())) {
                UnixSockets.send(twice.value(), frame(DescriptorLane.Kind.HELLO, key));
                UnixSockets.send(twice.value(), frame(DescriptorLane.Kind.HELLO, key));
                assertTrue(closedByPeer(twice), "a second key closes the connection");
            }
            assertEquals(null, lane.received.poll(100, TimeUnit.MILLISECONDS), "no announcement got through");
            assertTrue(lane.queries.isEmpty(), "no query got through");
        }
    }

    @Test
    void aKeyIsRefusedWhileNoLaneIsOpen(@TempDir Path dir) throws Exception {
        try (HandoffListener listener = HandoffListener.listen(dir.resolve("link.sock"), ownUid()).orElseThrow();
             OwnedFd channel = UnixSockets.connectSeqpacket(listener.path())) {
            UnixSockets.send(channel.value(), frame(DescriptorLane.Kind.HELLO, DescriptorLane.newKey()));
            assertTrue(closedByPeer(channel));
        }
    }

    @Test
    void malformedFramesCloseTheConnectionAndTheirDescriptors(@TempDir Path dir) throws Exception {
        try (HandoffListener listener = HandoffListener.listen(dir.resolve("link.sock"), ownUid()).orElseThrow()) {
            byte[] key = listener.openLane(new Announcements());
            List<byte[]> bad = List.of(
                    new byte[] {'X', 1},
                    frame(DescriptorLane.Kind.DECISION, RelayDecision.newBuilder().setConnectionId("c1").build().toByteArray()),
                    frame(DescriptorLane.Kind.ANSWER, DnsAnswer.newBuilder().setQueryId(1).build().toByteArray()),
                    new byte[] {'Q', (byte) 0xff},
                    new byte[] {'A', (byte) 0xff, (byte) 0xff},
                    new byte[DescriptorLane.MAX_FRAME_BYTES + 1]);
            for (byte[] datagram : bad) {
                try (OwnedFd channel = UnixSockets.connectSeqpacket(listener.path())) {
                    UnixSockets.send(channel.value(), frame(DescriptorLane.Kind.HELLO, key));
                    if (datagram.length > DescriptorLane.MAX_FRAME_BYTES) {
                        datagram[0] = 'A';
                    }
                    UnixSockets.send(channel.value(), datagram);
                    assertTrue(closedByPeer(channel), "closed after a datagram of " + datagram.length + " bytes kind " + (char) datagram[0]);
                }
            }
            // Descriptors where none belong: closed with the connection.
            List<OwnedFd> pipe = OwnedFd.pipe();
            try (OwnedFd read = pipe.get(0); OwnedFd channel = UnixSockets.connectSeqpacket(listener.path())) {
                try (OwnedFd write = pipe.get(1)) {
                    UnixSockets.send(channel.value(), frame(DescriptorLane.Kind.HELLO, key), write.value());
                }
                assertTrue(closedByPeer(channel));
                assertEquals(0, read.read(new byte[1], WAIT), "the descriptor that came with the key was closed");
            }
        }
    }

    @Test
    void aFailedFrameEndsTheSocketsWaitAtOnce(@TempDir Path dir) throws Exception {
        try (HandoffListener listener = HandoffListener.listen(dir.resolve("link.sock"), ownUid()).orElseThrow();
             OwnedFd channel = UnixSockets.connectSeqpacket(listener.path())) {
            CompletableFuture<OwnedFd> arriving = listener.expect(token('f'));
            UnixSockets.send(channel.value(), frame(DescriptorLane.Kind.FAILED, token('f')));
            java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class,
                    () -> arriving.get(WAIT.toMillis(), TimeUnit.MILLISECONDS));
            assertTrue(e.getCause() instanceof SupervisorException);
            assertEquals(0, listener.waiting());
            // The connection goes on: a FAILED for a token nobody waits for changes nothing.
            UnixSockets.send(channel.value(), frame(DescriptorLane.Kind.FAILED, token('g')));
            CompletableFuture<OwnedFd> next = listener.expect(token('h'));
            List<OwnedFd> pipe = OwnedFd.pipe();
            try (OwnedFd read = pipe.get(0); OwnedFd write = pipe.get(1)) {
                UnixSockets.send(channel.value(), socketFrame(token('h')), write.value());
                try (OwnedFd passed = next.get(WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
                    passed.write("h".getBytes(StandardCharsets.US_ASCII));
                }
                assertEquals(1, read.read(new byte[1], WAIT));
            }
        }
    }

    @Test
    void aReplyOnAClosedConnectionFailsInsteadOfWritingElsewhere(@TempDir Path dir) throws Exception {
        try (HandoffListener listener = HandoffListener.listen(dir.resolve("link.sock"), ownUid()).orElseThrow()) {
            Announcements lane = new Announcements();
            byte[] key = listener.openLane(lane);
            try (OwnedFd channel = UnixSockets.connectSeqpacket(listener.path())) {
                UnixSockets.send(channel.value(), frame(DescriptorLane.Kind.HELLO, key));
                UnixSockets.send(channel.value(), frame(DescriptorLane.Kind.ANNOUNCE, ANNOUNCED.toByteArray()));
                assertEquals(ANNOUNCED, lane.received.poll(WAIT.toMillis(), TimeUnit.MILLISECONDS));
            }
            RelayDecision decision = RelayDecision.newBuilder().setConnectionId("c1").setAllow(false).build();
            long deadline = System.nanoTime() + WAIT.toNanos();
            SupervisorException refused = null;
            while (refused == null && System.nanoTime() < deadline) {
                try {
                    lane.reply.decide(decision);
                    Thread.sleep(20);
                } catch (SupervisorException e) {
                    refused = e;
                }
            }
            assertTrue(refused != null, "a decision for a connection that ended is refused");
        }
    }
}
