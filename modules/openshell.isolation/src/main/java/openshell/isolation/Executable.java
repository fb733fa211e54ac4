package openshell.isolation;

import java.util.Locale;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * An executable file as the kernel saw it: its absolute path in the workload's mount namespace
 * and, when it could be read, the SHA-256 of its content. A digest that could not be computed is
 * absent, never a placeholder value.
 */
public final class Executable {
    private static final Pattern SHA256 = Pattern.compile("[0-9a-f]{64}");
    /** Longest path accepted (Linux PATH_MAX). */
    public static final int MAX_PATH = 4096;

    private final String path;
    private final String sha256;

    private Executable(String path, String sha256) {
        this.path = path;
        this.sha256 = sha256;
    }

    /**
     * @param path absolute path
     * @return an executable whose digest is unknown
     */
    public static Executable of(String path) {
        return new Executable(checkPath(path), null);
    }

    /**
     * @param path   absolute path
     * @param sha256 exactly 64 hex digits (upper case is folded)
     * @return an executable with its digest
     */
    public static Executable of(String path, String sha256) {
        BackendException.require(sha256, "sha256");
        String lower = sha256.toLowerCase(Locale.ROOT);
        if (!SHA256.matcher(lower).matches()) {
            throw BackendException.invalid("sha256 must be exactly 64 hex digits");
        }
        return new Executable(checkPath(path), lower);
    }

    private static String checkPath(String path) {
        BackendException.require(path, "executable path");
        if (!path.startsWith("/") || path.length() > MAX_PATH || path.indexOf('\0') >= 0) {
            throw BackendException.invalid("executable path must be absolute, at most " + MAX_PATH
                    + " characters, without NUL: '" + path + "'");
        }
        return path;
    }

    /** @return the absolute path */
    public String path() {
        return path;
    }

    /** @return the content digest, if it could be computed */
    public Optional<String> sha256() {
        return Optional.ofNullable(sha256);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Executable e && e.path.equals(path) && java.util.Objects.equals(e.sha256, sha256);
    }

    @Override
    public int hashCode() {
        return path.hashCode() * 31 + java.util.Objects.hashCode(sha256);
    }

    @Override
    public String toString() {
        return sha256 == null ? path : path + "@sha256:" + sha256;
    }
}
