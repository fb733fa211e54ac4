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
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The descriptor channel's supervisor end on real sockets: a socket is taken only under a token a
 * decision waits for, anything else closes what came and the connection it came on, and every
 * bound holds at its limit.
 */
class HandoffListenerTest {
    private static final Duration WAIT = Duration.ofSeconds(10);

    private static int ownUid() throws Exception {
        return (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
    }

    private static byte[] token(char c) {
        return String.valueOf(c).repeat(HandoffListener.TOKEN_BYTES).getBytes(StandardCharsets.US_ASCII);
    }

    @Test
    void aSocketSentUnderAnExpectedTokenReachesItsDecision(@TempDir Path dir) throws Exception {
        Path link = dir.resolve("link.sock");
        try (HandoffListener listener = HandoffListener.listen(link, ownUid()).orElseThrow();
             OwnedFd channel = UnixSockets.connectSeqpacket(link.resolveSibling("link.sock" + HandoffListener.SUFFIX))) {
            CompletableFuture<OwnedFd> arriving = listener.expect(token('a'));
            List<OwnedFd> pipe = OwnedFd.pipe();
            try (OwnedFd read = pipe.get(0); OwnedFd write = pipe.get(1)) {
                UnixSockets.send(channel.value(), token('a'), write.value());
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
                    UnixSockets.send(channel.value(), token('b'), write.value());
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
                UnixSockets.send(channel.value(), token('c'), write.value());
                try (OwnedFd passed = next.get(WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
                    passed.write("c".getBytes(StandardCharsets.US_ASCII));
                }
                assertEquals(1, read.read(new byte[1], WAIT));
            }
        }
    }

    @Test
    void aMessageWithoutExactlyOneDescriptorClosesTheChannel(@TempDir Path dir) throws Exception {
        Path link = dir.resolve("link.sock");
        try (HandoffListener listener = HandoffListener.listen(link, ownUid()).orElseThrow();
             OwnedFd channel = UnixSockets.connectSeqpacket(listener.path())) {
            CompletableFuture<OwnedFd> arriving = listener.expect(token('a'));
            UnixSockets.send(channel.value(), token('a'));
            Optional<UnixSockets.Message> end = UnixSockets.receive(channel.value(), 16, WAIT);
            assertTrue(end.isPresent() && end.get().endOfStream());
            assertTrue(!arriving.isDone());
        }
    }

    @Test
    void tokensAreExactlyTheirLengthAndExpectedOnce(@TempDir Path dir) throws Exception {
        try (HandoffListener listener = HandoffListener.listen(dir.resolve("l.sock"), ownUid()).orElseThrow()) {
            assertThrows(SupervisorException.class, () -> listener.expect(new byte[HandoffListener.TOKEN_BYTES - 1]));
            assertThrows(SupervisorException.class, () -> listener.expect(new byte[HandoffListener.TOKEN_BYTES + 1]));
            listener.expect(token('a'));
            assertThrows(SupervisorException.class, () -> listener.expect(token('a')));
        }
    }

    @Test
    void waitingDecisionsAreBounded(@TempDir Path dir) throws Exception {
        try (HandoffListener listener = HandoffListener.listen(dir.resolve("l.sock"), ownUid()).orElseThrow()) {
            for (int i = 0; i < HandoffListener.MAX_EXPECTED; i++) {
                byte[] t = new byte[HandoffListener.TOKEN_BYTES];
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
        Path link = Path.of(base + "a".repeat(UnixSockets.MAX_PATH_BYTES - base.length() - HandoffListener.SUFFIX.length() + 1));
        assertEquals(Optional.empty(), HandoffListener.listen(link, ownUid()));
        Path fits = Path.of(base + "b".repeat(UnixSockets.MAX_PATH_BYTES - base.length() - HandoffListener.SUFFIX.length()));
        try (HandoffListener listener = HandoffListener.listen(fits, ownUid()).orElseThrow()) {
            assertTrue(Files.exists(listener.path()));
        }
    }
}
