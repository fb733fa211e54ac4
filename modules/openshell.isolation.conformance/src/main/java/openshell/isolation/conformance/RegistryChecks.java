package openshell.isolation.conformance;

import static openshell.isolation.conformance.Workbench.expect;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import openshell.isolation.BackendException.Kind;
import openshell.isolation.BackendKey;
import openshell.isolation.BackendRegistry;
import openshell.isolation.BoundBoundary;
import openshell.isolation.IsolationBackend;
import openshell.isolation.TopologyDescriptor;
import openshell.isolation.VerifiedTopologyDescriptor;
import openshell.isolation.spi.IsolationBackendProvider;

/** Selection by exact name and version, and every rejection, with no fallback. */
final class RegistryChecks {
    static final BackendKey UNKNOWN = new BackendKey("openshell-conformance-unknown", 1);
    static final BackendKey DECOY = new BackendKey("openshell-conformance-decoy", 1);

    private RegistryChecks() {
    }

    static List<Check> all() {
        return List.of(
                new Check("registry.selects-exact-backend", RegistryChecks::selectsExactBackend),
                new Check("registry.duplicate-rejected", RegistryChecks::duplicateRejected),
                new Check("registry.unknown-rejected", RegistryChecks::unknownRejected),
                new Check("registry.mismatch-denied-no-fallback", RegistryChecks::mismatchDenied),
                new Check("registry.backend-refuses-foreign-descriptor", RegistryChecks::refusesForeignDescriptor));
    }

    private static void selectsExactBackend(Workbench bench) {
        ConformanceTarget target = bench.target();
        assertEquals(target.backend(), target.backendProvider().key(), "the provider must serve the backend under test");
        assertTrue(target.registry().available().contains(target.backend()),
                "the registry must resolve " + target.backend() + "; it has " + target.registry().available());
        Launch launch = bench.launch(bench.idleAgent());
        VerifiedTopologyDescriptor verified = bench.verify(launch);
        assertEquals(target.backend(), verified.backend());
        IsolationBackend backend = bench.backend(verified);
        assertEquals(target.backend(), backend.key(), "the registry must return exactly the admitted backend");
    }

    private static void duplicateRejected(Workbench bench) {
        IsolationBackendProvider provider = bench.target().backendProvider();
        expect(Kind.INVALID, () -> BackendRegistry.of(List.of(provider, provider)), "the same provider registered twice");
        expect(Kind.INVALID, () -> BackendRegistry.of(List.of(provider, new Decoy(provider.key()))),
                "a second provider claiming " + provider.key());
    }

    private static void unknownRejected(Workbench bench) {
        BackendRegistry registry = bench.target().registry();
        expect(Kind.UNAVAILABLE, () -> registry.verify(TopologyDescriptor.of(UNKNOWN, new byte[0]), UNKNOWN),
                "an unregistered backend");
        BackendKey next = nextVersion(bench.target().backend());
        if (!registry.available().contains(next)) {
            expect(Kind.UNAVAILABLE, () -> registry.verify(TopologyDescriptor.of(next, new byte[0]), next),
                    "an unregistered version of the backend under test (" + next + ")");
        }
    }

    private static void mismatchDenied(Workbench bench) {
        ConformanceTarget target = bench.target();
        BackendKey key = target.backend();
        BackendKey next = nextVersion(key);
        byte[] payload = bench.launch(bench.idleAgent()).descriptor().payload();
        // A registry that could serve either: refusing must not depend on what is registered.
        BackendRegistry both = BackendRegistry.of(List.of(target.backendProvider(), new Decoy(next), new Decoy(DECOY)));
        for (BackendRegistry registry : List.of(target.registry(), both)) {
            expect(Kind.DENIED, () -> registry.verify(TopologyDescriptor.of(key, payload), next),
                    "a descriptor for " + key + " when admission requires " + next);
            expect(Kind.DENIED, () -> registry.verify(TopologyDescriptor.of(next, payload), key),
                    "a descriptor for " + next + " when admission requires " + key);
            expect(Kind.DENIED, () -> registry.verify(TopologyDescriptor.of(DECOY, payload), key),
                    "a descriptor for " + DECOY + " when admission requires " + key);
            expect(Kind.DENIED, () -> registry.verify(TopologyDescriptor.of(key, payload), DECOY),
                    "a descriptor for " + key + " when admission requires " + DECOY);
        }
    }

    private static void refusesForeignDescriptor(Workbench bench) {
        ConformanceTarget target = bench.target();
        Launch launch = bench.launch(bench.idleAgent());
        BackendRegistry both = BackendRegistry.of(List.of(target.backendProvider(), new Decoy(DECOY)));
        VerifiedTopologyDescriptor foreign = both.verify(TopologyDescriptor.of(DECOY, launch.descriptor().payload()), DECOY);
        IsolationBackend backend = both.backend(both.verify(launch.descriptor(), target.backend()));
        expect(Kind.INVALID, () -> bench.adopt(backend.attach(foreign, launch.context())),
                "attaching a descriptor verified for " + DECOY + " with " + target.backend());
        // The refusal changed nothing: the environment is still free to attach.
        BoundBoundary bound = bench.attach(launch);
        bench.mediation(bound);
        bound.abort();
    }

    private static BackendKey nextVersion(BackendKey key) {
        return new BackendKey(key.name(), key.version() + 1);
    }

    /** A provider for another backend: it must never be picked in place of the admitted one. */
    private record Decoy(BackendKey key) implements IsolationBackendProvider {
        @Override
        public IsolationBackend create() {
            return new IsolationBackend() {
                @Override
                public BackendKey key() {
                    return key;
                }

                @Override
                public BoundBoundary attach(VerifiedTopologyDescriptor descriptor, openshell.isolation.SandboxContext context) {
                    throw new openshell.isolation.BackendException(Kind.DENIED, "the conformance decoy attaches nothing");
                }
            };
        }
    }
}
