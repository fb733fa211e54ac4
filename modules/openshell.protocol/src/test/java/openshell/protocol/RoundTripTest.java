package openshell.protocol;

import java.util.stream.Stream;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import openshell.protocol.wire.AttachResult;
import openshell.protocol.wire.ConfirmRequest;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class RoundTripTest {
    static Stream<Arguments> topologies() {
        return Stream.of(
                Arguments.of(Launch.Kind.UNIX, Initiator.SUPERVISOR),
                Arguments.of(Launch.Kind.UNIX, Initiator.RUNTIME),
                Arguments.of(Launch.Kind.TCP, Initiator.SUPERVISOR),
                Arguments.of(Launch.Kind.TCP, Initiator.RUNTIME));
    }

    @ParameterizedTest
    @MethodSource("topologies")
    void attachAndConfirmRoundTrip(Launch.Kind kind, Initiator initiator) {
        try (Launch launch = new Launch(kind, initiator); SupervisorLink link = launch.link()) {
            AttachResult attached = Launch.blocking(link).attach(Launch.attachRequest("a-1"));
            assertEquals(Launch.GENERATION, attached.getRuntimeGeneration());
            assertFalse(attached.getResumed());
            assertTrue(Launch.blocking(link).confirm(RequestDigest.stamp(
                    ConfirmRequest.newBuilder().setPolicyDigest("p").build(), "c-1")).getConfirmed());
        }
    }
}
