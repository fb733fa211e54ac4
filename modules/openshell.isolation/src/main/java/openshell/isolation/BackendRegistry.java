package openshell.isolation;

import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.Set;

import openshell.isolation.spi.IsolationBackendProvider;

/**
 * The only way from a driver's {@link TopologyDescriptor} to a backend: by exact name and version,
 * with duplicates, unknown backends and mismatches all refused. There is deliberately no fallback:
 * a sandbox admitted for one backend is never attached by another, however similar.
 */
public final class BackendRegistry {
    private final Map<BackendKey, IsolationBackendProvider> providers;

    private BackendRegistry(Map<BackendKey, IsolationBackendProvider> providers) {
        this.providers = Map.copyOf(providers);
    }

    /**
     * The providers registered as services in the boot layer.
     *
     * @return the registry
     * @throws BackendException INVALID if two providers claim the same name and version
     */
    public static BackendRegistry load() {
        return of(ServiceLoader.load(IsolationBackendProvider.class).stream()
                .map(ServiceLoader.Provider::get).toList());
    }

    /**
     * The providers registered as services in the given layer (and its parents).
     *
     * @param layer the module layer to search
     * @return the registry
     * @throws BackendException INVALID if two providers claim the same name and version
     */
    public static BackendRegistry load(ModuleLayer layer) {
        BackendException.require(layer, "layer");
        return of(ServiceLoader.load(layer, IsolationBackendProvider.class).stream()
                .map(ServiceLoader.Provider::get).toList());
    }

    /**
     * A registry of exactly these providers.
     *
     * @param providers the providers
     * @return the registry
     * @throws BackendException INVALID if two providers claim the same name and version
     */
    public static BackendRegistry of(Collection<? extends IsolationBackendProvider> providers) {
        BackendException.require(providers, "providers");
        Map<BackendKey, IsolationBackendProvider> byKey = new LinkedHashMap<>();
        for (IsolationBackendProvider provider : providers) {
            BackendException.require(provider, "provider");
            BackendKey key = BackendException.require(provider.key(), "provider key");
            IsolationBackendProvider previous = byKey.putIfAbsent(key, provider);
            if (previous != null) {
                throw BackendException.invalid("two isolation backends claim " + key + ": "
                        + previous.getClass().getName() + " and " + provider.getClass().getName());
            }
        }
        return new BackendRegistry(byKey);
    }

    /** @return the backends this registry can resolve */
    public Set<BackendKey> available() {
        return providers.keySet();
    }

    /**
     * Checks a descriptor against the backend that admission required.
     *
     * @param descriptor what the driver wrote
     * @param admitted   the backend admission chose from trusted configuration
     * @return the verified descriptor
     * @throws BackendException DENIED if the descriptor names another backend or version;
     *                          UNAVAILABLE if the admitted backend is not registered
     */
    public VerifiedTopologyDescriptor verify(TopologyDescriptor descriptor, BackendKey admitted) {
        BackendException.require(descriptor, "descriptor");
        BackendException.require(admitted, "admitted backend");
        if (!descriptor.backend().equals(admitted)) {
            throw new BackendException(BackendException.Kind.DENIED, "descriptor is for " + descriptor.backend()
                    + " but admission requires " + admitted + "; no other backend may attach it");
        }
        if (!providers.containsKey(admitted)) {
            throw new BackendException(BackendException.Kind.UNAVAILABLE, "isolation backend " + admitted
                    + " is not registered; registered: " + List.copyOf(providers.keySet()));
        }
        return new VerifiedTopologyDescriptor(descriptor);
    }

    /**
     * The backend for a verified descriptor.
     *
     * @param descriptor a descriptor verified by this or an equal registry
     * @return a backend instance of exactly the descriptor's name and version
     * @throws BackendException UNAVAILABLE if that backend is not registered here
     */
    public IsolationBackend backend(VerifiedTopologyDescriptor descriptor) {
        BackendException.require(descriptor, "descriptor");
        IsolationBackendProvider provider = providers.get(descriptor.backend());
        if (provider == null) {
            throw new BackendException(BackendException.Kind.UNAVAILABLE, "isolation backend "
                    + descriptor.backend() + " is not registered");
        }
        IsolationBackend backend = BackendException.require(provider.create(), "backend from " + provider.key());
        if (!backend.key().equals(descriptor.backend())) {
            throw new BackendException(BackendException.Kind.FAILED, "provider for " + descriptor.backend()
                    + " created a backend claiming " + backend.key());
        }
        return backend;
    }
}
