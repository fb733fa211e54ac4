package openshell.supervisor;

import java.util.List;
import java.util.Map;

import openshell.protocol.TokenPair;

/**
 * The seam between the supervisor's gateway session and the rest of the supervisor: what the
 * gateway may ask of a running sandbox. The supervisor's main implements it over its running
 * boundary and policy installation; {@link GatewaySession} only carries messages.
 */
interface GatewaySessionHandler {
    /** The verdict on one policy generation. */
    record PolicyVerdict(boolean loaded, String message) {
    }

    /** Where one exec's output goes; called from any thread, at most one terminal call. */
    interface ExecOutput {
        void stdout(byte[] bytes);

        void stderr(byte[] bytes);

        /** The process ended with this code (128 + signal for a signal). */
        void exit(int code);

        /** The exec could not run or was lost; the reason never holds a secret. */
        void error(String reason);
    }

    /** A running exec's standard input. */
    interface ExecInput {
        void write(byte[] bytes);

        void close();
    }

    /**
     * Validates and, if valid, installs a new policy generation atomically.
     *
     * @param generation the generation, higher than the one in force
     * @param document   the policy YAML
     * @return LOADED, or FAILED with the reason (the previous policy stays in force)
     */
    PolicyVerdict applyPolicy(long generation, byte[] document);

    /**
     * Both tokens of the next credential epoch: the sandbox token goes to the runtime link.
     *
     * @param tokens the new pair
     */
    void tokensRefreshed(TokenPair tokens);

    /**
     * Starts a command in the running boundary.
     *
     * @return its standard input
     */
    ExecInput exec(List<String> argv, Map<String, String> environment, String workingDirectory, ExecOutput output);
}
