package openshell.policy;

import java.util.Objects;

/**
 * One thing wrong with a policy document, located so a person can fix it: the YAML path of the
 * offending node (for example {@code network_policies.github.endpoints[0].port}) and its line and
 * column in the document (1-based; 0 when the problem concerns the document as a whole).
 *
 * @param path    the YAML path, {@code $} for the document root
 * @param line    1-based line, or 0
 * @param column  1-based column, or 0
 * @param message what is wrong and, where it helps, what is expected
 */
public record PolicyProblem(String path, int line, int column, String message) {
    /** Rejects nulls and negative positions. */
    public PolicyProblem {
        Objects.requireNonNull(path, "path");
        Objects.requireNonNull(message, "message");
        if (line < 0 || column < 0) {
            throw new IllegalArgumentException("line and column must not be negative");
        }
    }

    @Override
    public String toString() {
        return "line " + line + ", column " + column + ": " + path + ": " + message;
    }
}
