package openshell.driver;

import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.Set;

import openshell.driver.spi.ComputeDriverProvider;

/** Drivers by exact name: duplicates and unknown names refused, no fallback. */
public final class DriverRegistry {
    private final Map<String, ComputeDriverProvider> providers;

    private DriverRegistry(Map<String, ComputeDriverProvider> providers) {
        this.providers = Map.copyOf(providers);
    }

    /** @return the providers registered as services in the boot layer */
    public static DriverRegistry load() {
        return of(ServiceLoader.load(ComputeDriverProvider.class).stream().map(ServiceLoader.Provider::get).toList());
    }

    /**
     * @param providers exactly these providers
     * @return the registry
     * @throws DriverException INVALID if two providers share a name
     */
    public static DriverRegistry of(Collection<? extends ComputeDriverProvider> providers) {
        Map<String, ComputeDriverProvider> byName = new LinkedHashMap<>();
        for (ComputeDriverProvider p : providers) {
            ComputeDriverProvider previous = byName.putIfAbsent(p.name(), p);
            if (previous != null) {
                throw DriverException.invalid("two compute drivers are named '" + p.name() + "': "
                        + previous.getClass().getName() + " and " + p.getClass().getName());
            }
        }
        return new DriverRegistry(byName);
    }

    /** @return the names available */
    public Set<String> names() {
        return providers.keySet();
    }

    /**
     * @param name        exact driver name from trusted configuration
     * @param environment the driver's environment
     * @return the driver
     * @throws DriverException UNAVAILABLE if no such driver is registered
     */
    public ComputeDriver driver(String name, DriverEnvironment environment) {
        ComputeDriverProvider p = providers.get(name);
        if (p == null) {
            throw new DriverException(DriverException.Kind.UNAVAILABLE, "no compute driver named '" + name
                    + "'; available: " + List.copyOf(providers.keySet()));
        }
        ComputeDriver driver = p.create(environment);
        if (!driver.name().equals(name)) {
            throw new DriverException(DriverException.Kind.FAILED, "driver provider '" + name
                    + "' created a driver named '" + driver.name() + "'");
        }
        return driver;
    }
}
