package openshell.isolation;

/**
 * One topology's implementation of the boundary lifecycle. The supervisor holds only this
 * interface: everything topology-specific is behind it.
 */
public interface IsolationBackend {
    /** @return the exact name and version of this implementation */
    BackendKey key();

    /**
     * Attaches to the execution environment the driver provisioned. Nothing of the workload runs
     * yet.
     *
     * @param descriptor the verified descriptor of this launch
     * @param context    the launch
     * @return the bound boundary
     * @throws BackendException DENIED if the environment is already bound; INVALID if the descriptor
     *                          is not for this backend; UNAVAILABLE or FAILED otherwise
     */
    BoundBoundary attach(VerifiedTopologyDescriptor descriptor, SandboxContext context);
}
