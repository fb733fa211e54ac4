package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import openshell.isolation.BackendException;
import openshell.linux.KernelFeatures;
import openshell.linux.LaunchPlan;
import openshell.protocol.WorkloadConfinement;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The static sections as the runtime resolves them, before any workload process. */
class StaticConfinementTest {
    /** A process driver sandbox's map: ids 0-65535 inside. */
    private static final String SANDBOX_MAP = "         0 1000000000      65536\n";
    private static final int ABI = KernelFeatures.LANDLOCK_ABI_TARGET;

    @TempDir
    Path root;

    private StaticConfinement resolve(WorkloadConfinement c, int abi) {
        return StaticConfinement.resolve(c, 1000, 1000, root.resolve("workspace"), abi, root, SANDBOX_MAP, SANDBOX_MAP);
    }

    private static WorkloadConfinement process(String user, String group) {
        return new WorkloadConfinement(false, List.of(), List.of(), false, false, Optional.ofNullable(user),
                Optional.ofNullable(group));
    }

    private void accounts() throws Exception {
        Files.createDirectories(root.resolve("etc"));
        Files.writeString(root.resolve("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\ntoor:x:0:0::/:/bin/sh\n"
                + "games:x:5:60:games:/usr/games:/usr/sbin/nologin\n");
        Files.writeString(root.resolve("etc/group"), "root:x:0:\nwheel:x:0:\nstaff:x:50:\n");
        Files.createDirectories(root.resolve("workspace"));
    }

    @Test
    void numbersAreTakenAsWrittenAndTheLaunchDefaultFillsWhatThePolicyLeavesOut() throws Exception {
        accounts();
        StaticConfinement c = resolve(process("4321", "4322"), ABI);
        assertEquals(List.of(4321, 4322), List.of(c.uid(), c.gid()));
        StaticConfinement defaults = resolve(WorkloadConfinement.standard(), ABI);
        assertEquals(List.of(1000, 1000), List.of(defaults.uid(), defaults.gid()));
    }

    @Test
    void namesAreResolvedInTheWorkloadsOwnPasswdAndGroup() throws Exception {
        accounts();
        StaticConfinement games = resolve(process("games", null), ABI);
        assertEquals(List.of(5, 60), List.of(games.uid(), games.gid()), "an absent group: the user's primary one");
        StaticConfinement staff = resolve(process("games", "staff"), ABI);
        assertEquals(List.of(5, 50), List.of(staff.uid(), staff.gid()));
        BackendException unknown = assertThrows(BackendException.class, () -> resolve(process("nosuchuser", null), ABI));
        assertEquals(BackendException.Kind.INVALID, unknown.kind());
        assertTrue(unknown.getMessage().contains("process.run_as_user names 'nosuchuser', which is not in the workload's "),
                unknown.getMessage());
        BackendException group = assertThrows(BackendException.class, () -> resolve(process("games", "nogroup"), ABI));
        assertTrue(group.getMessage().contains("process.run_as_group names 'nogroup'"), group.getMessage());
    }

    @Test
    void nothingEverRunsAsRootOrAsAnIdTheSandboxDoesNotMap() throws Exception {
        accounts();
        BackendException toor = assertThrows(BackendException.class, () -> resolve(process("toor", "staff"), ABI));
        assertTrue(toor.getMessage().contains("resolves to uid 0"), toor.getMessage());
        BackendException rootGroup = assertThrows(BackendException.class, () -> resolve(process("4321", "wheel"), ABI));
        assertTrue(rootGroup.getMessage().contains("resolves to gid 0"), rootGroup.getMessage());
        BackendException unmapped = assertThrows(BackendException.class, () -> resolve(process("70000", null), ABI));
        assertTrue(unmapped.getMessage().contains("process.run_as_user asks for uid 70000, which is not mapped")
                && unmapped.getMessage().contains("[0-65535]"), unmapped.getMessage());
    }

    @Test
    void thePolicysListsAreExactlyWhatIsGrantedBesidesTheBaseline() throws Exception {
        accounts();
        Path ro = Files.createDirectories(root.resolve("ro"));
        Path rw = Files.createDirectories(root.resolve("rw"));
        Path missing = root.resolve("missing");
        WorkloadConfinement declared = new WorkloadConfinement(true, List.of(ro.toString(), missing.toString()),
                List.of(rw.toString()), false, false, Optional.empty(), Optional.empty());
        StaticConfinement c = resolve(declared, ABI);
        assertTrue(c.readOnly().contains(ro.toString()) && c.readOnly().contains("/proc"), c.readOnly().toString());
        assertFalse(c.readOnly().contains("/usr"), "only what the policy lists: " + c.readOnly());
        assertTrue(c.readWrite().contains(rw.toString()) && c.readWrite().contains("/dev/null"), c.readWrite().toString());
        assertFalse(c.readWrite().contains(root.resolve("workspace").toString()), "include_workdir: false");
        assertEquals(List.of(missing.toString()), c.skipped());
        assertTrue(c.describe().contains("not present, nothing granted: [" + missing + "]"), c.describe());

        WorkloadConfinement workdir = new WorkloadConfinement(true, List.of(ro.toString()), List.of(), true, false,
                Optional.empty(), Optional.empty());
        assertTrue(resolve(workdir, ABI).readWrite().contains(root.resolve("workspace").toString()), "include_workdir: true");
        StaticConfinement standard = resolve(WorkloadConfinement.standard(), ABI);
        assertTrue(standard.readOnly().contains("/usr") && standard.readWrite().contains(root.resolve("workspace").toString()),
                "without a section: the standard view");
    }

    @Test
    void aHardRequirementTheKernelCannotMeetIsRefusedAndBestEffortIsLoud() throws Exception {
        accounts();
        WorkloadConfinement hard = WorkloadConfinement.standard();
        BackendException refused = assertThrows(BackendException.class, () -> resolve(hard, 0));
        assertTrue(refused.getMessage().contains("landlock.compatibility is hard_requirement, but this kernel's Landlock ABI is 0"),
                refused.getMessage());
        assertThrows(BackendException.class, () -> resolve(hard, 5), "ABI 5 has no scopes: it cannot enforce every right either");
        StaticConfinement full = resolve(hard, ABI);
        assertTrue(full.complete() && full.mode() == LaunchPlan.Mode.REQUIRED, full.describe());

        WorkloadConfinement best = new WorkloadConfinement(false, List.of(), List.of(), false, true, Optional.empty(),
                Optional.empty());
        StaticConfinement none = resolve(best, 0);
        assertEquals(LaunchPlan.Mode.BEST_EFFORT, none.mode());
        assertFalse(none.complete());
        assertTrue(none.describe().startsWith("LANDLOCK NOT FULLY ENFORCED (landlock.compatibility best_effort): kernel Landlock ABI 0")
                && none.describe().contains("filesystem_policy is not enforced"), none.describe());
        StaticConfinement partial = resolve(best, 3);
        assertTrue(partial.describe().contains("file-system rights 0x"), partial.describe());
        assertTrue(resolve(best, ABI).complete());
    }
}
