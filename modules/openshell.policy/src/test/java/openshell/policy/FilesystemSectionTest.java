package openshell.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/** A filesystem section must say something: an empty one would read as no section (the standard view). */
class FilesystemSectionTest {
    @Test
    void aSectionThatGrantsNothingIsRefusedWithWhatToDoInstead() {
        PolicyException e = assertThrows(PolicyException.class,
                () -> Policy.parse("version: 1\nfilesystem_policy:\n  read_only: []\n"));
        assertEquals(1, e.problems().size(), e.problems().toString());
        assertEquals("filesystem_policy", e.problems().getFirst().path());
        assertTrue(e.problems().getFirst().message().contains("grants nothing"), e.problems().toString());
    }

    @Test
    void aWorkdirAloneIsASection() {
        Policy p = Policy.parse("version: 1\nfilesystem_policy:\n  include_workdir: true\n");
        assertEquals(new FilesystemPolicy(List.of(), List.of(), true), p.filesystem());
    }
}
