package openshell.isolation;

import java.util.List;

/**
 * Which program opened a connection, captured while the caller was blocked in the syscall, so it
 * cannot change between the question and the answer. Ancestors are nearest first. The command
 * line is kept for diagnostics only: it is chosen by the caller and never authorizes anything.
 *
 * @param executable        the calling thread's executable
 * @param ancestors         the process's ancestors within the workload, nearest first (copied)
 * @param diagnosticCmdline the caller's argv as it claims it, for audit only (copied)
 */
public record BinaryIdentity(Executable executable, List<Executable> ancestors, List<String> diagnosticCmdline) {
    /** Most ancestors recorded. */
    public static final int MAX_ANCESTORS = 64;
    /** Most command-line entries recorded. */
    public static final int MAX_CMDLINE = 256;

    /** Validates and copies. */
    public BinaryIdentity {
        BackendException.require(executable, "executable");
        BackendException.require(ancestors, "ancestors");
        BackendException.require(diagnosticCmdline, "cmdline");
        if (ancestors.size() > MAX_ANCESTORS) {
            throw BackendException.invalid("at most " + MAX_ANCESTORS + " ancestors, got " + ancestors.size());
        }
        if (diagnosticCmdline.size() > MAX_CMDLINE) {
            throw BackendException.invalid("at most " + MAX_CMDLINE + " cmdline entries, got " + diagnosticCmdline.size());
        }
        ancestors = List.copyOf(ancestors);
        diagnosticCmdline = List.copyOf(diagnosticCmdline);
    }

    /**
     * @param executable the executable
     * @return an identity with no ancestors and no command line
     */
    public static BinaryIdentity of(Executable executable) {
        return new BinaryIdentity(executable, List.of(), List.of());
    }

    /** @return the executable's absolute path */
    public String path() {
        return executable.path();
    }
}
