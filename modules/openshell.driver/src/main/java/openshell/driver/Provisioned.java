package openshell.driver;

import java.util.Arrays;
import java.util.Objects;

import openshell.isolation.TopologyDescriptor;

/**
 * What a driver provisioned: the descriptor the supervisor verifies, the dial direction, and the
 * driver's own state, which the gateway persists verbatim so the driver can restart, stop and
 * clean up the sandbox after a gateway restart.
 */
public final class Provisioned {
    /** Largest driver state persisted. */
    public static final int MAX_STATE_BYTES = 64 * 1024;

    private final TopologyDescriptor descriptor;
    private final DialDirection direction;
    private final byte[] state;

    private Provisioned(TopologyDescriptor descriptor, DialDirection direction, byte[] state) {
        this.descriptor = descriptor;
        this.direction = direction;
        this.state = state;
    }

    /**
     * @param descriptor the topology descriptor
     * @param direction  who dials the protocol connection
     * @param state      the driver's state (copied), at most {@link #MAX_STATE_BYTES}
     * @return the result
     */
    public static Provisioned of(TopologyDescriptor descriptor, DialDirection direction, byte[] state) {
        Objects.requireNonNull(descriptor, "descriptor");
        Objects.requireNonNull(direction, "direction");
        Objects.requireNonNull(state, "state");
        if (state.length > MAX_STATE_BYTES) {
            throw DriverException.invalid("driver state of " + state.length + " bytes exceeds " + MAX_STATE_BYTES);
        }
        return new Provisioned(descriptor, direction, state.clone());
    }

    /** @return the descriptor */
    public TopologyDescriptor descriptor() {
        return descriptor;
    }

    /** @return who dials */
    public DialDirection direction() {
        return direction;
    }

    /** @return a copy of the driver's state */
    public byte[] state() {
        return state.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Provisioned p && p.descriptor.equals(descriptor) && p.direction == direction
                && Arrays.equals(p.state, state);
    }

    @Override
    public int hashCode() {
        return Objects.hash(descriptor, direction) * 31 + Arrays.hashCode(state);
    }

    @Override
    public String toString() {
        return "Provisioned[" + descriptor + ", " + direction + ", state " + state.length + " bytes]";
    }
}
