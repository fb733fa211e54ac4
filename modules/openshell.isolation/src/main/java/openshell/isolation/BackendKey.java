package openshell.isolation;

import java.util.regex.Pattern;

/**
 * The exact identity of a backend implementation: a name and one version. There are no version
 * ranges: a descriptor written for version 1 is attached only by version 1.
 *
 * @param name    lower-case name, e.g. {@code openshell-sandbox}
 * @param version a positive version
 */
public record BackendKey(String name, int version) {
    private static final Pattern NAME = Pattern.compile("[a-z][a-z0-9-]{0,62}");

    /** Validates name and version. */
    public BackendKey {
        BackendException.require(name, "backend name");
        if (!NAME.matcher(name).matches()) {
            throw BackendException.invalid("backend name must match " + NAME.pattern() + ": '" + name + "'");
        }
        if (version < 1) {
            throw BackendException.invalid("backend version must be positive: " + version);
        }
    }

    @Override
    public String toString() {
        return name + "@" + version;
    }
}
