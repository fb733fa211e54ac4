package openshell.supervisor.spi;

import java.net.URI;
import java.time.Instant;
import java.util.List;
import java.util.Objects;

import openshell.isolation.ByteChannel;
import openshell.isolation.ExecSession;
import openshell.isolation.ExecSpec;
import openshell.isolation.LoopbackTarget;

/**
 * The supervisor's outbound session to its gateway (config fetch, policy revisions, token
 * refresh, exec and forward relays), as a service so the gateway's client can live in the
 * gateway's module: {@code SupervisorMain} loads at most one with {@code ServiceLoader} and opens
 * it when its launch bundle names a gateway endpoint. Without one, the supervisor runs on what its
 * bundle holds (first policy, first token pair) and says so once.
 */
public interface GatewaySessionClient {
    /**
     * Opens the session; it lives until closed and reconnects on its own.
     *
     * @param target   where and as whom
     * @param callback what the supervisor does on the gateway's behalf
     * @return the open session
     */
    Session open(Target target, Callback callback);

    /**
     * The session's coordinates, from the launch bundle.
     *
     * @param endpoint     the gateway's session endpoint
     * @param sandboxId    the sandbox
     * @param generation   the runtime generation
     * @param gatewayToken the gateway-audience bearer token of the current epoch (a secret: never log it)
     */
    record Target(URI endpoint, String sandboxId, long generation, String gatewayToken) {
        /**
         * Canonical constructor.
         *
         * @param endpoint     endpoint
         * @param sandboxId    sandbox
         * @param generation   generation
         * @param gatewayToken token
         */
        public Target {
            Objects.requireNonNull(endpoint);
            Objects.requireNonNull(sandboxId);
            Objects.requireNonNull(gatewayToken);
        }

        @Override
        public String toString() {
            return "Target[" + endpoint + ", " + sandboxId + "@" + generation + ", token hidden]";
        }
    }

    /** What the gateway may ask of the supervisor over the session. */
    interface Callback {
        /**
         * A policy revision: validated whole and installed atomically, or refused.
         *
         * @param policyYaml the new policy
         * @return the outcome: {@code LOADED} with an empty list, or {@code FAILED} with every reason
         */
        Revision applyPolicy(byte[] policyYaml);

        /**
         * A refreshed token pair of a strictly higher credential epoch.
         *
         * @param gatewayToken    gateway-audience token
         * @param sandboxToken    sandbox-audience token
         * @param credentialEpoch its epoch
         * @param expiresAt       its expiry
         */
        void refreshTokens(String gatewayToken, String sandboxToken, long credentialEpoch, Instant expiresAt);

        /**
         * Runs a command in the running boundary for the gateway's exec relay
         * ({@code openshell sandbox exec}). The default refuses, so a supervisor that does not
         * offer it says so at once instead of leaving the caller waiting.
         *
         * @param spec what to run
         * @return the running command
         */
        default ExecSession exec(ExecSpec spec) {
            throw new UnsupportedOperationException("this supervisor does not relay exec from its gateway");
        }

        /**
         * Connects to a loopback port inside the running boundary for the gateway's forward relay
         * ({@code openshell sandbox forward}). The default refuses, like {@link #exec}.
         *
         * @param target the port on the boundary's loopback
         * @return the connection
         */
        default ByteChannel forward(LoopbackTarget target) {
            throw new UnsupportedOperationException("this supervisor does not relay port forwards from its gateway");
        }
    }

    /**
     * The result of a policy revision.
     *
     * @param loaded     whether it became effective
     * @param generation the effective policy generation afterwards
     * @param reasons    why it failed (empty when loaded)
     */
    record Revision(boolean loaded, long generation, List<String> reasons) {
        /**
         * Canonical constructor.
         *
         * @param loaded     loaded
         * @param generation generation
         * @param reasons    reasons
         */
        public Revision {
            reasons = List.copyOf(reasons);
        }
    }

    /** An open session. */
    interface Session extends AutoCloseable {
        /**
         * Appends lines to the sandbox's log at the gateway ({@code openshell sandbox logs}): the
         * agent's output. Lines sent while the session is not open are kept, within a bound, and
         * sent once it is.
         *
         * @param lines the lines, in order
         */
        void log(List<String> lines);

        /**
         * Waits, at most {@code wait}, until no exec or forward the gateway asked for runs here:
         * called once the agent ended, so an exec that ended with it still reports its exit before
         * the session closes.
         *
         * @param wait the longest wait
         * @return whether none runs
         * @throws InterruptedException if interrupted while waiting
         */
        default boolean awaitExecsEnded(java.time.Duration wait) throws InterruptedException {
            return true;
        }

        @Override
        void close();
    }
}
