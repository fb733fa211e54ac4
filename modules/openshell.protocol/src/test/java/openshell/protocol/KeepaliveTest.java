package openshell.protocol;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class KeepaliveTest {
    /** An idle link with a long call outstanding lives on answered pings alone, longer than the timeout. */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.EnumSource(Launch.Kind.class)
    void anIdleHealthyLinkOutlivesTheKeepaliveTimeout(Launch.Kind kind) throws Exception {
        for (Initiator initiator : Initiator.values()) {
            try (Launch launch = new Launch(kind, initiator); SupervisorLink link = launch.attached()) {
                Thread.sleep(ProtocolLimits.KEEPALIVE_TIMEOUT.plusSeconds(5).toMillis());
                assertTrue(link.isOpen(), kind + "/" + initiator + ": closed for " + link.closedFor());
                assertEquals(1, launch.runtime.linkCount());
            }
        }
    }

    @Test
    void silentlyDroppedPeerIsDetectedWithinTheKeepaliveTimeout() throws Exception {
        try (Launch launch = new Launch(Launch.Kind.TCP, Initiator.SUPERVISOR);
             BlackHole hole = new BlackHole(((Transport.Tcp) launch.runtime.listening().orElseThrow()).address())) {
            try (SupervisorLink link = throughHole(launch, hole).connect()) {
                Launch.blocking(link).attach(Launch.attachRequest("a"));
                // Idle longer than the keepalive timeout: only answered pings keep a healthy link up.
                Thread.sleep(ProtocolLimits.KEEPALIVE_TIMEOUT.plusSeconds(5).toMillis());
                assertTrue(link.isOpen(), "an idle but healthy link must survive on pings");
                assertEquals(1, launch.runtime.linkCount());

                hole.freeze();
                assertClosedSilentWithinTheTimeout(link, System.nanoTime());
                awaitRuntimeDropped(launch);
                assertEquals(0, launch.runtime.linkCount(), "the runtime side drops the silent link too");
            }
        }
    }

    /** A runtime heard on the descriptor lane is not silent, however long its link says nothing; then the timeout runs from the last hearing. */
    @Test
    void aRuntimeHeardElsewhereIsNotSilentUntilItIsHeardNowhere() throws Exception {
        try (Launch launch = new Launch(Launch.Kind.TCP, Initiator.SUPERVISOR);
             BlackHole hole = new BlackHole(((Transport.Tcp) launch.runtime.listening().orElseThrow()).address())) {
            try (SupervisorLink link = throughHole(launch, hole).connect()) {
                Launch.blocking(link).attach(Launch.attachRequest("a"));
                hole.freeze();
                long until = System.nanoTime() + ProtocolLimits.KEEPALIVE_TIMEOUT.plusSeconds(3).toNanos();
                while (System.nanoTime() < until) {
                    link.heard();
                    Thread.sleep(500);
                }
                assertTrue(link.isOpen(), "closed for " + link.closedFor() + " although heard every 500 ms");
                assertClosedSilentWithinTheTimeout(link, System.nanoTime());
            }
        }
    }

    /**
     * The runtime's side of the same: a supervisor heard on the lane (its decisions, marked by the
     * service through {@link RuntimeEndpoint#linkHeard()}) is not silent while its link says
     * nothing, as under a flood of lane decisions; heard nowhere, it is dropped within the timeout.
     */
    @Test
    void aSupervisorHeardElsewhereIsNotSilentToTheRuntimeUntilItIsHeardNowhere() throws Exception {
        try (Launch launch = new Launch(Launch.Kind.TCP, Initiator.SUPERVISOR);
             BlackHole hole = new BlackHole(((Transport.Tcp) launch.runtime.listening().orElseThrow()).address())) {
            try (SupervisorLink link = throughHole(launch, hole).connect()) {
                Launch.blocking(link).attach(Launch.attachRequest("a"));
                Runnable runtimeHeard = launch.service.linkHeard;
                hole.freeze();
                long until = System.nanoTime() + ProtocolLimits.KEEPALIVE_TIMEOUT.plusSeconds(3).toNanos();
                while (System.nanoTime() < until) {
                    link.heard();
                    runtimeHeard.run();
                    Thread.sleep(500);
                }
                assertEquals(1, launch.runtime.linkCount(), "the runtime dropped a link whose supervisor it heard every 500 ms");
                Duration dropped = awaitRuntimeDropped(launch);
                assertEquals(0, launch.runtime.linkCount(), "heard nowhere, the link must go");
                assertTrue(dropped.compareTo(ProtocolLimits.KEEPALIVE_TIMEOUT.plusSeconds(2)) <= 0, "dropped after " + dropped);
            }
        }
    }

    /**
     * Hearing the runtime on the lane must not stop the pings: the runtime reads only the link, and
     * a link without them is closed by the runtime's own watchdog (the 20-sandbox scale level lost
     * its links that way while the lanes were busy).
     */
    @Test
    void aSupervisorThatHearsTheRuntimeElsewhereStillPings() throws Exception {
        try (Launch launch = new Launch(Launch.Kind.UNIX, Initiator.SUPERVISOR); SupervisorLink link = launch.attached()) {
            long until = System.nanoTime() + ProtocolLimits.KEEPALIVE_TIMEOUT.plusSeconds(5).toNanos();
            while (System.nanoTime() < until) {
                link.heard();
                Thread.sleep(500);
            }
            assertTrue(link.isOpen(), "closed for " + link.closedFor());
            assertEquals(1, launch.runtime.linkCount(), "the runtime dropped a link the supervisor heard it on elsewhere");
        }
    }

    /** The supervisor's endpoint for the launch's runtime, reached through the black hole. */
    private static SupervisorEndpoint throughHole(Launch launch, BlackHole hole) {
        return SupervisorEndpoint.builder()
                .transport(Transport.tcp(hole.address()))
                .initiator(Initiator.SUPERVISOR)
                .pin(launch.tls.pin())
                .tokens(launch.slot)
                .build();
    }

    /** Waits (bounded) until the runtime holds no link; returns how long that took. */
    private static Duration awaitRuntimeDropped(Launch launch) throws InterruptedException {
        long since = System.nanoTime();
        long deadline = since + ProtocolLimits.KEEPALIVE_TIMEOUT.plusSeconds(10).toNanos();
        while (launch.runtime.linkCount() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(100);
        }
        return Duration.ofNanos(System.nanoTime() - since);
    }

    /** The link closes PEER_SILENT within the keepalive timeout (and a little) of {@code since}. */
    private static void assertClosedSilentWithinTheTimeout(SupervisorLink link, long since) throws Exception {
        Refusal reason = link.closed().get(ProtocolLimits.KEEPALIVE_TIMEOUT.plusSeconds(10).toSeconds(), TimeUnit.SECONDS);
        Duration detected = Duration.ofNanos(System.nanoTime() - since);
        assertEquals(Refusal.PEER_SILENT, reason);
        assertTrue(detected.compareTo(ProtocolLimits.KEEPALIVE_TIMEOUT.plusSeconds(2)) <= 0, "detected after " + detected);
    }
}
