package openshell.gateway;

import java.nio.file.Path;
import java.util.Map;
import java.util.Objects;

import openshell.gateway.store.StoreConfig;

/**
 * The gateway's trusted configuration: where its state lives, where it listens, its database, the
 * driver admission assigns to new sandboxes, and the operator's network (host aliases, upstream
 * trust anchors) every launch carries. Requests and policies never change any of it.
 *
 * @param stateDirectory private state directory (0700): API token, embedded database, driver state
 * @param host           address to listen on; loopback by default
 * @param port           port to listen on; 0 picks a free one
 * @param store          the database
 * @param defaultDriver  the compute driver for new sandboxes
 * @param driverSettings settings handed to every driver (e.g. the process driver's launcher paths)
 * @param network        operator host aliases and upstream trust anchors for every sandbox
 */
public record GatewayConfig(Path stateDirectory, String host, int port, StoreConfig store, String defaultDriver,
                            Map<String, String> driverSettings, OperatorNetwork network) {
    /** Default API port. */
    public static final int DEFAULT_PORT = 8710;

    /** Validates. */
    public GatewayConfig {
        Objects.requireNonNull(stateDirectory, "stateDirectory");
        Objects.requireNonNull(host, "host");
        Objects.requireNonNull(store, "store");
        Objects.requireNonNull(defaultDriver, "defaultDriver");
        driverSettings = Map.copyOf(Objects.requireNonNull(driverSettings, "driverSettings"));
        Objects.requireNonNull(network, "network");
        if (!stateDirectory.isAbsolute()) {
            throw new GatewayException(GatewayException.Reason.INVALID, "state directory must be absolute: " + stateDirectory);
        }
        if (port < 0 || port > 65535) {
            throw new GatewayException(GatewayException.Reason.INVALID, "port out of range: " + port);
        }
    }

    /**
     * Without operator network configuration.
     *
     * @param stateDirectory private state directory
     * @param host           address to listen on
     * @param port           port to listen on
     * @param store          the database
     * @param defaultDriver  the compute driver for new sandboxes
     * @param driverSettings settings handed to every driver
     */
    public GatewayConfig(Path stateDirectory, String host, int port, StoreConfig store, String defaultDriver,
                         Map<String, String> driverSettings) {
        this(stateDirectory, host, port, store, defaultDriver, driverSettings, OperatorNetwork.none());
    }

    /**
     * Without driver settings.
     *
     * @param stateDirectory private state directory
     * @param host           address to listen on
     * @param port           port to listen on
     * @param store          the database
     * @param defaultDriver  the compute driver for new sandboxes
     */
    public GatewayConfig(Path stateDirectory, String host, int port, StoreConfig store, String defaultDriver) {
        this(stateDirectory, host, port, store, defaultDriver, Map.of());
    }

    /**
     * @param stateDirectory the state directory
     * @return loopback on the default port, the embedded database, the process driver
     */
    public static GatewayConfig defaults(Path stateDirectory) {
        Path abs = stateDirectory.toAbsolutePath();
        return new GatewayConfig(abs, "127.0.0.1", DEFAULT_PORT, StoreConfig.embedded(abs), "process");
    }
}
