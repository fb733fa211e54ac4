package openshell.gateway;

import java.nio.charset.StandardCharsets;
import java.util.Optional;

import openshell.isolation.SandboxContext;
import openshell.isolation.WorkloadIdentity;
import openshell.policy.AccountRef;
import openshell.policy.FilesystemPolicy;
import openshell.policy.LandlockCompatibility;
import openshell.policy.Policy;
import openshell.policy.PolicyException;
import openshell.protocol.WorkloadConfinement;

/**
 * The admitted policy's static sections, as the launch carries them: the workload identity the
 * driver provisions for (numeric ids; a name keeps the default here and is resolved by the
 * runtime in the workload's own passwd/group) and the confinement sealed into the runtime bundle.
 * Both are fixed at create: a reload never changes them ({@code PolicyGeneration}).
 */
final class StaticSections {
    /** The unprivileged id a workload gets when its policy names no user (or group), inside its user namespace. */
    static final int DEFAULT_ID = 1000;

    private StaticSections() {
    }

    /**
     * @param policy the admitted policy
     * @return the workload identity: the policy's numeric user and group, else {@link #DEFAULT_ID}
     */
    static WorkloadIdentity workload(Policy policy) {
        return WorkloadIdentity.of(numeric(policy.process().runAsUser()), numeric(policy.process().runAsGroup()));
    }

    /** As above, for a launch's context (its policy was admitted when it was created). */
    static WorkloadConfinement confinement(SandboxContext context) {
        return confinement(admitted(new String(context.policy().document(), StandardCharsets.UTF_8)));
    }

    /**
     * @param document a policy the gateway admitted (at create, or loaded since)
     * @return it, parsed
     * @throws GatewayException INVALID if it no longer passes {@code policy check} (a stricter
     *                          engine than the one that admitted it): nothing is launched with it
     */
    static Policy admitted(String document) {
        try {
            return Policy.parse(document);
        } catch (PolicyException e) {
            throw new GatewayException(GatewayException.Reason.INVALID, "the sandbox's policy no longer passes policy check,"
                    + " so its static sections cannot be applied: " + e.getMessage());
        }
    }

    /**
     * @param policy the admitted policy
     * @return filesystem_policy, landlock and process as the runtime applies them
     */
    static WorkloadConfinement confinement(Policy policy) {
        FilesystemPolicy fs = policy.filesystem();
        boolean declared = !fs.equals(FilesystemPolicy.none());
        return new WorkloadConfinement(declared, fs.readOnly(), fs.readWrite(), fs.includeWorkdir(),
                policy.landlock() == LandlockCompatibility.BEST_EFFORT, written(policy.process().runAsUser()),
                written(policy.process().runAsGroup()));
    }

    private static int numeric(Optional<AccountRef> ref) {
        return ref.filter(r -> r instanceof AccountRef.Id).map(r -> ((AccountRef.Id) r).value()).orElse(DEFAULT_ID);
    }

    private static Optional<String> written(Optional<AccountRef> ref) {
        return ref.map(r -> switch (r) {
            case AccountRef.Id id -> Integer.toString(id.value());
            case AccountRef.Name name -> name.value();
        });
    }
}
