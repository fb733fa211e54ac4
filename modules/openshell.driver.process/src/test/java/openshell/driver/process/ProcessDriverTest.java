package openshell.driver.process;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import openshell.driver.DialDirection;
import openshell.driver.DriverEnvironment;
import openshell.driver.DriverException;
import openshell.driver.DriverStatus;
import openshell.driver.LaunchMaterial;
import openshell.driver.LaunchPlan;
import openshell.driver.Provisioned;
import openshell.isolation.AgentSpec;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.WorkloadIdentity;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The driver's provisioning and cleanup on the real kernel. The two launchers are shell-script
 * test doubles that record their arguments, a digest of the bundle they read from stdin, and what
 * they see of their namespaces; the driver code around them is the real thing.
 */
class ProcessDriverTest {
    private static final byte[] RUNTIME_BUNDLE = "runtime-secret-bundle".getBytes(StandardCharsets.UTF_8);
    private static final byte[] SUPERVISOR_BUNDLE = "supervisor-secret-bundle".getBytes(StandardCharsets.UTF_8);

    @TempDir
    Path tmp;

    private Path runRoot;
    private Path stateRoot;
    private Path workspaceRoot;
    private Path slots;
    private ProcessDriver driver;
    private final List<Runnable> cleanups = new java.util.ArrayList<>();

    @BeforeEach
    void setUp() throws IOException {
        // The mapped root of a sandbox must be able to reach the runtime launcher and the run root.
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        Path bin = Files.createDirectory(tmp.resolve("bin"));
        Files.setPosixFilePermissions(bin, PosixFilePermissions.fromString("rwxr-xr-x"));
        String record = "echo \"args: $*\"; echo \"bundle: $(sha256sum | cut -d' ' -f1)\"; echo \"uid: $(id -u)\"; "
                + "echo \"pidns: $(readlink /proc/self/ns/pid)\"; exec sleep 1000\n";
        Path supervisor = Files.writeString(bin.resolve("supervisor"), "#!/bin/sh\n" + record);
        Path runtime = Files.writeString(bin.resolve("runtime"), "#!/bin/sh\n" + record);
        for (Path p : List.of(supervisor, runtime)) {
            Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
        }
        runRoot = Files.createDirectory(tmp.resolve("run"));
        Files.setPosixFilePermissions(runRoot, PosixFilePermissions.fromString("rwx--x--x"));
        stateRoot = Files.createDirectory(tmp.resolve("state"));
        workspaceRoot = tmp.resolve("workspaces");
        slots = tmp.resolve("id-slots");
        driver = new ProcessDriver(new DriverEnvironment(stateRoot, Map.of("supervisor.launcher", supervisor.toString(),
                "runtime.launcher", runtime.toString(), "run.root", runRoot.toString(),
                "workspace.root", workspaceRoot.toString(), "id.slots", slots.toString())));
    }

    @AfterEach
    void tearDown() {
        cleanups.forEach(Runnable::run);
    }

    private static LaunchPlan plan(String id, Map<String, String> options) {
        return new LaunchPlan(new SandboxContext(new SandboxId(id), SandboxSessionId.fresh(),
                PolicySnapshot.of(1, "version: 1\n".getBytes()), AgentSpec.of(List.of("/bin/true")),
                WorkloadIdentity.of(1000, 1000)), 1, LaunchMaterial.of(SUPERVISOR_BUNDLE, RUNTIME_BUNDLE), options);
    }

    private Provisioned create(String id) {
        Provisioned p = driver.create(plan(id, Map.of()));
        cleanups.add(() -> driver.delete(new SandboxId(id), p.state()));
        return p;
    }

    private String awaitLog(String id, String file, String needle) throws Exception {
        Path log = stateRoot.resolve("process/sandboxes/" + id + "/" + file);
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (System.nanoTime() < deadline) {
            String text = Files.exists(log) ? Files.readString(log) : "";
            if (text.contains(needle)) {
                return text;
            }
            Thread.sleep(20);
        }
        throw new AssertionError(file + " never contained '" + needle + "': "
                + (Files.exists(log) ? Files.readString(log) : "(no log)"));
    }

