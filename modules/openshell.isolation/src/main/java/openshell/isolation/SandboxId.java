package openshell.isolation;

import java.util.regex.Pattern;

/**
 * The stable name of a sandbox across launches: a DNS label, so it can name pods, services,
 * directories and certificate subjects without escaping.
 *
 * @param value a lower-case DNS label of at most {@link #MAX_LENGTH} characters
 */
public record SandboxId(String value) {
    /** Longest id: one DNS label. */
    public static final int MAX_LENGTH = 63;
    private static final Pattern LABEL = Pattern.compile("[a-z0-9]([a-z0-9-]*[a-z0-9])?");

    /** Validates the value. */
    public SandboxId {
        BackendException.require(value, "sandbox id");
        if (value.isEmpty() || value.length() > MAX_LENGTH || !LABEL.matcher(value).matches()) {
            throw BackendException.invalid("sandbox id must be a lower-case DNS label of 1.." + MAX_LENGTH
                    + " characters: '" + value + "'");
        }
    }

    @Override
    public String toString() {
        return value;
    }
}
