package openshell.perf.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TimeWaitReuseTest {
    @Test
    void theHostsValueIsSetForTheSoakAndPutBackAfter(@TempDir Path dir) throws Exception {
        Path knob = Files.writeString(dir.resolve("tcp_tw_reuse"), "2\n");
        try (TimeWaitReuse reuse = TimeWaitReuse.enable(knob)) {
            assertEquals("1", Files.readString(knob).trim());
            assertEquals("1 (the namespace's 2, restored after the run)", reuse.describe());
        }
        assertEquals("2", Files.readString(knob).trim());
    }

    @Test
    void aSmokeRunLeavesTheHostsValueAndSaysWhichItWas(@TempDir Path dir) throws Exception {
        Path knob = Files.writeString(dir.resolve("tcp_tw_reuse"), "2\n");
        try (TimeWaitReuse reuse = TimeWaitReuse.asIs(knob)) {
            assertEquals("2 (the namespace's own)", reuse.describe());
        }
        assertEquals("2", Files.readString(knob).trim());
    }

    @Test
    void aHostAlreadyReusingIsLeftAlone(@TempDir Path dir) throws Exception {
        Path knob = Files.writeString(dir.resolve("tcp_tw_reuse"), "1\n");
        try (TimeWaitReuse reuse = TimeWaitReuse.enable(knob)) {
            assertEquals("1 (the namespace's own)", reuse.describe());
            Files.writeString(knob, "0\n"); // someone else's change meanwhile is not ours to undo
        }
        assertEquals("0", Files.readString(knob).trim());
    }
}
