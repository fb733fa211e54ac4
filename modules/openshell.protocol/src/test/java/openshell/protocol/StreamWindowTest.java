package openshell.protocol;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.helidon.common.buffers.BufferData;
import io.helidon.http.http2.WindowSize;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import openshell.protocol.wire.ProcessOutput;
import openshell.protocol.wire.RelayDecision;
import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The supervisor's receive windows ({@link StreamWindows}): each stream gets back what its call
 * read whatever other streams are open, and a credited stream's window holds every credit.
 */
class StreamWindowTest {
    private static final Duration WAIT = Duration.ofSeconds(60);
    /** Well past the 64 KiB default window, so a stream whose updates are lost stops early. */
    private static final long BYTES = 4L * 1024 * 1024;

    @ParameterizedTest
    @EnumSource(Launch.Kind.class)
    void anOlderStreamKeepsItsWindowWhileANewerOneIsOpen(Launch.Kind kind) {
        try (Launch launch = new Launch(kind, Initiator.SUPERVISOR); SupervisorLink link = launch.attached()) {
            AtomicLong bytes = new AtomicLong();
            StreamProbe<RelayDown> down = new StreamProbe<>() {
                @Override
                public void onNext(RelayDown value) {
                    bytes.addAndGet(value.getData().size());
                }
            };
            CreditedStream<RelayDown, RelayUp> older = Launch.relay(link, down);
            StreamProbe<RelayDown> echoed = new StreamProbe<>();
            CreditedStream<RelayDown, RelayUp> newer = Launch.relay(link, echoed);
            try {
                newer.send(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder().setConnectionId("echo").setAllow(true))
                        .build());
                newer.send(RelayUp.newBuilder().setData(ByteString.copyFromUtf8("open")).build());
                assertEquals("open", echoed.awaitFirst(WAIT).getData().toStringUtf8(), "the newer stream is open");

                older.send(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder().setConnectionId("source-" + BYTES)
                        .setAllow(true)).build());
                down.await(WAIT);
                assertNull(down.error, "the older stream ended cleanly");
                assertEquals(BYTES, bytes.get(), "every byte of the older stream arrived");
                assertTrue(link.isOpen());
            } finally {
                newer.fail(Status.CANCELLED.withDescription("test over"));
            }
        }
    }

    @Test
    void aCreditedWindowHoldsEveryCreditOfTheLargestMessages() {
        ByteString chunk = ByteString.copyFrom(new byte[CreditedStream.MAX_CHUNK_BYTES]);
        // On the wire each message is the gRPC prefix (5 bytes) and the protobuf encoding.
        int relay = 5 + RelayDown.newBuilder().setData(chunk).build().getSerializedSize();
        int stdout = 5 + ProcessOutput.newBuilder().setStdout(chunk).build().getSerializedSize();
        int stderr = 5 + ProcessOutput.newBuilder().setStderr(chunk).build().getSerializedSize();
        int largest = Math.max(relay, Math.max(stdout, stderr));
        assertTrue(CreditedStream.MAX_IN_FLIGHT * largest <= ProtocolLimits.CREDITED_STREAM_WINDOW_BYTES,
                "MAX_IN_FLIGHT messages of " + largest + " bytes fit the window");
        assertTrue(ProtocolLimits.CREDITED_STREAM_WINDOW_BYTES <= ProtocolLimits.LINK_WINDOW_BYTES);
        assertTrue(ProtocolLimits.CREDITED_STREAM_WINDOW_BYTES > WindowSize.DEFAULT_WIN_SIZE);
    }

    @Test
    void aFrameChunkMakesAMessageOfExactlyOneFrame() {
        for (int chunk : new int[] {CreditedStream.FRAME_CHUNK_BYTES, CreditedStream.FRAME_CHUNK_BYTES + 1}) {
            ByteString data = ByteString.copyFrom(new byte[chunk]);
            int relay = 5 + RelayDown.newBuilder().setData(data).build().getSerializedSize();
            int up = 5 + RelayUp.newBuilder().setData(data).build().getSerializedSize();
            int stdout = 5 + ProcessOutput.newBuilder().setStdout(data).build().getSerializedSize();
            boolean oneFrame = chunk == CreditedStream.FRAME_CHUNK_BYTES;
            assertEquals(oneFrame, relay == ProtocolLimits.MAX_FRAME_BYTES, "RelayDown of " + chunk + ": " + relay);
            assertEquals(oneFrame, up == ProtocolLimits.MAX_FRAME_BYTES, "RelayUp of " + chunk + ": " + up);
            assertEquals(oneFrame, stdout == ProtocolLimits.MAX_FRAME_BYTES, "ProcessOutput of " + chunk + ": " + stdout);
            assertEquals(!oneFrame, relay > ProtocolLimits.MAX_FRAME_BYTES);
        }
        assertTrue(CreditedStream.FRAME_CHUNK_BYTES <= CreditedStream.MAX_CHUNK_BYTES);
    }

    @Test
    void onlyWindowUpdatesAreRecognised() {
        // Helidon writes a frame as its header and its payload joined in one buffer.
        BufferData stream = BufferData.create(BufferData.create(new byte[] {0, 0, 4, 8, 0, 0, 0, 1, 3}),
                BufferData.create(new byte[] {0, 0, 0x40, 0}));
        assertTrue(StreamWindows.isWindowUpdate(stream));
        assertTrue(StreamWindows.isWindowUpdate(StreamWindows.windowUpdate(Integer.MAX_VALUE, 1)));
        assertTrue(StreamWindows.isWindowUpdate(StreamWindows.windowUpdate(0, 1)), "connection level");
        // A PING (type 6) and a DATA frame of 4 bytes have the same length.
        assertFalse(StreamWindows.isWindowUpdate(BufferData.create(new byte[] {0, 0, 4, 6, 0, 0, 0, 0, 1, 1, 2, 3, 4})));
        assertFalse(StreamWindows.isWindowUpdate(BufferData.create(new byte[] {0, 0, 4, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4})));
        assertFalse(StreamWindows.isWindowUpdate(BufferData.create(new byte[] {0, 0, 5, 8, 0, 0, 0, 0, 1, 1, 2, 3, 4, 5})));
        assertEquals(StreamWindows.FRAME_BYTES, stream.available(), "recognising reads nothing");
    }

    @Test
    void aWindowUpdateCarriesTheStreamAndTheIncrementUpToTheLargest() {
        assertArrayEquals(new byte[] {0, 0, 4, 8, 0, 0x7f, (byte) 0xff, (byte) 0xff, (byte) 0xff,
            0x7f, (byte) 0xff, (byte) 0xff, (byte) 0xff},
                StreamWindows.windowUpdate(Integer.MAX_VALUE, Integer.MAX_VALUE).readBytes());
        assertArrayEquals(new byte[] {0, 0, 4, 8, 0, 0, 0, 0, 5, 0, 0, 0, 1}, StreamWindows.windowUpdate(5, 1).readBytes());
        assertThrows(IllegalArgumentException.class, () -> StreamWindows.windowUpdate(5, 0));
    }

    @Test
    void readBytesGoBackAtAQuarterOfTheWindowAndNotAfterTheEnd() {
        List<byte[]> written = new ArrayList<>();
        int connection = 4 * WindowSize.DEFAULT_WIN_SIZE;
        StreamWindows windows = new StreamWindows(frame -> written.add(frame.readBytes()), connection);
        windows.open();
        assertArrayEquals(StreamWindows.windowUpdate(0, connection - WindowSize.DEFAULT_WIN_SIZE).readBytes(), written.removeFirst());

        StreamWindows.Stream plain = windows.stream(3, WindowSize.DEFAULT_WIN_SIZE);
        assertTrue(written.isEmpty(), "a default window needs no raise");
        int quarter = WindowSize.DEFAULT_WIN_SIZE / StreamWindows.RETURN_DIVISOR;
        plain.read(quarter - 1, false);
        assertTrue(written.isEmpty(), "one byte short of a quarter stays");
        plain.read(1, false);
        assertArrayEquals(StreamWindows.windowUpdate(3, quarter).readBytes(), written.removeFirst(), "at the quarter");
        assertEquals(0, plain.unreturned());
        plain.read(quarter, true);
        assertTrue(written.isEmpty(), "nothing goes back to a stream after its end");

        StreamWindows.Stream credited = windows.stream(5, ProtocolLimits.CREDITED_STREAM_WINDOW_BYTES);
        assertArrayEquals(StreamWindows.windowUpdate(5, ProtocolLimits.CREDITED_STREAM_WINDOW_BYTES - WindowSize.DEFAULT_WIN_SIZE)
                .readBytes(), written.removeFirst(), "a credited stream is raised at once");

        // The connection: quarter - 1 + 1 + quarter were read so far on stream 3 (= 2 * quarter of
        // the default, half a quarter of this connection); one more byte short of its quarter stays.
        windows.connectionRead(connection / StreamWindows.RETURN_DIVISOR - 2 * quarter - 1);
        assertTrue(written.isEmpty());
        windows.connectionRead(1);
        assertArrayEquals(StreamWindows.windowUpdate(0, connection / StreamWindows.RETURN_DIVISOR).readBytes(), written.removeFirst());
        assertEquals(0, credited.unreturned());

        assertThrows(IllegalArgumentException.class, () -> windows.stream(0, WindowSize.DEFAULT_WIN_SIZE));
        assertThrows(IllegalArgumentException.class, () -> windows.stream(7, WindowSize.DEFAULT_WIN_SIZE - 1));
        assertThrows(IllegalArgumentException.class, () -> new StreamWindows(frame -> { }, WindowSize.DEFAULT_WIN_SIZE - 1));
    }
}
