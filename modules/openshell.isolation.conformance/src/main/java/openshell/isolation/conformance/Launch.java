package openshell.isolation.conformance;

import openshell.isolation.BackendException;
import openshell.isolation.SandboxContext;
import openshell.isolation.TopologyDescriptor;

/**
 * One provisioned launch, as a compute driver hands it to the supervisor: the descriptor it
 * wrote and the context the supervisor built.
 *
 * @param descriptor what the driver wrote, not yet verified
 * @param context    the launch's context
 */
public record Launch(TopologyDescriptor descriptor, SandboxContext context) {
    /** Rejects missing parts. */
    public Launch {
        if (descriptor == null || context == null) {
            throw new BackendException(BackendException.Kind.INVALID, "a launch needs a descriptor and a context");
        }
    }
}
