package openshell.isolation.conformance.selftest;

import java.util.Set;

import openshell.isolation.BackendKey;
import openshell.isolation.IsolationBackend;
import openshell.isolation.spi.IsolationBackendProvider;

/** Provides the plain backend, with the given defects; used only by the kit's own tests. */
record PlainProvider(Set<Defect> defects) implements IsolationBackendProvider {
    PlainProvider {
        defects = Set.copyOf(defects);
    }

    @Override
    public BackendKey key() {
        return PlainBackend.KEY;
    }

    @Override
    public IsolationBackend create() {
        return new PlainBackend(defects);
    }
}
