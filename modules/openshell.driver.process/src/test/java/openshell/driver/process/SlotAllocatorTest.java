package openshell.driver.process;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;

import openshell.isolation.SandboxId;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Host-wide slots, owners, and the per-state slots an upgrade leaves behind. */
class SlotAllocatorTest {
    @TempDir
    Path dir;

    @Test
    void aSlotTakenBeforeTheUpgradeStaysTakenUntilItsSandboxIsDeleted() throws Exception {
        Path state = Files.createDirectories(dir.resolve("state/drivers/process"));
        Path legacy = Files.createDirectories(state.resolve(SlotAllocator.LEGACY_DIRECTORY));
        Files.writeString(legacy.resolve("0"), "sb-old");
        SlotAllocator slots = new SlotAllocator(dir.resolve("host-slots"), state);

        assertEquals(1, slots.take(new SandboxId("sb-new")), "slot 0 still belongs to the sandbox from before");
        // Another sandbox's release never frees it; its own does.
        slots.release(0, new SandboxId("sb-new"));
        assertTrue(Files.exists(legacy.resolve("0")));
        slots.release(0, new SandboxId("sb-old"));
        assertFalse(Files.exists(legacy.resolve("0")));
        assertEquals(0, slots.take(new SandboxId("sb-next")));
    }

    @Test
    void twoStateRootsOnOneHostNeverShareASlotNorFreeEachOthers() {
        Path host = dir.resolve("host-slots");
        SlotAllocator first = new SlotAllocator(host, dir.resolve("a"));
        SlotAllocator second = new SlotAllocator(host, dir.resolve("b"));
        assertEquals(0, first.take(new SandboxId("sb-1")));
        assertEquals(1, second.take(new SandboxId("sb-1")));
        second.release(0, new SandboxId("sb-1"));
        assertTrue(Files.exists(host.resolve("0")), "the other gateway's slot stays");
        first.release(0, new SandboxId("sb-1"));
        assertFalse(Files.exists(host.resolve("0")));
    }
}
