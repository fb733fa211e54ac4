package openshell.protocol;

import java.util.stream.Stream;

import org.junit.jupiter.params.provider.Arguments;

/** The four real-socket topologies every acceptance test runs on. */
final class Topologies {
    private Topologies() {
    }

    static Stream<Arguments> all() {
        return Stream.of(
                Arguments.of(Launch.Kind.UNIX, Initiator.SUPERVISOR),
                Arguments.of(Launch.Kind.UNIX, Initiator.RUNTIME),
                Arguments.of(Launch.Kind.TCP, Initiator.SUPERVISOR),
                Arguments.of(Launch.Kind.TCP, Initiator.RUNTIME));
    }
}
