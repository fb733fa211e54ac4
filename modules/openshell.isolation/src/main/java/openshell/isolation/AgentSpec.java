package openshell.isolation;

import java.util.List;
import java.util.Map;

/**
 * The agent program: the one process whose exit ends a running boundary.
 *
 * @param argv             program and arguments (copied); argv[0] is resolved inside the workload
 * @param environment      environment (copied); holds credential placeholders, never secrets
 * @param workingDirectory absolute path inside the workload
 */
public record AgentSpec(List<String> argv, Map<String, String> environment, String workingDirectory) {
    /** Most arguments accepted. */
    public static final int MAX_ARGS = 4096;
    /** Most environment entries accepted. */
    public static final int MAX_ENV = 4096;

    /** Validates and copies. */
    public AgentSpec {
        argv = CommandLines.argv(argv, MAX_ARGS);
        environment = CommandLines.environment(environment, MAX_ENV);
        workingDirectory = CommandLines.directory(workingDirectory);
    }

    /**
     * @param argv program and arguments
     * @return an agent with an empty environment working in {@code /}
     */
    public static AgentSpec of(List<String> argv) {
        return new AgentSpec(argv, Map.of(), "/");
    }
}
