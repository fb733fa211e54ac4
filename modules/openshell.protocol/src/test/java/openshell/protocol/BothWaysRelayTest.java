package openshell.protocol;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

import com.google.protobuf.ByteString;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import openshell.protocol.wire.RelayDecision;
import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A mediated TCP connection moves bytes both ways at once. The runtime echoes every chunk
 * while the supervisor is still sending, so both directions of one stream are under HTTP/2
 * flow control at the same time; neither may wait for the other forever.
 *
 * <p>Without message credits this deadlocked within the first MiB on Helidon 4.1.7 (issue 4):
 * the connection's reader thread blocks putting a DATA frame into the stream's full 32-frame
 * queue while the stream's handler, busy echoing, waits for a WINDOW_UPDATE only that reader
 * could read. {@link CreditedStream} keeps handlers off Helidon's stream thread and bounds what
 * a sender has in flight.
 */
class BothWaysRelayTest {
    static final long BYTES_EACH_WAY = 32L * 1024 * 1024;
    static final int CHUNK = CreditedStream.MAX_CHUNK_BYTES;
    static final Duration RELAY_WAIT = Duration.ofSeconds(60);

    @ParameterizedTest
    @EnumSource(Launch.Kind.class)
    void bulkBothWaysAtOnceCompletes(Launch.Kind kind) throws Exception {
        try (Launch launch = new Launch(kind, Initiator.SUPERVISOR); SupervisorLink link = launch.attached()) {
            AtomicLong echoed = new AtomicLong();
            StreamProbe<RelayDown> down = new StreamProbe<>() {
                @Override
                public void onNext(RelayDown value) {
                    echoed.addAndGet(value.getData().size());
                    if (value.getHalfClose()) {
                        super.onNext(value);
                    }
                }
            };
            CreditedStream<RelayDown, RelayUp> up = Launch.relay(link, down);
            up.send(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder().setConnectionId("echo-both")
                    .setAllow(true)).build());
            ByteString chunk = ByteString.copyFrom(new byte[CHUNK]);
            AtomicLong sent = new AtomicLong();
            long start = System.nanoTime();
            Thread sender = Thread.ofVirtual().start(() -> {
                while (sent.get() < BYTES_EACH_WAY) {
                    up.send(RelayUp.newBuilder().setData(chunk).build());
                    sent.addAndGet(CHUNK);
                }
                up.send(RelayUp.newBuilder().setHalfClose(true).build());
            });
            try {
                down.await(RELAY_WAIT);
            } finally {
                System.out.printf("both-ways %s: sent %d MiB, received %d MiB in %.2f s%n", kind,
                        sent.get() >> 20, echoed.get() >> 20, (System.nanoTime() - start) / 1e9);
            }
            assertTrue(sender.join(RELAY_WAIT), "sender still blocked");
            assertNull(down.error);
            assertEquals(BYTES_EACH_WAY, sent.get());
            assertEquals(BYTES_EACH_WAY, echoed.get());
            assertEquals(1, down.received.size(), "one half-close");
        }
    }
}
