package openshell.isolation.conformance.launcher;

import java.util.List;
import java.util.ServiceLoader;

import openshell.isolation.conformance.ConformanceTarget;

/**
 * Finds the registered conformance target of a backend by its exact name. Like the registry,
 * it never picks a near match: an unknown or ambiguous name is an error that lists what exists.
 */
final class TargetLookup {
    /** The launcher configuration parameter that names the backend under test. */
    static final String BACKEND_PARAMETER = "openshell.conformance.backend";

    private TargetLookup() {
    }

    static List<ConformanceTarget> registered() {
        return ServiceLoader.load(ConformanceTarget.class).stream().map(ServiceLoader.Provider::get).toList();
    }

    static ConformanceTarget byName(String name) {
        List<ConformanceTarget> all = registered();
        List<ConformanceTarget> matching = all.stream().filter(t -> t.backend().name().equals(name)).toList();
        if (matching.size() == 1) {
            return matching.getFirst();
        }
        List<String> known = all.stream().map(t -> t.backend().toString()).sorted().toList();
        throw new IllegalArgumentException(matching.isEmpty()
                ? "no conformance target for backend '" + name + "'; registered: " + known
                : "more than one conformance target for backend '" + name + "': " + known);
    }
}
