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
    private final java.util.LinkedList<Runnable> cleanups = new java.util.LinkedList<>();

    @BeforeEach
    void setUp() throws IOException {
        // The mapped root of a sandbox must be able to reach the runtime launcher and the run root.
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        Path bin = Files.createDirectory(tmp.resolve("bin"));
        Files.setPosixFilePermissions(bin, PosixFilePermissions.fromString("rwxr-xr-x"));
        String record = "echo \"args: $*\"; echo \"nice: $(nice)\"; "
                + "case \"$*\" in *--late-arguments*) echo '" + SparePool.WAITING + "';; esac; echo \"bundle: $(sha256sum | cut -d' ' -f1)\"; echo \"uid: $(id -u)\"; "
                + "echo \"pidns: $(readlink /proc/self/ns/pid)\"; echo '{\"ready\":true,\"serving\":true}'; exec sleep 1000\n";
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
        driver = withSpares(0);
    }

    private ProcessDriver withSpares(int spares) {
        ProcessDriver d = new ProcessDriver(new DriverEnvironment(stateRoot, Map.of(
                "supervisor.launcher", tmp.resolve("bin/supervisor").toString(),
                "runtime.launcher", tmp.resolve("bin/runtime").toString(), "run.root", runRoot.toString(),
                "workspace.root", workspaceRoot.toString(), "id.slots", slots.toString(),
                ProcessDriver.SPARES_SETTING, Integer.toString(spares))));
        cleanups.add(d::close);
        return d;
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
        return awaitFile(stateRoot.resolve("process/sandboxes/" + id + "/" + file), needle);
    }

    private static String awaitFile(Path log, String needle) throws Exception {
        String file = log.getFileName().toString();
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
            assertTrue(runtimeLog.contains("nice: 0") && !runtimeLog.contains(SparePool.WAITING), "a cold launch: " + runtimeLog);
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
            // Ended: gone, or a zombie the host's init has not reaped yet (it runs nothing).
            assertTrue(NamespaceHolder.ended(t.holderPid()), "the holder ended");
            assertTrue(NamespaceHolder.ended(t.supervisorPid()), "the supervisor ended");

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

    /**
     * Seen after a killed test run: a gateway whose temporary state was removed left its sandbox's
     * processes, run directory and id slot, and nobody could ever remove them. The next driver to
     * start on the host removes them; a live gateway's slot is not touched.
     */
    @Test
    void aSandboxWhoseGatewayStateIsGoneIsRemovedWhenTheNextDriverStarts() throws Exception {
        Path gone = tmp.resolve("removed-state/process");
        Files.createDirectories(slots);
        Files.writeString(slots.resolve("3"), gone + "\nstale\n");
        Files.writeString(slots.resolve("4"), stateRoot.resolve("process") + "\nlive\n");
        Files.createDirectories(runRoot.resolve("stale"));
        Files.writeString(runRoot.resolve("stale/supervisor.sock"), "");
        NamespaceHolder holder = NamespaceHolder.create(IdRange.slot(3));
        cleanups.addFirst(holder::kill);
        assertTrue(holder.alive());

        withSpares(0);

        assertTrue(NamespaceHolder.ended(holder.pid()), "the abandoned sandbox's processes are ended");
        assertFalse(Files.exists(slots.resolve("3")), "its id range is free again");
        assertFalse(Files.exists(runRoot.resolve("stale")), "its run directory is removed");
        assertTrue(Files.exists(slots.resolve("4")), "a slot whose gateway state exists is not touched");
    }

    @Test
    void aLaunchTheRuntimeRefusesFailsTheCreateWithItsReasonAndLeavesNothing() throws Exception {
        // The runtime takes its bundle, then exits refusing (as for a Landlock hard requirement it cannot meet).
        Files.writeString(tmp.resolve("bin/runtime"), "#!/bin/sh\ncat >/dev/null; echo '" + ProcessDriver.RUNTIME_REFUSAL
                + "landlock.compatibility is hard_requirement, but this kernel cannot' >&2; exit 70\n");
        DriverException e = assertThrows(DriverException.class, () -> driver.create(plan("refused", Map.of())));
        assertEquals(DriverException.Kind.INVALID, e.kind());
        assertEquals(ProcessDriver.REFUSED + "landlock.compatibility is hard_requirement, but this kernel cannot", e.getMessage());
        assertFalse(Files.exists(runRoot.resolve("refused")), "no run directory is left");
        assertFalse(Files.exists(stateRoot.resolve("process/sandboxes/refused")), "no state is left");
        assertFalse(Files.exists(workspaceRoot.resolve("refused")), "no workspace is left");
        try (var held = Files.list(slots)) {
            assertEquals(List.of(), held.toList(), "no id range is held");
        }
    }

    @Test
    void aWorkloadIdOutsideTheSandboxesMappedRangeIsRefusedBeforeAnythingIsMade() {
        for (WorkloadIdentity id : List.of(WorkloadIdentity.of((int) IdRange.SIZE, 1000), WorkloadIdentity.of(1000, 70_000))) {
            LaunchPlan plan = new LaunchPlan(new SandboxContext(new SandboxId("unmapped"), SandboxSessionId.fresh(),
                    PolicySnapshot.of(1, "version: 1\n".getBytes()), AgentSpec.of(List.of("/bin/true")), id), 1,
                    LaunchMaterial.of(SUPERVISOR_BUNDLE, RUNTIME_BUNDLE), Map.of());
            DriverException e = assertThrows(DriverException.class, () -> driver.create(plan));
            assertEquals(DriverException.Kind.INVALID, e.kind());
            assertTrue(e.getMessage().contains("run_as_user / run_as_group") && e.getMessage().contains("0-65535"), e.getMessage());
            assertFalse(Files.exists(slots) && slots.toFile().list().length > 0, "no id range was taken");
        }
    }

    @Test
    void aRunningSandboxWhoseRuntimeRanBestEffortSaysSoInItsStatus() throws Exception {
        Files.writeString(tmp.resolve("bin/runtime"), "#!/bin/sh\ncat >/dev/null; echo '" + ProcessDriver.CONFINEMENT_WARNING
                + "LANDLOCK NOT FULLY ENFORCED (landlock.compatibility best_effort)' >&2; echo '{\"serving\":true}';"
                + " exec sleep 1000\n");
        Provisioned p = create("degraded");
        DriverStatus status = driver.status(new SandboxId("degraded"), p.state());
        assertEquals(DriverStatus.Phase.RUNNING, status.phase());
        assertTrue(status.detail().endsWith("; LANDLOCK NOT FULLY ENFORCED (landlock.compatibility best_effort)"), status.detail());
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

    /** The one idle spare's directory, once its pool has started it. */
    private Path awaitIdleSpare(ProcessDriver d, int started) throws Exception {
        SparePool pool = d.spares().orElseThrow();
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (pool.idle() < 1 || pool.started() < started) {
            assertTrue(System.nanoTime() < deadline, "no warm spare started within 30 s");
            Thread.sleep(20);
        }
        try (Stream<Path> dirs = Files.list(stateRoot.resolve("process").resolve(ProcessDriver.SPARES))) {
            List<Path> spares = dirs.toList();
            assertEquals(1, spares.size(), spares.toString());
            return spares.getFirst();
        }
    }

    private static ProcessTopology spareTopology(Path spare) throws IOException {
        return ProcessTopology.fromState(Files.readAllBytes(spare.resolve(ProcessDriver.SPARE_TOPOLOGY)));
    }

    private static byte[] concat(byte[] a, byte[] b) {
        byte[] out = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    /** Gone, or a zombie not yet reaped by whoever adopted it: it runs nothing. */
    private static boolean dead(long pid) {
        return NamespaceHolder.ended(pid);
    }

    private void assertNothingOfSpare(String name, ProcessTopology t) throws IOException {
        assertTrue(dead(t.supervisorPid()) && dead(t.holderPid()), "the spare's processes are gone");
        assertFalse(Files.exists(runRoot.resolve(name)), "its run directory is gone");
        assertFalse(Files.exists(stateRoot.resolve("process").resolve(ProcessDriver.SPARES).resolve(name)), "its logs are gone");
        assertFalse(Files.exists(slots.resolve(Integer.toString(t.slot()))) && Files.readString(
                slots.resolve(Integer.toString(t.slot()))).contains("\n" + name + "\n"), "its id range is free");
        t.cgroup().flatMap(SandboxCgroup::named).ifPresent(c -> assertFalse(Files.exists(c.path()), "its cgroup is gone"));
    }

    @Test
    void aCreateTakesAWarmSpareWhichThenBecomesTheSandboxAndTheNextSpareFollows() throws Exception {
        ProcessDriver warm = withSpares(1);
        Path spareDir = awaitIdleSpare(warm, 1);
        String spare = spareDir.getFileName().toString();
        assertTrue(spare.startsWith(ProcessDriver.SPARE_PREFIX), spare);
        ProcessTopology before = spareTopology(spareDir);
        String spareRuntime = awaitFile(spareDir.resolve("runtime.log"), SparePool.WAITING);
        assertTrue(spareRuntime.contains("args: --channel " + runRoot.resolve(spare).resolve(ProcessDriver.SOCKET_NAME)
                + " --bundle-stdin --late-arguments"), "the spare knows no sandbox yet: " + spareRuntime);
        assertFalse(spareRuntime.contains("bundle:"), "it is still reading its standard input: " + spareRuntime);

        assertTrue(spareRuntime.contains("nice: " + ProcessDriver.SPARE_NICENESS), "a spare starts niced: " + spareRuntime);
        // Once both wait for their sandbox, the keeper puts them back to niceness 0.
        List<ProcessHandle> spareProcesses = new java.util.ArrayList<>(List.of(ProcessHandle.of(before.supervisorPid()).orElseThrow()));
        spareProcesses.addAll(ProcessHandle.of(before.holderPid()).orElseThrow().descendants().toList());
        long settled = System.nanoTime() + SparePool.SETTLE_WAIT.toNanos();
        while (!ProcessDriver.nicedThreads(spareProcesses).isEmpty()) {
            assertTrue(System.nanoTime() < settled, "an idle spare stayed niced: " + ProcessDriver.nicedThreads(spareProcesses));
            Thread.sleep(20);
        }

        SandboxId id = new SandboxId("warm");
        Provisioned p = warm.create(plan("warm", Map.of()));
        cleanups.addFirst(() -> warm.delete(id, p.state()));
        ProcessTopology t = ProcessTopology.fromState(p.state());
        assertEquals(before.holderPid(), t.holderPid(), "the spare's namespaces became the sandbox's");
        assertEquals(before.supervisorPid(), t.supervisorPid());
        assertEquals(before.cgroup(), t.cgroup(), "its cgroup keeps the spare's name, recorded in the state");
        assertEquals(DriverStatus.Phase.RUNNING, warm.status(id, p.state()).phase());
        assertFalse(Files.exists(spareDir), "the spare's logs are now the sandbox's");
        Path workspace = workspaceRoot.resolve("warm");
        String runtimeLog = awaitLog("warm", "runtime.log", "pidns:");
        byte[] runtimeLate = ProcessDriver.late(List.of("--sandbox", "warm", "--generation", "1", "--workspace",
                workspace.toString()));
        assertTrue(runtimeLog.contains("bundle: " + sha256(concat(runtimeLate, RUNTIME_BUNDLE))),
                "the late arguments, then the bundle: " + runtimeLog);
        assertEquals((int) (IdRange.slot(t.slot()).first() + 1000), Files.getAttribute(workspace, "unix:uid"),
                "the fresh workspace is the workload's in the spare's id range");
        String supervisorLog = awaitLog("warm", "supervisor.log", "pidns:");
        assertTrue(supervisorLog.contains("bundle: " + sha256(concat(ProcessDriver.late(List.of("--sandbox", "warm",
                "--generation", "1")), SUPERVISOR_BUNDLE))), supervisorLog);
        assertTrue(supervisorLog.contains("--runtime-uid " + IdRange.slot(t.slot()).first()), supervisorLog);
        List<ProcessHandle> sandboxProcesses = new java.util.ArrayList<>(List.of(ProcessHandle.of(t.supervisorPid()).orElseThrow()));
        sandboxProcesses.addAll(ProcessHandle.of(t.holderPid()).orElseThrow().descendants().toList());
        assertEquals(List.of(), ProcessDriver.nicedThreads(sandboxProcesses), "the sandbox it became runs at niceness 0");
        assertTrue(Files.readString(slots.resolve(Integer.toString(t.slot()))).endsWith("\nwarm\n"),
                "the spare's id range is the sandbox's now");
        assertFalse(containsBytes(tmp, RUNTIME_BUNDLE) || containsBytes(tmp, SUPERVISOR_BUNDLE), "a launch bundle was written to disk");

        // Its supervisor printed its ready line: the keeper starts the next spare.
        Path next = awaitIdleSpare(warm, 2);
        assertNotEquals(spareDir, next);

        // Stopped and started again, it launches cold in a run directory of its own; the spare's goes.
        warm.stop(id, p.state());
        t.cgroup().flatMap(SandboxCgroup::named).ifPresent(c -> assertFalse(Files.exists(c.path()), "stop removed its cgroup"));
        Provisioned again = warm.start(id, p.state(), plan("warm", Map.of()));
        assertFalse(Files.exists(runRoot.resolve(spare)), "the spare's run directory is gone");
        assertEquals(runRoot.resolve("warm").resolve(ProcessDriver.SOCKET_NAME), ProcessTopology.fromState(again.state()).channel());
        assertEquals(t.slot(), ProcessTopology.fromState(again.state()).slot(), "the same id range, so the workspace stays its own");
        assertEquals(DriverStatus.Phase.RUNNING, warm.status(id, again.state()).phase());
        warm.delete(id, again.state());
        assertEquals(DriverStatus.Phase.GONE, warm.status(id, p.state()).phase());
        assertFalse(Files.exists(runRoot.resolve(spare)), "the spare's run directory went with the sandbox");
        assertFalse(Files.exists(workspace));
        assertFalse(Files.exists(slots.resolve(Integer.toString(t.slot()))));
        t.cgroup().flatMap(SandboxCgroup::named).ifPresent(c -> assertFalse(Files.exists(c.path()), "its cgroup is gone"));

        ProcessTopology idle = spareTopology(next);
        warm.close();
        assertNothingOfSpare(next.getFileName().toString(), idle);
        assertEquals(0, warm.spares().orElseThrow().idle());
    }

    @Test
    void nicenessIsReadAfterTheCommandNameWhateverItHolds() throws Exception {
        String stat = "4242 (a) b (c) d) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 39 19 3 0 123 4096 200 18446744073709551615";
        assertEquals(19, ProcessDriver.niceness(stat));
        assertEquals(0, ProcessDriver.niceness(Files.readString(Path.of("/proc/self/stat"))));
        assertThrows(IOException.class, () -> ProcessDriver.niceness("1 (x) S 1 2"));
    }

    @Test
    void aSpareThatDiedIsRemovedAndTheCreateLaunchesCold() throws Exception {
        ProcessDriver warm = withSpares(1);
        Path spareDir = awaitIdleSpare(warm, 1);
        ProcessTopology spare = spareTopology(spareDir);
        ProcessHandle supervisor = ProcessHandle.of(spare.supervisorPid()).orElseThrow();
        supervisor.destroyForcibly();
        supervisor.onExit().get();
        Provisioned p = warm.create(plan("cold", Map.of()));
        cleanups.addFirst(() -> warm.delete(new SandboxId("cold"), p.state()));
        ProcessTopology t = ProcessTopology.fromState(p.state());
        assertNotEquals(spare.holderPid(), t.holderPid());
        assertEquals(runRoot.resolve("cold").resolve(ProcessDriver.SOCKET_NAME), t.channel());
        assertEquals(DriverStatus.Phase.RUNNING, warm.status(new SandboxId("cold"), p.state()).phase());
        assertNothingOfSpare(spareDir.getFileName().toString(), spare);
        assertTrue(awaitLog("cold", "runtime.log", "pidns:").contains("bundle: " + sha256(RUNTIME_BUNDLE)));
    }

    @Test
    void sparesAGatewayLeftBehindAreSweptByTheNextPoolOnItsStateRoot() throws Exception {
        ProcessDriver first = withSpares(1);
        Path spareDir = awaitIdleSpare(first, 1);
        ProcessTopology left = spareTopology(spareDir);
        // The first gateway "died": the next pool on the same state root finds its spare by its topology file.
        ProcessDriver next = withSpares(1);
        assertNothingOfSpare(spareDir.getFileName().toString(), left);
        Path fresh = awaitIdleSpare(next, 1);
        assertNotEquals(spareDir, fresh);
    }

    /**
     * A left spare whose topology cannot be read (cut short) keeps no driver from starting: it is
     * removed by its name and id range (holder and runtime, cgroup, run and log directories, slot)
     * and reported.
     */
    @Test
    void aLeftSpareWithAnUnreadableTopologyIsSweptAndTheDriverStillStarts() throws Exception {
        ProcessDriver first = withSpares(1);
        Path spareDir = awaitIdleSpare(first, 1);
        Path topology = spareDir.resolve(ProcessDriver.SPARE_TOPOLOGY);
        byte[] whole = Files.readAllBytes(topology);
        ProcessTopology left = ProcessTopology.fromState(whole);
        Files.write(topology, java.util.Arrays.copyOf(whole, whole.length / 2));
        assertThrows(RuntimeException.class, () -> ProcessTopology.fromState(Files.readAllBytes(topology)),
                "the topology really is unreadable");
        String name = spareDir.getFileName().toString();
        ProcessTopology bystander = ProcessTopology.fromState(create("bystander").state());
        ProcessDriver next = withSpares(1);
        assertTrue(dead(left.holderPid()), "its holder, found by its id range, is gone");
        assertFalse(dead(bystander.holderPid()), "a sandbox in another id range is untouched");
        assertFalse(Files.exists(spareDir), "its logs are gone");
        assertFalse(Files.exists(runRoot.resolve(name)), "its run directory is gone");
        assertFalse(Files.exists(slots.resolve(Integer.toString(left.slot()))) && Files.readString(
                slots.resolve(Integer.toString(left.slot()))).contains("\n" + name + "\n"), "its id range is free");
        left.cgroup().flatMap(SandboxCgroup::named).ifPresent(c -> assertFalse(Files.exists(c.path()), "its cgroup is gone"));
        Path fresh = awaitIdleSpare(next, 1);
        assertNotEquals(spareDir, fresh);
    }

    @Test
    void aRunRootTooLongForASparesSocketMakesNoSpare() throws Exception {
        // Long enough for a sandbox's socket (sb- and 12 characters) but not a spare's (spare- and 12).
        String base = tmp.toString() + "/";
        int pad = ProcessDriver.MAX_SOCKET_PATH_BYTES - base.length() - ("/sb-123456789012/" + ProcessDriver.SOCKET_NAME).length();
        Path longRoot = Files.createDirectories(Path.of(base + "r".repeat(pad)));
        Files.setPosixFilePermissions(longRoot, PosixFilePermissions.fromString("rwx--x--x"));
        ProcessDriver d = new ProcessDriver(new DriverEnvironment(stateRoot, Map.of(
                "supervisor.launcher", tmp.resolve("bin/supervisor").toString(),
                "runtime.launcher", tmp.resolve("bin/runtime").toString(), "run.root", longRoot.toString(),
                "workspace.root", workspaceRoot.toString(), "id.slots", slots.toString(), ProcessDriver.SPARES_SETTING, "1")));
        cleanups.add(d::close);
        DriverException e = assertThrows(DriverException.class, d::launchSpare);
        assertEquals(DriverException.Kind.INVALID, e.kind());
        assertTrue(e.getMessage().contains("too long for a warm spare"), e.getMessage());
        try (Stream<Path> left = Files.list(longRoot)) {
            assertEquals(List.of(), left.filter(f -> f.getFileName().toString().startsWith(ProcessDriver.SPARE_PREFIX)).toList());
        }
        // A sandbox still fits, and launches cold.
        Provisioned p = d.create(plan("sb-123456789012", Map.of()));
        cleanups.addFirst(() -> d.delete(new SandboxId("sb-123456789012"), p.state()));
        assertEquals(longRoot.resolve("sb-123456789012").resolve(ProcessDriver.SOCKET_NAME),
                ProcessTopology.fromState(p.state()).channel());
    }

    @Test
    void theSpareSettingIsANumberUpToItsBound() throws Exception {
        for (String bad : List.of("-1", Integer.toString(ProcessDriver.MAX_SPARES + 1), "one")) {
            DriverException e = assertThrows(DriverException.class, () -> new ProcessDriver(new DriverEnvironment(stateRoot,
                    Map.of("run.root", runRoot.toString(), "id.slots", slots.toString(), ProcessDriver.SPARES_SETTING, bad))));
            assertEquals(DriverException.Kind.INVALID, e.kind());
            assertTrue(e.getMessage().contains(ProcessDriver.SPARES_SETTING), e.getMessage());
        }
        assertTrue(driver.spares().isEmpty(), "none by default");
        ProcessDriver most = withSpares(ProcessDriver.MAX_SPARES);
        SparePool pool = most.spares().orElseThrow();
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (pool.idle() < ProcessDriver.MAX_SPARES) {
            assertTrue(System.nanoTime() < deadline, "only " + pool.idle() + " spares within 60 s");
            Thread.sleep(20);
        }
        Thread.sleep(200);
        assertEquals(ProcessDriver.MAX_SPARES, pool.started(), "no more than asked for");
        most.close();
        try (Stream<Path> left = Files.list(stateRoot.resolve("process").resolve(ProcessDriver.SPARES))) {
            assertEquals(0, left.count());
        }
        try (Stream<Path> taken = Files.list(slots)) {
            assertEquals(0, taken.count(), "every spare's id range is free");
        }
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
