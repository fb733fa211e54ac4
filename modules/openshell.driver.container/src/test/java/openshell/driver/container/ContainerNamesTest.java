package openshell.driver.container;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import openshell.driver.DriverException;
import openshell.isolation.SandboxId;

class ContainerNamesTest {
    private static final SandboxId ID = new SandboxId("sb-1");

    @Test
    void namesFollowThePattern() {
        ContainerNames n = new ContainerNames("team a/dev", ID);
        assertEquals("openshell-team-a-dev--sb-1", n.workload());
        assertEquals("openshell-team-a-dev--sb-1-supervisor", n.supervisor());
        assertEquals("openshell-team-a-dev--sb-1-supervisor-stage", n.staging());
        assertTrue(n.channelVolume().matches("openshell-channel-[0-9a-f]{32}"), n.channelVolume());
    }

    @Test
    void theVolumeHashSeparatesNamespaceFromId() {
        // Without the NUL between them "ab"+"c" and "a"+"bc" would share a volume.
        assertNotEquals(new ContainerNames("ab", new SandboxId("c")).channelVolume(),
                new ContainerNames("a", new SandboxId("bc")).channelVolume());
    }

    @Test
    void aLongNamespaceIsShortenedToTheBoundNeverTheId() {
        ContainerNames n = new ContainerNames("n".repeat(500), new SandboxId("x".repeat(SandboxId.MAX_LENGTH)));
        assertEquals(ContainerNames.MAX_NAME_CHARS, n.staging().length());
        assertTrue(n.workload().endsWith("--" + "x".repeat(SandboxId.MAX_LENGTH)));
        ContainerNames fits = new ContainerNames("n", ID);
        assertTrue(fits.staging().length() < ContainerNames.MAX_NAME_CHARS);
    }

    @Test
    void aNamespaceWithNothingUsableIsRefused() {
        assertThrows(DriverException.class, () -> new ContainerNames("--//", ID));
    }

    @Test
    void aNamespaceNeverHoldsTheSeparator() {
        assertEquals("a-b", new ContainerNames("a--b", ID).namespace());
    }
}
