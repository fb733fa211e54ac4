package openshell.isolation.spi;

import openshell.isolation.BackendKey;
import openshell.isolation.IsolationBackend;

/**
 * A service that makes one isolation backend available under its exact name and version.
 * Declared with {@code provides} in the backend's {@code module-info}; never selected by anything
 * but an exact {@link BackendKey} match.
 */
public interface IsolationBackendProvider {
    /** @return the exact name and version this provider serves */
    BackendKey key();

    /** @return a backend whose {@link IsolationBackend#key()} equals {@link #key()} */
    IsolationBackend create();
}
