package openshell.isolation;

/**
 * Everything a backend needs to attach one launch of one sandbox. Built by the supervisor from
 * trusted configuration; the workload never supplies any of it.
 *
 * @param sandboxId the sandbox
 * @param sessionId this launch, fresh per launch
 * @param policy    the whole effective policy
 * @param agent     the agent program
 * @param workload  the unprivileged identity the workload runs as
 */
public record SandboxContext(SandboxId sandboxId, SandboxSessionId sessionId, PolicySnapshot policy,
                             AgentSpec agent, WorkloadIdentity workload) {
    /** Rejects missing parts. */
    public SandboxContext {
        BackendException.require(sandboxId, "sandbox id");
        BackendException.require(sessionId, "session id");
        BackendException.require(policy, "policy");
        BackendException.require(agent, "agent");
        BackendException.require(workload, "workload identity");
    }
}
