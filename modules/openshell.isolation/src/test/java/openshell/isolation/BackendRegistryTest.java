package openshell.isolation;

import static openshell.isolation.Rejections.expect;
import static openshell.isolation.Rejections.invalid;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import openshell.isolation.BackendException.Kind;
import openshell.isolation.spi.IsolationBackendProvider;

import org.junit.jupiter.api.Test;

class BackendRegistryTest {
    private static final BackendKey ONE = new BackendKey("openshell-sandbox", 1);
    private static final BackendKey TWO = new BackendKey("openshell-sandbox", 2);
    private static final BackendKey OTHER = new BackendKey("other", 1);

    /** A provider whose backend claims the given key (which may differ from its own, to test that check). */
    private record Stub(BackendKey key, BackendKey claims) implements IsolationBackendProvider {
        Stub(BackendKey key) {
            this(key, key);
        }

        @Override
        public IsolationBackend create() {
            return new IsolationBackend() {
                @Override
                public BackendKey key() {
                    return claims;
                }

                @Override
                public BoundBoundary attach(VerifiedTopologyDescriptor descriptor, SandboxContext context) {
                    throw new BackendException(Kind.UNAVAILABLE, "stub");
                }
            };
        }
    }

    private static TopologyDescriptor descriptor(BackendKey key) {
        return TopologyDescriptor.of(key, new byte[] {1, 2, 3});
    }

    @Test
    void selectsExactlyTheAdmittedNameAndVersion() {
        BackendRegistry registry = BackendRegistry.of(List.of(new Stub(ONE), new Stub(TWO), new Stub(OTHER)));
        assertEquals(Set.of(ONE, TWO, OTHER), registry.available());
        VerifiedTopologyDescriptor verified = registry.verify(descriptor(TWO), TWO);
        assertEquals(TWO, verified.backend());
        assertEquals(descriptor(TWO), verified.descriptor());
        assertEquals(TWO, registry.backend(verified).key());
    }

    @Test
    void duplicatesAreRejectedEvenFromDifferentProviders() {
        Stub stub = new Stub(ONE);
        invalid(() -> BackendRegistry.of(List.of(stub, stub)));
        invalid(() -> BackendRegistry.of(List.of(new Stub(ONE), new Stub(TWO), new Stub(ONE))));
    }

    @Test
    void unknownBackendIsUnavailableWithoutFallbackToAnotherVersion() {
        BackendRegistry registry = BackendRegistry.of(List.of(new Stub(ONE)));
        expect(Kind.UNAVAILABLE, () -> registry.verify(descriptor(TWO), TWO));
        expect(Kind.UNAVAILABLE, () -> registry.verify(descriptor(OTHER), OTHER));
        expect(Kind.UNAVAILABLE, () -> BackendRegistry.of(List.of()).verify(descriptor(ONE), ONE));
    }

    @Test
    void mismatchBetweenDescriptorAndAdmissionIsDeniedEvenWhenBothAreRegistered() {
        BackendRegistry registry = BackendRegistry.of(List.of(new Stub(ONE), new Stub(TWO), new Stub(OTHER)));
        expect(Kind.DENIED, () -> registry.verify(descriptor(ONE), TWO));
        expect(Kind.DENIED, () -> registry.verify(descriptor(TWO), ONE));
        expect(Kind.DENIED, () -> registry.verify(descriptor(OTHER), ONE));
        expect(Kind.DENIED, () -> registry.verify(descriptor(ONE), OTHER));
    }

    @Test
    void aVerifiedDescriptorResolvesOnlyInARegistryThatHasItsBackend() {
        VerifiedTopologyDescriptor verified = BackendRegistry.of(List.of(new Stub(TWO))).verify(descriptor(TWO), TWO);
        expect(Kind.UNAVAILABLE, () -> BackendRegistry.of(List.of(new Stub(ONE))).backend(verified));
    }

    @Test
    void aProviderWhoseBackendClaimsAnotherKeyFails() {
        BackendRegistry registry = BackendRegistry.of(List.of(new Stub(ONE, TWO)));
        VerifiedTopologyDescriptor verified = registry.verify(descriptor(ONE), ONE);
        expect(Kind.FAILED, () -> registry.backend(verified));
    }

    @Test
    void nullsAreInvalid() {
        BackendRegistry registry = BackendRegistry.of(List.of(new Stub(ONE)));
        invalid(() -> registry.verify(null, ONE));
        invalid(() -> registry.verify(descriptor(ONE), null));
        invalid(() -> registry.backend(null));
        invalid(() -> BackendRegistry.of(null));
        List<IsolationBackendProvider> withNull = new ArrayList<>();
        withNull.add(null);
        invalid(() -> BackendRegistry.of(withNull));
        invalid(() -> BackendRegistry.of(List.of(new Stub(null, ONE))));
        invalid(() -> BackendRegistry.load(null));
    }

    @Test
    void serviceLoadingFindsNoProviderInThisModule() {
        // The contract module provides no backend; ServiceLoader must not invent one.
        assertTrue(BackendRegistry.load().available().isEmpty());
        assertTrue(BackendRegistry.load(ModuleLayer.boot()).available().isEmpty());
    }

    @Test
    void theRegistryKeepsItsOwnCopyOfTheProviders() {
        List<IsolationBackendProvider> providers = new ArrayList<>(List.of(new Stub(ONE)));
        BackendRegistry registry = BackendRegistry.of(providers);
        providers.add(new Stub(TWO));
        assertEquals(Set.of(ONE), registry.available());
        assertSame(ONE, registry.verify(descriptor(ONE), ONE).backend());
    }

    @Test
    void backendKeyNamesAndVersionsAreExact() {
        assertEquals("a", new BackendKey("a", 1).name());
        String longest = "a" + "b".repeat(62);
        assertEquals(63, new BackendKey(longest, 1).name().length());
        invalid(() -> new BackendKey(longest + "c", 1));
        invalid(() -> new BackendKey("", 1));
        invalid(() -> new BackendKey("Sandbox", 1));
        invalid(() -> new BackendKey("1sandbox", 1));
        invalid(() -> new BackendKey("sand box", 1));
        invalid(() -> new BackendKey(null, 1));
        invalid(() -> new BackendKey("a", 0));
        invalid(() -> new BackendKey("a", -1));
        assertEquals(Integer.MAX_VALUE, new BackendKey("a", Integer.MAX_VALUE).version());
        assertEquals("openshell-sandbox@2", TWO.toString());
    }
}
