package openshell.protocol;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import openshell.protocol.wire.RelayDecision;
import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

class DownloadTest {
    static final long BYTES = 8L * 1024 * 1024;

    @ParameterizedTest
    @EnumSource(Launch.Kind.class)
    void runtimeToSupervisorRelayDeliversEveryByte(Launch.Kind kind) {
        try (Launch launch = new Launch(kind, Initiator.SUPERVISOR); SupervisorLink link = launch.attached()) {
            AtomicLong bytes = new AtomicLong();
            StreamProbe<RelayDown> down = new StreamProbe<>() {
                @Override
                public void onNext(RelayDown value) {
                    bytes.addAndGet(value.getData().size());
                }
            };
            CreditedStream<RelayDown, RelayUp> relay = Launch.relay(link, down);
            relay.send(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder().setConnectionId("source-" + BYTES)
                    .setAllow(true)).build());
            down.await(Duration.ofSeconds(60));
            assertNull(down.error);
            assertEquals(BYTES, bytes.get());
        }
    }
}
