package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import openshell.isolation.BackendException;
import org.junit.jupiter.api.Test;

/** What a runtime without capabilities (a container's user) refuses, and what it still does. */
class RuntimePrivilegeTest {
    private static final long ALL = (1L << 41) - 1;

    @Test
    void withoutCapabilitiesAnotherWorkloadIdentityIsRefusedNamingBoth() {
        RuntimePrivilege container = new RuntimePrivilege(0, 10001, 10001);
        assertFalse(container.canMount());
        assertFalse(container.canChangeIdentity());
        container.requireIdentity(10001, 10001);
        BackendException e = assertThrows(BackendException.class, () -> container.requireIdentity(10002, 10001));
        assertEquals(BackendException.Kind.INVALID, e.kind());
        assertTrue(e.getMessage().contains("10002:10001") && e.getMessage().contains("10001:10001"), e.getMessage());
        assertThrows(BackendException.class, () -> container.requireIdentity(10001, 0));
    }

    @Test
    void theNamespaceRootGivesAnyIdentityAndMounts() {
        RuntimePrivilege root = new RuntimePrivilege(ALL, 0, 0);
        assertTrue(root.canMount());
        root.requireIdentity(1000, 1000);
    }

    @Test
    void thisProcessIsReadFromProc() throws Exception {
        RuntimePrivilege self = RuntimePrivilege.current();
        assertEquals(Integer.parseInt(Files.readAllLines(Path.of("/proc/self/status")).stream()
                .filter(l -> l.startsWith("Uid:")).findFirst().orElseThrow().split("\\s+")[1]), self.uid());
    }

    @Test
    void aResolverFileNamingAnythingButTheRelayIsRefused() throws Exception {
        Path dir = Files.createTempDirectory("resolv");
        try {
            Path good = Files.writeString(dir.resolve("good"), "nameserver 127.0.0.53\nsearch .\n");
            assertEquals(java.util.List.of("127.0.0.53"), ResolverView.verify(good));
            Path other = Files.writeString(dir.resolve("other"), "nameserver 127.0.0.53\nnameserver 10.0.0.2\n");
            assertThrows(openshell.linux.LinuxException.class, () -> ResolverView.verify(other));
            assertThrows(openshell.linux.LinuxException.class, () -> ResolverView.verify(dir.resolve("missing")));
        } finally {
            for (String f : new String[] {"good", "other"}) {
                Files.deleteIfExists(dir.resolve(f));
            }
            Files.delete(dir);
        }
    }
}
