package openshell.isolation;

import static openshell.isolation.Rejections.invalid;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.nio.charset.StandardCharsets;

import org.junit.jupiter.api.Test;

class DescriptorsAndPolicyTest {
    private static final BackendKey KEY = new BackendKey("openshell-sandbox", 1);

    @Test
    void descriptorPayloadIsBoundedAtExactly64KiB() {
        assertEquals(TopologyDescriptor.MAX_PAYLOAD_BYTES,
                TopologyDescriptor.of(KEY, new byte[TopologyDescriptor.MAX_PAYLOAD_BYTES]).payload().length);
        invalid(() -> TopologyDescriptor.of(KEY, new byte[TopologyDescriptor.MAX_PAYLOAD_BYTES + 1]));
        assertEquals(0, TopologyDescriptor.of(KEY, new byte[0]).payload().length);
        invalid(() -> TopologyDescriptor.of(null, new byte[0]));
        invalid(() -> TopologyDescriptor.of(KEY, null));
    }

    @Test
    void descriptorPayloadCannotBeChangedFromOutside() {
        byte[] payload = {1, 2, 3};
        TopologyDescriptor descriptor = TopologyDescriptor.of(KEY, payload);
        payload[0] = 9;
        descriptor.payload()[1] = 9;
        assertArrayEquals(new byte[] {1, 2, 3}, descriptor.payload());
        assertEquals(TopologyDescriptor.of(KEY, new byte[] {1, 2, 3}), descriptor);
        assertEquals(TopologyDescriptor.of(KEY, new byte[] {1, 2, 3}).hashCode(), descriptor.hashCode());
        assertNotEquals(TopologyDescriptor.of(new BackendKey("openshell-sandbox", 2), new byte[] {1, 2, 3}), descriptor);
    }

    @Test
    void verifiedDescriptorReflectsWhatWasVerified() {
        TopologyDescriptor descriptor = TopologyDescriptor.of(KEY, new byte[] {7});
        VerifiedTopologyDescriptor verified = new VerifiedTopologyDescriptor(descriptor);
        assertEquals(KEY, verified.backend());
        assertArrayEquals(new byte[] {7}, verified.payload());
        assertEquals(descriptor, verified.descriptor());
        // Only the registry can make one: the constructor is package-private.
        assertEquals(0, VerifiedTopologyDescriptor.class.getConstructors().length);
    }

    @Test
    void policySnapshotIsBoundedAtExactly1MiBAndDigestsTheWholeDocument() {
        assertEquals(PolicySnapshot.MAX_DOCUMENT_BYTES,
                PolicySnapshot.of(1, new byte[PolicySnapshot.MAX_DOCUMENT_BYTES]).document().length);
        invalid(() -> PolicySnapshot.of(1, new byte[PolicySnapshot.MAX_DOCUMENT_BYTES + 1]));
        invalid(() -> PolicySnapshot.of(0, new byte[0]));
        invalid(() -> PolicySnapshot.of(-1, new byte[0]));
        invalid(() -> PolicySnapshot.of(1, null));
        PolicySnapshot abc = PolicySnapshot.of(3, "abc".getBytes(StandardCharsets.US_ASCII));
        assertEquals("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", abc.sha256());
        assertEquals(3, abc.generation());
        abc.document()[0] = 'x';
        assertArrayEquals("abc".getBytes(StandardCharsets.US_ASCII), abc.document());
        assertNotEquals(abc, PolicySnapshot.of(4, "abc".getBytes(StandardCharsets.US_ASCII)));
        assertNotEquals(abc, PolicySnapshot.of(3, "abd".getBytes(StandardCharsets.US_ASCII)));
        assertEquals(abc, PolicySnapshot.of(3, "abc".getBytes(StandardCharsets.US_ASCII)));
    }

    @Test
    void evidenceCopiesAndRejectsNulls() {
        java.util.List<ConfirmationEvidence.Control> controls = new java.util.ArrayList<>();
        controls.add(new ConfirmationEvidence.Control("network-mediation", "seccomp-user-notify"));
        ConfirmationEvidence evidence = new ConfirmationEvidence(controls, "6.18", "00", true);
        controls.clear();
        assertEquals(1, evidence.controls().size());
        invalid(() -> new ConfirmationEvidence(null, "6.18", "00", true));
        invalid(() -> new ConfirmationEvidence(java.util.List.of(), null, "00", true));
        invalid(() -> new ConfirmationEvidence(java.util.List.of(), "6.18", null, true));
        invalid(() -> new ConfirmationEvidence.Control(null, "m"));
        invalid(() -> new ConfirmationEvidence.Control("n", null));
    }

    @Test
    void backendExceptionCarriesItsKind() {
        BackendException e = new BackendException(BackendException.Kind.TERMINATED, "gone", new IllegalStateException());
        assertEquals(BackendException.Kind.TERMINATED, e.kind());
        assertEquals("TERMINATED: gone", e.getMessage());
        assertEquals(5, BackendException.Kind.values().length);
    }
}
