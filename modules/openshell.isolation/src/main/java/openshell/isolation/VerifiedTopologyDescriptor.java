package openshell.isolation;

/**
 * A {@link TopologyDescriptor} that the {@link BackendRegistry} checked against the backend that
 * admission required. There is no public constructor: holding one proves the check happened.
 */
public final class VerifiedTopologyDescriptor {
    private final TopologyDescriptor descriptor;

    VerifiedTopologyDescriptor(TopologyDescriptor descriptor) {
        this.descriptor = descriptor;
    }

    /** @return the exact backend this descriptor was verified for */
    public BackendKey backend() {
        return descriptor.backend();
    }

    /** @return a copy of the backend-specific payload */
    public byte[] payload() {
        return descriptor.payload();
    }

    /** @return the descriptor as written by the driver */
    public TopologyDescriptor descriptor() {
        return descriptor;
    }

    @Override
    public String toString() {
        return "Verified" + descriptor;
    }
}
