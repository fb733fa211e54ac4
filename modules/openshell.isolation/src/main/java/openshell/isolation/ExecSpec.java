package openshell.isolation;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A further process started inside a running boundary, with pipes (separate stdout and stderr) or
 * a pseudo-terminal (merged output, resizable).
 */
public final class ExecSpec {
    /** Most arguments accepted. */
    public static final int MAX_ARGS = AgentSpec.MAX_ARGS;
    /** Most environment entries accepted. */
    public static final int MAX_ENV = AgentSpec.MAX_ENV;
    /** Default and largest admission deadline: an exec not admitted by then is refused, never run late. */
    public static final Duration MAX_ADMISSION = Duration.ofSeconds(30);

    private final List<String> argv;
    private final Map<String, String> environment;
    private final String workingDirectory;
    private final TerminalSize terminal;
    private final Duration admission;

    private ExecSpec(Builder b) {
        this.argv = CommandLines.argv(b.argv, MAX_ARGS);
        this.environment = CommandLines.environment(b.environment, MAX_ENV);
        this.workingDirectory = CommandLines.directory(b.workingDirectory);
        this.terminal = b.terminal;
        this.admission = b.admission;
    }

    /**
     * @param argv program and arguments
     * @return a builder
     */
    public static Builder builder(List<String> argv) {
        return new Builder(argv);
    }

    /**
     * @param argv program and arguments
     * @return a piped exec with an empty environment in {@code /}
     */
    public static ExecSpec of(String... argv) {
        return builder(List.of(argv)).build();
    }

    /** @return program and arguments */
    public List<String> argv() {
        return argv;
    }

    /** @return the environment */
    public Map<String, String> environment() {
        return environment;
    }

    /** @return the absolute working directory */
    public String workingDirectory() {
        return workingDirectory;
    }

    /** @return the initial terminal size when the exec runs on a PTY; empty for pipes */
    public Optional<TerminalSize> terminal() {
        return Optional.ofNullable(terminal);
    }

    /** @return how long the backend may take to admit the exec before refusing it */
    public Duration admission() {
        return admission;
    }

    @Override
    public String toString() {
        return "ExecSpec" + argv + (terminal == null ? "" : " pty " + terminal.columns() + "x" + terminal.rows());
    }

    /** Builds an {@link ExecSpec}. */
    public static final class Builder {
        private final List<String> argv;
        private Map<String, String> environment = Map.of();
        private String workingDirectory = "/";
        private TerminalSize terminal;
        private Duration admission = MAX_ADMISSION;

        private Builder(List<String> argv) {
            this.argv = BackendException.require(argv, "argv");
        }

        /**
         * @param environment the environment (copied)
         * @return this
         */
        public Builder environment(Map<String, String> environment) {
            this.environment = BackendException.require(environment, "environment");
            return this;
        }

        /**
         * @param directory absolute working directory
         * @return this
         */
        public Builder workingDirectory(String directory) {
            this.workingDirectory = BackendException.require(directory, "working directory");
            return this;
        }

        /**
         * Runs the exec on a pseudo-terminal.
         *
         * @param size initial size
         * @return this
         */
        public Builder pty(TerminalSize size) {
            this.terminal = BackendException.require(size, "terminal size");
            return this;
        }

        /**
         * @param deadline positive, at most {@link #MAX_ADMISSION}
         * @return this
         */
        public Builder admission(Duration deadline) {
            BackendException.require(deadline, "admission deadline");
            if (deadline.isNegative() || deadline.isZero() || deadline.compareTo(MAX_ADMISSION) > 0) {
                throw BackendException.invalid("admission deadline must be in (0, " + MAX_ADMISSION + "]: " + deadline);
            }
            this.admission = deadline;
            return this;
        }

        /** @return the spec */
        public ExecSpec build() {
            return new ExecSpec(this);
        }
    }
}
