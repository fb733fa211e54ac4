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
 * @param trust     CA certificates the backend installs in the workload's trust store before the
 *                  agent starts (the supervisor's interception CA); {@link WorkloadTrust#none()} for none
 */
public record SandboxContext(SandboxId sandboxId, SandboxSessionId sessionId, PolicySnapshot policy,
                             AgentSpec agent, WorkloadIdentity workload, WorkloadTrust trust) {
    /** Rejects missing parts. */
    public SandboxContext {
        BackendException.require(sandboxId, "sandbox id");
        BackendException.require(sessionId, "session id");
        BackendException.require(policy, "policy");
        BackendException.require(agent, "agent");
        BackendException.require(workload, "workload identity");
        BackendException.require(trust, "workload trust");
    }

    /**
     * A context with nothing to add to the workload's trust store.
     *
     * @param sandboxId the sandbox
     * @param sessionId this launch
     * @param policy    the whole effective policy
     * @param agent     the agent program
     * @param workload  the workload identity
     */
    public SandboxContext(SandboxId sandboxId, SandboxSessionId sessionId, PolicySnapshot policy, AgentSpec agent,
                          WorkloadIdentity workload) {
        this(sandboxId, sessionId, policy, agent, workload, WorkloadTrust.none());
    }

    /**
     * @param trust the workload trust
     * @return this context with that trust
     */
    public SandboxContext withTrust(WorkloadTrust trust) {
        return new SandboxContext(sandboxId, sessionId, policy, agent, workload, trust);
    }
}
