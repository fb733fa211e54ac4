package openshell.protocol;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import io.grpc.CallOptions;
import io.grpc.MethodDescriptor;
import io.grpc.stub.ClientCalls;
import io.helidon.common.socket.PlainSocket;
import org.junit.jupiter.api.Test;

import static openshell.protocol.FrameBytes.frame;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A real client connection (Helidon's HTTP/2 client under {@link CallConnection}) against a
 * peer that writes raw frames: after a call ended, the peer sends what a runtime may send
 * in a race (a WINDOW_UPDATE for the request bytes it read last, a reset, data that crossed
 * the client's END_STREAM). The link must stay up for the next call, and the late data must
 * come back as connection window. Without the {@link ForgottenStreamTap} the WINDOW_UPDATE
 * alone closed the link ("Interrupted while waiting for data" in whatever call was in flight).
 */
class LateFrameTest {
    private static final Duration WAIT = Duration.ofSeconds(10);
    private static final int DATA = 0x0;
    private static final int HEADERS = 0x1;
    private static final int RST_STREAM = 0x3;
    private static final int SETTINGS = 0x4;
    private static final int WINDOW_UPDATE = 0x8;
    private static final int END_STREAM = 0x1;
    private static final int END_HEADERS = 0x4;
    private static final int LATE_DATA = 1000;
    private static final MethodDescriptor.Marshaller<byte[]> BYTES = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    };
    private static final MethodDescriptor<byte[], byte[]> ECHO = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY)
            .setFullMethodName("test.Raw/Echo")
            .setRequestMarshaller(BYTES)
            .setResponseMarshaller(BYTES)
            .build();

    @Test
    void lateFramesForAClosedStreamNeitherCloseTheLinkNorLeakItsWindow() throws Exception {
        try (ExecutorService callers = Executors.newVirtualThreadPerTaskExecutor();
             RawPeer link = RawPeer.open("late-frames")) {
            CallConnection calls = link.calls();
            DataInputStream in = link.in();
            OutputStream out = link.out();
            CompletableFuture<byte[]> first = CompletableFuture.supplyAsync(() -> echo(calls, "one"), callers);
            answer(in, out, 1, "first");
            assertArrayEquals("first".getBytes(StandardCharsets.UTF_8), first.get(WAIT.toSeconds(), TimeUnit.SECONDS));
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (!calls.forgot(1)) {
                assertTrue(System.nanoTime() < deadline, "the ended call never closed its stream");
                Thread.sleep(10);
            }

            int before = calls.connectionUnreturned();
            out.write(frame(WINDOW_UPDATE, 0, 1, new byte[] {0, 0, 0, 100}));
            out.write(frame(RST_STREAM, 0, 1, new byte[] {0, 0, 0, 8}));
            out.write(frame(DATA, 0, 1, new byte[LATE_DATA]));
            // Given back with the connection's next batch (StreamWindows): counted, not lost.
            while (calls.connectionUnreturned() != before + LATE_DATA) {
                assertTrue(System.nanoTime() < deadline, "the " + LATE_DATA + " late bytes were never counted for"
                        + " the connection window: " + (calls.connectionUnreturned() - before));
                Thread.sleep(10);
            }

            CompletableFuture<byte[]> second = CompletableFuture.supplyAsync(() -> echo(calls, "two"), callers);
            answer(in, out, 3, "second");
            assertArrayEquals("second".getBytes(StandardCharsets.UTF_8), second.get(WAIT.toSeconds(), TimeUnit.SECONDS));
            assertTrue(calls.isOpen(), "the link must outlive late frames for a closed stream, closed for "
                    + calls.closedFor());
            assertEquals(3, calls.framesForClosedStreams(), "the WINDOW_UPDATE, the reset and the data were dropped");
        }
    }

    private static final MethodDescriptor<byte[], byte[]> TALK = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.BIDI_STREAMING)
            .setFullMethodName("test.Raw/Talk")
            .setRequestMarshaller(BYTES)
            .setResponseMarshaller(BYTES)
            .build();

    /**
     * The supervisor resets a call whose upload is still open (a relay it closes); the runtime's
     * status crossed the reset. Helidon's client marks a stream it reset CLOSED at once, and a call
     * that took that for the runtime's end forgot the stream before the trailers came: Helidon then
     * failed the whole link on HEADERS for a stream it no longer knew (the tcp-connect benchmark's
     * lost links). The call must keep the stream until the runtime's END_STREAM (or RESET_GRACE).
     */
    @Test
    void trailersThatCrossedAResetDoNotCloseTheLink() throws Exception {
        try (ExecutorService callers = Executors.newVirtualThreadPerTaskExecutor();
             RawPeer link = RawPeer.open("crossed-reset")) {
            CallConnection calls = link.calls();
            DataInputStream in = link.in();
            OutputStream out = link.out();
            io.grpc.ClientCall<byte[], byte[]> talk = calls.channel().newCall(TALK, CallOptions.DEFAULT);
            CompletableFuture<io.grpc.Status> ended = new CompletableFuture<>();
            talk.start(new io.grpc.ClientCall.Listener<>() {
                @Override
                public void onClose(io.grpc.Status status, io.grpc.Metadata trailers) {
                    ended.complete(status);
                }
            }, new io.grpc.Metadata());
            talk.request(1);
            talk.sendMessage("hello".getBytes(StandardCharsets.UTF_8));
            // The peer sees the call open, then the client's reset.
            boolean opened = false;
            while (true) {
                Frame frame = Frame.read(in);
                if (frame.type() == SETTINGS && (frame.flags() & 0x1) == 0) {
                    out.write(frame(SETTINGS, 0x1, 0, new byte[0]));
                }
                if (frame.streamId() == 1 && frame.type() == HEADERS && !opened) {
                    opened = true;
                    talk.cancel("the relay closed", null);
                }
                if (frame.streamId() == 1 && frame.type() == RST_STREAM) {
                    break;
                }
            }
            assertEquals(io.grpc.Status.Code.CANCELLED, ended.get(WAIT.toSeconds(), TimeUnit.SECONDS).getCode());
            // What the runtime had sent before it saw the reset: its headers and its status.
            out.write(frame(HEADERS, END_HEADERS, 1, headerBlock(
                    new byte[] {(byte) 0x88}, literal("content-type", "application/grpc"))));
            out.write(frame(HEADERS, END_HEADERS | END_STREAM, 1, headerBlock(literal("grpc-status", "1"))));
            out.flush();

            CompletableFuture<byte[]> next = CompletableFuture.supplyAsync(() -> echo(calls, "next"), callers);
            answer(in, out, 3, "after");
            assertArrayEquals("after".getBytes(StandardCharsets.UTF_8), next.get(WAIT.toSeconds(), TimeUnit.SECONDS));
            assertTrue(calls.isOpen(), "the link must outlive a status that crossed a reset, closed for "
                    + calls.closedFor());
        }
    }

    private static byte[] echo(CallConnection calls, String request) {
        return ClientCalls.blockingUnaryCall(calls.channel(), ECHO, CallOptions.DEFAULT.withDeadlineAfter(
                WAIT.toSeconds(), TimeUnit.SECONDS), request.getBytes(StandardCharsets.UTF_8));
    }

    /** Reads the client's call on this stream up to its END_STREAM, then answers it with one message and status 0. */
    private static void answer(DataInputStream in, OutputStream out, int streamId, String message) throws IOException {
        boolean opened = false;
        while (true) {
            Frame frame = Frame.read(in);
            if (frame.type() == SETTINGS && (frame.flags() & 0x1) == 0) {
                out.write(frame(SETTINGS, 0x1, 0, new byte[0]));
            }
            if (frame.streamId() != streamId) {
                continue;
            }
            opened |= frame.type() == HEADERS;
            if (opened && (frame.flags() & END_STREAM) != 0) {
                break;
            }
        }
        out.write(frame(HEADERS, END_HEADERS, streamId, headerBlock(
                new byte[] {(byte) 0x88}, literal("content-type", "application/grpc"))));
        byte[] payload = message.getBytes(StandardCharsets.UTF_8);
        byte[] grpc = new byte[5 + payload.length];
        grpc[4] = (byte) payload.length;
        System.arraycopy(payload, 0, grpc, 5, payload.length);
        out.write(frame(DATA, 0, streamId, grpc));
        out.write(frame(HEADERS, END_HEADERS | END_STREAM, streamId, headerBlock(literal("grpc-status", "0"))));
        out.flush();
    }

    // HPACK literal header field without indexing, new name, no Huffman (RFC 7541 §6.2.2).
    private static byte[] literal(String name, String value) {
        byte[] n = name.getBytes(StandardCharsets.US_ASCII);
        byte[] v = value.getBytes(StandardCharsets.US_ASCII);
        byte[] field = new byte[3 + n.length + v.length];
        field[1] = (byte) n.length;
        System.arraycopy(n, 0, field, 2, n.length);
        field[2 + n.length] = (byte) v.length;
        System.arraycopy(v, 0, field, 3 + n.length, v.length);
        return field;
    }

    private static byte[] headerBlock(byte[]... fields) {
        java.io.ByteArrayOutputStream block = new java.io.ByteArrayOutputStream();
        for (byte[] field : fields) {
            block.writeBytes(field);
        }
        return block.toByteArray();
    }

    private static void close(Socket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // closing
        }
    }

    /**
     * The client's connection and the raw peer it dialed, past the preface and the peer's
     * SETTINGS: what each test starts from. Closing ends the client's link, then the peer.
     */
    private record RawPeer(ServerSocket listener, Socket peer, CallConnection calls, DataInputStream in,
                           OutputStream out) implements AutoCloseable {
        static RawPeer open(String name) throws IOException {
            ServerSocket listener = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
            try {
                Socket client = new Socket(InetAddress.getLoopbackAddress(), listener.getLocalPort());
                CallConnection calls = new CallConnection(name, PlainSocket.client(client, name), 8,
                        Optional::empty, "runtime:1", "http", reason -> LateFrameTest.close(client));
                Socket peer = listener.accept();
                peer.setSoTimeout((int) WAIT.toMillis());
                DataInputStream in = new DataInputStream(peer.getInputStream());
                OutputStream out = peer.getOutputStream();
                in.readFully(new byte[24]);
                out.write(frame(SETTINGS, 0, 0, new byte[0]));
                return new RawPeer(listener, peer, calls, in, out);
            } catch (IOException | RuntimeException e) {
                listener.close();
                throw e;
            }
        }

        @Override
        public void close() throws IOException {
            try {
                calls.close(Refusal.TRANSPORT_FAILED);
            } finally {
                try {
                    peer.close();
                } finally {
                    listener.close();
                }
            }
        }
    }

    private record Frame(int type, int flags, int streamId, byte[] payload) {
        static Frame read(DataInputStream in) throws IOException {
            byte[] header = new byte[9];
            in.readFully(header);
            int length = ((header[0] & 0xff) << 16) | ((header[1] & 0xff) << 8) | (header[2] & 0xff);
            int streamId = ((header[5] & 0x7f) << 24) | ((header[6] & 0xff) << 16) | ((header[7] & 0xff) << 8)
                    | (header[8] & 0xff);
            byte[] payload = new byte[length];
            in.readFully(payload);
            return new Frame(header[3] & 0xff, header[4] & 0xff, streamId, payload);
        }
    }
}
