package openshell.protocol;

import java.time.Clock;
import java.util.concurrent.TimeUnit;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import openshell.protocol.wire.AttachRequest;
import openshell.protocol.wire.AttachResult;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ReconnectTest {
    @ParameterizedTest
    @EnumSource(Launch.Kind.class)
    void higherEpochResumesLowerOrEqualOrStrangerFails(Launch.Kind kind) throws Exception {
        try (Launch launch = new Launch(kind, Initiator.SUPERVISOR)) {
            SupervisorLink first = launch.link();
            assertFalse(Launch.blocking(first).attach(Launch.attachRequest("a1")).getResumed());

            launch.slot.refresh(launch.issuer.mintPair(Launch.grant(), 2));
            try (SupervisorLink second = launch.link()) {
                AttachResult resumed = Launch.blocking(second).attach(Launch.attachRequest("a2"));
                assertTrue(resumed.getResumed());
                assertEquals(Launch.GENERATION, resumed.getRuntimeGeneration());
                first.closed().get(20, TimeUnit.SECONDS);

                TokenSlot lower = new TokenSlot(launch.issuer.mintPair(Launch.grant(), 1), Clock.systemUTC());
                try (SupervisorLink stale = launch.dialWith(lower)) {
                    StatusRuntimeException refused = assertThrows(StatusRuntimeException.class,
                            () -> Launch.blocking(stale).attach(Launch.attachRequest("a3")));
                    assertEquals(Status.Code.UNAUTHENTICATED, refused.getStatus().getCode());
                    assertTrue(refused.getStatus().getDescription().startsWith(Refusal.TOKEN_STALE_EPOCH.name()));
                }

                TokenSlot same = new TokenSlot(launch.issuer.mintPair(Launch.grant(), 2), Clock.systemUTC());
                try (SupervisorLink rival = launch.dialWith(same)) {
                    StatusRuntimeException refused = assertThrows(StatusRuntimeException.class,
                            () -> Launch.blocking(rival).attach(Launch.attachRequest("a4")));
                    assertTrue(refused.getStatus().getDescription().startsWith(Refusal.ATTACH_CONFLICT.name()),
                            refused.getStatus().getDescription());
                    StatusRuntimeException gated = assertThrows(StatusRuntimeException.class,
                            () -> Launch.blocking(rival).confirm(RequestDigest.stamp(
                                    openshell.protocol.wire.ConfirmRequest.newBuilder().setPolicyDigest("p").build(),
                                    "c")));
                    assertEquals(Status.Code.FAILED_PRECONDITION, gated.getStatus().getCode());
                }
                assertTrue(second.isOpen(), "a same-epoch rival never preempts the live link");

                TokenSlot higher = new TokenSlot(launch.issuer.mintPair(Launch.grant(), 3), Clock.systemUTC());
                try (SupervisorLink stranger = launch.dialWith(higher)) {
                    AttachRequest other = RequestDigest.stamp(AttachRequest.newBuilder()
                            .setSupervisorId("supervisor-B").build(), "a5");
                    StatusRuntimeException refused = assertThrows(StatusRuntimeException.class,
                            () -> Launch.blocking(stranger).attach(other));
                    assertTrue(refused.getStatus().getDescription().startsWith(Refusal.SUPERVISOR_MISMATCH.name()));
                }
                assertTrue(second.isOpen());
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Launch.Kind.class)
    void runtimeRedialsAndTheHigherEpochResumes(Launch.Kind kind) throws Exception {
        try (Launch launch = new Launch(kind, Initiator.RUNTIME)) {
            SupervisorLink first = launch.link();
            assertFalse(Launch.blocking(first).attach(Launch.attachRequest("a1")).getResumed());
            first.close();
            launch.slot.refresh(launch.issuer.mintPair(Launch.grant(), 2));
            try (SupervisorLink second = launch.link()) {
                assertTrue(Launch.blocking(second).attach(Launch.attachRequest("a2")).getResumed());
            }
        }
    }
}
