package openshell.isolation;

import java.util.Arrays;
import java.util.HexFormat;

/**
 * What a compute driver wrote about the topology it provisioned: which backend must attach it and
 * an opaque payload only that backend understands. It is trusted configuration, never workload
 * input, and it is only usable after {@link BackendRegistry#verify verification}.
 */
public final class TopologyDescriptor {
    /** Largest payload accepted; a descriptor is configuration, not bulk data. */
    public static final int MAX_PAYLOAD_BYTES = 64 * 1024;

    private final BackendKey backend;
    private final byte[] payload;

    private TopologyDescriptor(BackendKey backend, byte[] payload) {
        this.backend = backend;
        this.payload = payload;
    }

    /**
     * A descriptor for the given backend.
     *
     * @param backend the exact backend that must attach it
     * @param payload backend-specific bytes (copied), at most {@link #MAX_PAYLOAD_BYTES}
     * @return the descriptor
     */
    public static TopologyDescriptor of(BackendKey backend, byte[] payload) {
        BackendException.require(backend, "backend");
        BackendException.require(payload, "payload");
        if (payload.length > MAX_PAYLOAD_BYTES) {
            throw BackendException.invalid("descriptor payload of " + payload.length + " bytes exceeds "
                    + MAX_PAYLOAD_BYTES);
        }
        return new TopologyDescriptor(backend, payload.clone());
    }

    /** @return the backend that must attach this topology */
    public BackendKey backend() {
        return backend;
    }

    /** @return a copy of the payload */
    public byte[] payload() {
        return payload.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TopologyDescriptor d && d.backend.equals(backend) && Arrays.equals(d.payload, payload);
    }

    @Override
    public int hashCode() {
        return backend.hashCode() * 31 + Arrays.hashCode(payload);
    }

    @Override
    public String toString() {
        return "TopologyDescriptor[" + backend + ", " + payload.length + " bytes, "
                + HexFormat.of().formatHex(payload, 0, Math.min(8, payload.length)) + (payload.length > 8 ? "…]" : "]");
    }
}
