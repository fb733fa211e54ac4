package openshell.gateway.store;

import java.nio.file.Path;
import java.util.Objects;

import openshell.gateway.GatewayException;

/**
 * Where sandbox records live. The password is a secret: it is never part of {@link #toString()}
 * and never logged.
 *
 * @param jdbcUrl  {@code jdbc:h2:file:...} (embedded) or {@code jdbc:postgresql://...}
 * @param username database user
 * @param password database password (may be empty)
 */
public record StoreConfig(String jdbcUrl, String username, String password) {
    /** Validates the URL's kind. */
    public StoreConfig {
        Objects.requireNonNull(jdbcUrl, "jdbcUrl");
        Objects.requireNonNull(username, "username");
        Objects.requireNonNull(password, "password");
        if (!jdbcUrl.startsWith("jdbc:h2:file:") && !jdbcUrl.startsWith("jdbc:postgresql://")) {
            throw new GatewayException(GatewayException.Reason.INVALID,
                    "database URL must be jdbc:h2:file:... or jdbc:postgresql://...");
        }
    }

    /**
     * The zero-setup default: an H2 database file in the state directory.
     *
     * @param stateDirectory the gateway's private state directory
     * @return the configuration
     */
    public static StoreConfig embedded(Path stateDirectory) {
        Path file = stateDirectory.toAbsolutePath().resolve("gateway-db");
        return new StoreConfig("jdbc:h2:file:" + file, "openshell", "");
    }

    /** @return whether this is the embedded database */
    public boolean embedded() {
        return jdbcUrl.startsWith("jdbc:h2:");
    }

    @Override
    public String toString() {
        return "StoreConfig[" + jdbcUrl + ", user " + username + ", password " + (password.isEmpty() ? "none" : "***") + "]";
    }
}