    private static String sha256(byte[] b) throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
    }

    @Test
    void createStopStartDeleteLeavesNothingBehind() throws Exception {
        SandboxId id = new SandboxId("alpha");
        Provisioned p = driver.create(plan("alpha", Map.of()));
        try {
            assertEquals(ProcessTopology.BACKEND, p.descriptor().backend());
            assertEquals(DialDirection.RUNTIME_INITIATED, p.direction());
            String descriptor = new String(p.descriptor().payload(), StandardCharsets.ISO_8859_1);
            assertTrue(descriptor.contains("channel=" + runRoot.resolve("alpha/supervisor.sock")), descriptor);
            assertEquals(DriverStatus.Phase.RUNNING, driver.status(id, p.state()).phase());

            String runtimeLog = awaitLog("alpha", "runtime.log", "pidns:");
            assertTrue(runtimeLog.contains("bundle: " + sha256(RUNTIME_BUNDLE)), runtimeLog);
            assertTrue(runtimeLog.contains("uid: 0"), "the runtime is the namespace's root: " + runtimeLog);
            assertTrue(runtimeLog.contains("--channel " + runRoot.resolve("alpha/supervisor.sock")), runtimeLog);
            Path workspace = workspaceRoot.resolve("alpha");
            assertTrue(runtimeLog.contains("--workspace " + workspace), "a fresh workspace the driver owns: " + runtimeLog);
            assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(workspace)));
            assertEquals((int) (IdRange.slot(0).first() + 1000), Files.getAttribute(workspace, "unix:uid"),
                    "owned by the workload's host uid");
            String supervisorLog = awaitLog("alpha", "supervisor.log", "pidns:");
            assertTrue(supervisorLog.contains("bundle: " + sha256(SUPERVISOR_BUNDLE)), supervisorLog);
            assertTrue(supervisorLog.contains("--runtime-uid " + IdRange.slot(0).first()), supervisorLog);
            // --runtime-pid names the process the runtime runs under: the supervisor admits only its tree.
            java.util.regex.Matcher runtimePid = java.util.regex.Pattern.compile("--runtime-pid (\\d+)").matcher(supervisorLog);
            assertTrue(runtimePid.find(), supervisorLog);
            assertTrue(ProcessHandle.of(Long.parseLong(runtimePid.group(1))).orElseThrow().descendants()
                    .anyMatch(h -> h.info().commandLine().orElse("").contains("sleep 1000")),
                    "the runtime (its launcher's sleep) runs under --runtime-pid");
            assertNotEquals(line(runtimeLog, "pidns:"), line(supervisorLog, "pidns:"),
                    "the supervisor stays on the host; the runtime is in the sandbox's pid namespace");

            Path run = runRoot.resolve("alpha");
            assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(run)));
            assertEquals((int) IdRange.slot(0).first(), Files.getAttribute(run, "unix:uid"));
            assertFalse(containsBytes(tmp, RUNTIME_BUNDLE), "a launch bundle was written to disk");
            assertFalse(containsBytes(tmp, SUPERVISOR_BUNDLE), "a launch bundle was written to disk");

            driver.stop(id, p.state());
            assertEquals(DriverStatus.Phase.STOPPED, driver.status(id, p.state()).phase());
            ProcessTopology t = ProcessTopology.fromState(p.state());
            assertFalse(ProcessHandle.of(t.holderPid()).map(ProcessHandle::isAlive).orElse(false));
            assertFalse(ProcessHandle.of(t.supervisorPid()).map(ProcessHandle::isAlive).orElse(false));

            Provisioned again = driver.start(id, p.state(), plan("alpha", Map.of()));
            assertEquals(DriverStatus.Phase.RUNNING, driver.status(id, again.state()).phase());
            assertEquals(p.descriptor(), again.descriptor(), "a restart keeps the same channel and id range");
            assertEquals(DriverException.Kind.INVALID, assertThrows(DriverException.class,
                    () -> driver.start(id, again.state(), plan("alpha", Map.of()))).kind());
            p = again;
        } finally {
            driver.delete(id, p.state());
        }
        assertEquals(DriverStatus.Phase.GONE, driver.status(id, p.state()).phase());
        assertFalse(Files.exists(runRoot.resolve("alpha")));
        assertFalse(Files.exists(stateRoot.resolve("process/sandboxes/alpha")));
        assertFalse(Files.exists(workspaceRoot.resolve("alpha")), "the driver's fresh workspace goes with the sandbox");
        assertFalse(Files.exists(slots.resolve("0")), "the id range is free again");
        driver.delete(id, p.state());
    }

    @Test
    void twoSandboxesGetDistinctIdRangesAndNamespaces() throws Exception {
        Provisioned a = create("one");
        Provisioned b = create("two");
        ProcessTopology ta = ProcessTopology.fromState(a.state());
        ProcessTopology tb = ProcessTopology.fromState(b.state());
        assertNotEquals(ta.slot(), tb.slot());
        assertNotEquals(ta.runtimeHostUid(), tb.runtimeHostUid());
        assertNotEquals(line(awaitLog("one", "runtime.log", "pidns:"), "pidns:"),
                line(awaitLog("two", "runtime.log", "pidns:"), "pidns:"));
        driver.delete(new SandboxId("one"), a.state());
        assertEquals(DriverStatus.Phase.RUNNING, driver.status(new SandboxId("two"), b.state()).phase());
    }

    @Test
    void badOptionsAreRefusedAndAllocateNothing() throws IOException {
        assertEquals(DriverException.Kind.INVALID, assertThrows(DriverException.class,
                () -> driver.create(plan("x", Map.of("network", "host")))).kind());
        assertEquals(DriverException.Kind.INVALID, assertThrows(DriverException.class,
                () -> driver.create(plan("x", Map.of("workspace", "relative/dir")))).kind());
        assertFalse(Files.exists(slots.resolve("0")));
    }

    @Test
    void aRunRootTooLongForTheSocketIsRefusedByNameBeforeAnythingIsMade() throws IOException {
        // run.root + "/" + id + "/supervisor.sock": one byte over the bound with this id, exactly at it with one shorter.
        String base = tmp.toString() + "/r";
        int idLength = ProcessDriver.MAX_SOCKET_PATH_BYTES + 1 - base.length() - ("/" + ProcessDriver.SOCKET_NAME).length() - 1;
        assertTrue(idLength > 1 && idLength <= SandboxId.MAX_LENGTH, "the temporary directory leaves room: " + tmp);
        Path longRoot = Files.createDirectories(Path.of(base));
        ProcessDriver driver = new ProcessDriver(new DriverEnvironment(stateRoot, Map.of(
                "supervisor.launcher", tmp.resolve("bin/supervisor").toString(),
                "runtime.launcher", tmp.resolve("bin/runtime").toString(), "run.root", longRoot.toString(),
                "id.slots", slots.toString())));
        String over = "o".repeat(idLength);
        DriverException e = assertThrows(DriverException.class, () -> driver.create(plan(over, Map.of())));
        assertEquals(DriverException.Kind.INVALID, e.kind());
        assertTrue(e.getMessage().contains("run.root " + longRoot) && e.getMessage().contains(
                (ProcessDriver.MAX_SOCKET_PATH_BYTES + 1) + " bytes"), e.getMessage());
        assertFalse(Files.exists(longRoot.resolve(over)), "no run directory");
        assertFalse(Files.exists(stateRoot.resolve("process/sandboxes/" + over)), "no state");
        // One byte shorter, at the bound: the sandbox is made, and its socket path is exactly that long.
        String at = "o".repeat(idLength - 1);
        Provisioned p = driver.create(plan(at, Map.of()));
        String descriptor = new String(p.descriptor().payload(), StandardCharsets.ISO_8859_1);
        assertTrue(descriptor.contains("channel=" + longRoot.resolve(at).resolve(ProcessDriver.SOCKET_NAME)), descriptor);
        assertEquals(ProcessDriver.MAX_SOCKET_PATH_BYTES,
                longRoot.resolve(at).resolve(ProcessDriver.SOCKET_NAME).toString().length());
        driver.delete(new SandboxId(at), p.state());
    }

    @Test
    void twoGatewaysOnOneHostNeverShareAnIdRangeNorFreeEachOthers() throws IOException {
        // A second gateway: its own state root (another OPENSHELL_HOME), the same host, the same sandbox name.
        Path otherState = Files.createDirectory(tmp.resolve("other-state"));
        Provisioned mine = create("twin");
        // The run directory is per sandbox name on a shared run root: the second one needs its own.
        Path otherRun = Files.createDirectory(tmp.resolve("other-run"));
        Files.setPosixFilePermissions(otherRun, PosixFilePermissions.fromString("rwx--x--x"));
        ProcessDriver otherOnItsRun = new ProcessDriver(new DriverEnvironment(otherState, Map.of(
                "supervisor.launcher", tmp.resolve("bin/supervisor").toString(),
                "runtime.launcher", tmp.resolve("bin/runtime").toString(), "run.root", otherRun.toString(),
                "workspace.root", tmp.resolve("other-workspaces").toString(), "id.slots", slots.toString())));
        Provisioned theirs = otherOnItsRun.create(plan("twin", Map.of()));
        try {
            int mySlot = ProcessTopology.fromState(mine.state()).slot();
            int theirSlot = ProcessTopology.fromState(theirs.state()).slot();
            assertTrue(mySlot != theirSlot, "one host, two gateways: slots " + mySlot + " and " + theirSlot);
            // The other gateway deleting its "twin" frees its slot only.
            otherOnItsRun.delete(new SandboxId("twin"), theirs.state());
            assertTrue(Files.exists(slots.resolve(Integer.toString(mySlot))), "my slot is still mine");
            assertFalse(Files.exists(slots.resolve(Integer.toString(theirSlot))), "theirs is free");
            // Releasing my slot in the other gateway's name (same sandbox name) changes nothing.
            new SlotAllocator(slots, otherState.resolve(ProcessDriver.NAME)).release(mySlot, new SandboxId("twin"));
            assertTrue(Files.exists(slots.resolve(Integer.toString(mySlot))), "not freed by another gateway");
        } finally {
            otherOnItsRun.delete(new SandboxId("twin"), theirs.state());
        }
    }

    @Test
    void aFailedCreateUndoesWhatItDid() throws IOException {
        Path blocked = Files.writeString(tmp.resolve("not-a-directory"), "");
        ProcessDriver broken = new ProcessDriver(new DriverEnvironment(stateRoot, Map.of(
                "supervisor.launcher", tmp.resolve("bin/supervisor").toString(),
                "runtime.launcher", tmp.resolve("bin/runtime").toString(), "run.root", blocked.toString(),
                "id.slots", slots.toString())));
        assertEquals(DriverException.Kind.FAILED, assertThrows(DriverException.class,
                () -> broken.create(plan("x", Map.of()))).kind());
        try (Stream<Path> taken = Files.list(slots)) {
            assertEquals(0, taken.count(), "the slot was released");
        }
        assertFalse(Files.exists(stateRoot.resolve("process/sandboxes/x")));
    }

    @Test
    void missingLaunchersAreReportedByNameAndCleanupStillWorks() throws IOException {
        Provisioned p = create("kept");
        ProcessDriver unconfigured = new ProcessDriver(new DriverEnvironment(stateRoot,
                Map.of("runtime.launcher", "/nonexistent", "run.root", runRoot.toString(), "id.slots", slots.toString())));
        DriverException e = assertThrows(DriverException.class, () -> unconfigured.create(plan("other", Map.of())));
        assertEquals(DriverException.Kind.UNAVAILABLE, e.kind());
        assertTrue(e.getMessage().contains("supervisor.launcher"), e.getMessage());
        assertFalse(Files.exists(stateRoot.resolve("process/sandboxes/other")));
        // The trusted cleanup path needs no launcher: a gateway without them can still delete.
        unconfigured.delete(new SandboxId("kept"), p.state());
        assertEquals(DriverStatus.Phase.GONE, unconfigured.status(new SandboxId("kept"), p.state()).phase());
    }

    private static String line(String text, String prefix) {
        return text.lines().filter(l -> l.startsWith(prefix)).findFirst().orElseThrow();
    }

    private static boolean containsBytes(Path root, byte[] needle) throws IOException {
        String n = new String(needle, StandardCharsets.ISO_8859_1);
        try (Stream<Path> files = Files.walk(root)) {
            return files.filter(Files::isRegularFile).anyMatch(f -> {
                try {
                    return new String(Files.readAllBytes(f), StandardCharsets.ISO_8859_1).contains(n);
                } catch (IOException e) {
                    return false;
                }
            });
        }
    }
}
