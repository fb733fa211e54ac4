package openshell.driver.container;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.Optional;

import org.junit.jupiter.api.Test;

import openshell.driver.DriverException;
import openshell.isolation.SandboxId;

class VolumeOwnershipTest {
    private static final ContainerNames A = new ContainerNames("ns", new SandboxId("a"));
    private static final ContainerNames B = new ContainerNames("ns", new SandboxId("b"));

    private static VolumeOwnership.VolumeFacts channel(ContainerNames owner) {
        return new VolumeOwnership.VolumeFacts(owner.channelVolume(), "local", Map.of(),
                Labels.of(owner, Labels.Role.CHANNEL, "openshell-sandbox"));
    }

    @Test
    void aChannelVolumeLabelledForItsSandboxPasses() {
        VolumeOwnership.requireChannel(channel(A), A);
    }

    @Test
    void anotherSandboxsChannelIsNotOurs() {
        assertThrows(DriverException.class, () -> VolumeOwnership.requireChannel(channel(B), A));
        // Same name, foreign labels: a name proves nothing.
        VolumeOwnership.VolumeFacts forged = new VolumeOwnership.VolumeFacts(A.channelVolume(), "local", Map.of(),
                Labels.of(B, Labels.Role.CHANNEL, "openshell-sandbox"));
        assertThrows(DriverException.class, () -> VolumeOwnership.requireChannel(forged, A));
        VolumeOwnership.VolumeFacts options = new VolumeOwnership.VolumeFacts(A.channelVolume(), "local",
                Map.of("type", "nfs"), Labels.of(A, Labels.Role.CHANNEL, "openshell-sandbox"));
        assertThrows(DriverException.class, () -> VolumeOwnership.requireChannel(options, A));
    }

    @Test
    void aWorkspaceNamingAChannelVolumeIsRefusedBeforeAnythingExists() {
        DriverException e = assertThrows(DriverException.class,
                () -> VolumeOwnership.admitUserVolume(B.channelVolume(), Optional.empty()));
        assertEquals(DriverException.Kind.INVALID, e.kind());
        DriverException managed = assertThrows(DriverException.class, () -> VolumeOwnership.admitUserVolume("renamed",
                Optional.of(new VolumeOwnership.VolumeFacts("renamed", "local", Map.of(),
                        Labels.of(B, Labels.Role.CHANNEL, "openshell-sandbox")))));
        assertTrue(managed.getMessage().contains("sandbox b"), managed.getMessage());
        VolumeOwnership.admitUserVolume("my-data", Optional.of(new VolumeOwnership.VolumeFacts("my-data", "local",
                Map.of(), Map.of("team", "x"))));
    }
}
