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

    /**
     * What to run for the gateway.
     *
     * @param argv             program and arguments
     * @param environment      environment
     * @param workingDirectory absolute working directory
     * @param terminal         whether it runs on a pseudo-terminal (merged output)
     * @param columns          initial terminal width (ignored without a terminal)
     * @param rows             initial terminal height (ignored without a terminal)
     */
    record ExecCommand(List<String> argv, Map<String, String> environment, String workingDirectory, boolean terminal,
                       int columns, int rows) {
        public ExecCommand {
            argv = List.copyOf(argv);
            environment = Map.copyOf(environment);
        }
    }

    /**
     * Where one exec's output goes; called from any thread, at most one terminal call. The output
     * calls may block while the gateway has granted no output credit: that is the back-pressure
     * that makes a slow API caller slow the process down instead of filling memory.
     */
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
        /** Writes to the process; may block while the process does not read. */
        void write(byte[] bytes);

        void close();
    }

    /** A running exec as the gateway drives it: its stdin and its terminal and signals. */
    interface ExecControl extends ExecInput {
        /** Resizes the pseudo-terminal; ignored for a piped exec or an ended process. */
        void resize(int columns, int rows);

        /** Sends a Linux signal by number; unknown numbers and ended processes are ignored. */
        void signal(int number);

        /** Kills the exec's whole process tree (the API caller went away). */
        void terminate();
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
     * @param command what to run
     * @param output  where its output and end go
     * @return its standard input and controls
     */
    ExecControl exec(ExecCommand command, ExecOutput output);

    /**
     * Connects to a loopback port inside the running boundary and relays it like an exec: the
     * connection's bytes go to {@code output} as stdout, its end as exit 0; writes go to the
     * connection and close half-closes it; resize and signal do nothing; terminate closes it.
     *
     * @param port   1..65535 on the boundary's loopback
     * @param output where the connection's bytes and end go
     * @return the connection's input side and controls
     */
    ExecControl forward(int port, ExecOutput output);
}
