package openshell.driver.container;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;

class FenceEvidenceTest {
    private static FenceEvidence sound() {
        return new FenceEvidence("0123456789abcdef", "none", List.of("none"), List.of(), List.of("ALL"), false,
                List.of("no-new-privileges"));
    }

    @Test
    void aSoundFenceHasNoViolation() {
        assertEquals(List.of(), sound().violations());
        assertEquals("", sound().reason());
        assertEquals(List.of(), new FenceEvidence("c", "none", null, null, List.of("ALL"), false,
                List.of("no-new-privileges:true")).violations());
    }

    @Test
    void eachMissingFactIsAViolationOfItsOwn() {
        FenceEvidence s = sound();
        List<FenceEvidence> broken = List.of(
                new FenceEvidence(s.containerId(), "bridge", s.networks(), s.capAdd(), s.capDrop(), false, s.securityOpt()),
                new FenceEvidence(s.containerId(), "none", List.of("none", "host"), s.capAdd(), s.capDrop(), false, s.securityOpt()),
                new FenceEvidence(s.containerId(), "none", s.networks(), List.of("NET_ADMIN"), s.capDrop(), false, s.securityOpt()),
                new FenceEvidence(s.containerId(), "none", s.networks(), s.capAdd(), List.of(), false, s.securityOpt()),
                new FenceEvidence(s.containerId(), "none", s.networks(), s.capAdd(), s.capDrop(), true, s.securityOpt()),
                new FenceEvidence(s.containerId(), "none", s.networks(), s.capAdd(), s.capDrop(), false, List.of()),
                new FenceEvidence(s.containerId(), "none", s.networks(), s.capAdd(), s.capDrop(), false,
                        List.of("no-new-privileges", "seccomp=unconfined")));
        for (FenceEvidence f : broken) {
            assertEquals(1, f.violations().size(), f.toString());
            assertTrue(f.reason().startsWith("outer fence violated on container 0123456789ab: "), f.reason());
        }
        assertTrue(broken.get(1).reason().contains("[host]"), broken.get(1).reason());
    }
}
