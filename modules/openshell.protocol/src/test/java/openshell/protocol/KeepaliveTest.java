package openshell.protocol;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class KeepaliveTest {
    @Test
    void silentlyDroppedPeerIsDetectedWithinTheKeepaliveTimeout() throws Exception {
        try (Launch launch = new Launch(Launch.Kind.TCP, Initiator.SUPERVISOR);
             BlackHole hole = new BlackHole(((Transport.Tcp) launch.runtime.listening().orElseThrow()).address())) {
            SupervisorEndpoint throughHole = SupervisorEndpoint.builder()
                    .transport(Transport.tcp(hole.address()))
                    .initiator(Initiator.SUPERVISOR)
                    .pin(launch.tls.pin())
                    .tokens(launch.slot)
                    .build();
            try (SupervisorLink link = throughHole.connect()) {
                Launch.blocking(link).attach(Launch.attachRequest("a"));
                // Idle longer than the ping interval: pings keep a healthy link up.
                Thread.sleep(ProtocolLimits.KEEPALIVE_INTERVAL.plusSeconds(2).toMillis());
                assertTrue(link.isOpen(), "an idle but healthy link must survive on pings");
                assertEquals(1, launch.runtime.linkCount());

                hole.freeze();
                long frozenAt = System.nanoTime();
                Refusal reason = link.closed().get(ProtocolLimits.KEEPALIVE_TIMEOUT.plusSeconds(10).toSeconds(),
                        TimeUnit.SECONDS);
                Duration detected = Duration.ofNanos(System.nanoTime() - frozenAt);
                assertEquals(Refusal.PEER_SILENT, reason);
                assertTrue(detected.compareTo(ProtocolLimits.KEEPALIVE_TIMEOUT.plusSeconds(2)) <= 0,
                        "detected after " + detected);
                long deadline = System.nanoTime() + ProtocolLimits.KEEPALIVE_TIMEOUT.plusSeconds(10).toNanos();
                while (launch.runtime.linkCount() > 0 && System.nanoTime() < deadline) {
                    Thread.sleep(100);
                }
                assertEquals(0, launch.runtime.linkCount(), "the runtime side drops the silent link too");
            }
        }
    }
}
