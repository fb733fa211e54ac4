package openshell.sandbox;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import openshell.isolation.AgentSpec;
import openshell.isolation.BackendException;
import openshell.isolation.ByteChannel;
import openshell.isolation.ConfirmationEvidence;
import openshell.isolation.ExecSession;
import openshell.isolation.ExecSpec;
import openshell.isolation.ExitStatus;
import openshell.isolation.NetworkMediationSource;
import openshell.isolation.ProcessSignal;
import openshell.isolation.TerminalSize;
import openshell.isolation.WorkloadTrust;

/**
 * What the Sandbox Protocol adapter calls: the runtime's control operations, in lifecycle order,
 * in terms of the isolation contract only. It exists so the protocol side (gRPC, TLS, JWT; issue
 * #4) can be added without touching the runtime, and so the runtime is testable without it.
 * Out-of-order calls throw {@code BackendException} INVALID and change nothing; after the agent
 * ended every call but {@link #await} throws TERMINATED.
 */
interface RuntimeControl {
    /**
     * Pins the supervisor instance and generation.
     *
     * @param supervisorInstance the supervisor's instance id
     * @param generation         the runtime generation it expects
     * @return the ids of the workload processes already running (none before startAgent)
     */
    List<Long> attach(String supervisorInstance, long generation);

    /**
     * @param supervisorPolicyDigest the SHA-256 (hex) of the policy the supervisor decides with; a
     *                               runtime that holds no policy of its own confirms under it
     * @return evidence of every control in force
     */
    ConfirmationEvidence confirm(String supervisorPolicyDigest);

    /** @param spec the agent @return its process id (a runtime handle, never a PID) */
    long startAgent(AgentSpec spec);

    /**
     * Installs {@code trust} in the workload's trust store, then starts the agent. A control that
     * cannot install trust refuses a non-empty one (fails closed: the agent would not trust the
     * supervisor's interception certificates).
     *
     * @param spec  the agent
     * @param trust CA certificates to add, or none
     * @return the agent's process id
     */
    default long startAgent(AgentSpec spec, WorkloadTrust trust) {
        if (!trust.isEmpty()) {
            throw new BackendException(BackendException.Kind.FAILED, "this runtime cannot install workload trust");
        }
        return startAgent(spec);
    }

    /** @param spec what to run @return its process id */
    long exec(ExecSpec spec);

    /**
     * Replaces, at once and whole, the provider environment (credential placeholders, never
     * values) that later execs start with; the exec's own variables win over it. An update at a
     * credential epoch no newer than the one in force changes nothing, so a stale update that
     * arrives late never wins.
     *
     * @param environment     variable to placeholder, at most {@link SandboxRuntime#MAX_PROVIDER_VARIABLES}
     * @param credentialEpoch the epoch it belongs to
     * @return the epoch in force afterwards
     */
    long updateProviderEnvironment(Map<String, String> environment, long credentialEpoch);

    /** @param process a process id @return its streams */
    ExecSession session(long process);

    /**
     * @param process a process id
     * @return its output journals when the runtime retains its output (the agent's), for an
     *         attach that resumes where the client's copy ends
     */
    Optional<OutputJournal.Pair> retainedOutput(long process);

    /** @param process a process id @param timeout longest wait @return its status once exited */
    Optional<ExitStatus> await(long process, Duration timeout);

    /** @param process a process id @param signal what to send */
    void signal(long process, ProcessSignal signal);

    /** @param process a process id @param size the new terminal size */
    void resize(long process, TerminalSize size);

    /**
     * Connects to a loopback port inside the workload's network namespace, for a port forward.
     *
     * @param port the workload's loopback port
     * @return the connection; FAILED if nothing listens there
     */
    ByteChannel portForward(int port);

    /** Ends Running: every workload process is killed. */
    void terminate();

    /**
     * Whether a supervisor takes pending connections: when it stops (its stream ends, the link
     * drops), egress stops at once, and the runtime's loss bound starts.
     *
     * @param present whether one takes them now
     */
    void supervision(boolean present);

    /** @return whether a supervisor takes pending connections now; the mediation streams end when not */
    boolean supervised();

    /** @return where the supervisor takes pending connections and DNS queries */
    NetworkMediationSource mediation();

    /**
     * Lets the workload's DNS queries be asked of the supervisor on the thread they arrive on,
     * instead of waiting in {@link #mediation()}'s queue for the DNS plane's loop: one thread
     * hand-off less on every query's way.
     *
     * @param asker what asks a query (it never blocks for the answer); empty: queue them again
     */
    void askDnsDirectly(java.util.Optional<java.util.function.Consumer<openshell.isolation.PendingDnsQuery>> asker);
}
