package openshell.isolation;

import java.util.List;

/**
 * What a backend proved when it confirmed a boundary: each control with the mechanism that
 * enforces it, the policy it enforces, and that direct egress failed. The supervisor records it in
 * the audit log and refuses a boundary whose evidence does not match the launch.
 *
 * @param controls          every control in force (copied)
 * @param kernel            the kernel release the workload runs on
 * @param policySha256      digest of the whole policy being enforced
 * @param directEgressFailed whether a direct connection attempt from inside failed, as it must
 */
public record ConfirmationEvidence(List<Control> controls, String kernel, String policySha256,
                                   boolean directEgressFailed) {
    /** Validates and copies. */
    public ConfirmationEvidence {
        controls = List.copyOf(BackendException.require(controls, "controls"));
        BackendException.require(kernel, "kernel");
        BackendException.require(policySha256, "policy digest");
    }

    /**
     * One control and the mechanism that enforces it.
     *
     * @param name      e.g. {@code network-mediation}, {@code filesystem}, {@code no-new-privileges}
     * @param mechanism e.g. {@code seccomp-user-notify}, {@code landlock-abi-7}
     */
    public record Control(String name, String mechanism) {
        /** Rejects null. */
        public Control {
            BackendException.require(name, "control name");
            BackendException.require(mechanism, "control mechanism");
        }
    }
}
