package openshell.driver;

import java.nio.file.Path;
import java.util.Map;
import java.util.Objects;

/**
 * Trusted gateway configuration handed to every driver: where it may keep state and its settings
 * (image locations, engine endpoints). Never derived from a request.
 *
 * @param stateRoot a private directory the driver owns for all its sandboxes
 * @param settings  driver settings from the gateway's configuration (copied)
 */
public record DriverEnvironment(Path stateRoot, Map<String, String> settings) {
    /** Requires an absolute state root. */
    public DriverEnvironment {
        Objects.requireNonNull(stateRoot, "stateRoot");
        if (!stateRoot.isAbsolute()) {
            throw DriverException.invalid("driver state root must be absolute: " + stateRoot);
        }
        settings = Map.copyOf(Objects.requireNonNull(settings, "settings"));
    }
}
