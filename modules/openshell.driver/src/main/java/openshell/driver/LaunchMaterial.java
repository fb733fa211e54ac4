package openshell.driver;

import java.util.Arrays;
import java.util.Objects;

/**
 * Per-launch secrets minted by the gateway (token pair, TLS material, public keys), sealed in two
 * bundles the driver hands over without reading them: one for the supervisor and one for the
 * sandbox runtime. The driver must deliver each through a private channel (a 0600 file in a 0700
 * directory it deletes after reading, an inherited descriptor, a secret volume) — never a command
 * line, an environment variable or the workload's filesystem. {@link #toString()} never shows them.
 */
public final class LaunchMaterial {
    /** Largest bundle accepted. */
    public static final int MAX_BUNDLE_BYTES = 256 * 1024;

    private final byte[] supervisorBundle;
    private final byte[] runtimeBundle;

    private LaunchMaterial(byte[] supervisorBundle, byte[] runtimeBundle) {
        this.supervisorBundle = supervisorBundle;
        this.runtimeBundle = runtimeBundle;
    }

    /**
     * @param supervisorBundle what the supervisor needs (copied)
     * @param runtimeBundle    what the sandbox runtime needs (copied)
     * @return the material
     */
    public static LaunchMaterial of(byte[] supervisorBundle, byte[] runtimeBundle) {
        Objects.requireNonNull(supervisorBundle, "supervisor bundle");
        Objects.requireNonNull(runtimeBundle, "runtime bundle");
        if (supervisorBundle.length > MAX_BUNDLE_BYTES || runtimeBundle.length > MAX_BUNDLE_BYTES) {
            throw DriverException.invalid("launch bundles are limited to " + MAX_BUNDLE_BYTES + " bytes");
        }
        return new LaunchMaterial(supervisorBundle.clone(), runtimeBundle.clone());
    }

    /** @return a copy of the supervisor's bundle */
    public byte[] supervisorBundle() {
        return supervisorBundle.clone();
    }

    /** @return a copy of the runtime's bundle */
    public byte[] runtimeBundle() {
        return runtimeBundle.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof LaunchMaterial m && Arrays.equals(m.supervisorBundle, supervisorBundle)
                && Arrays.equals(m.runtimeBundle, runtimeBundle);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(supervisorBundle) * 31 + Arrays.hashCode(runtimeBundle);
    }

    @Override
    public String toString() {
        return "LaunchMaterial[redacted]";
    }
}
