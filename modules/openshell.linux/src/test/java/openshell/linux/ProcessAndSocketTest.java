package openshell.linux;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.jna.Memory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** pidfd, posix_spawn children, task memory, Unix socket extras, PTY and cgroup v2, on the real kernel. */
class ProcessAndSocketTest {
    private static final Duration WAIT = Duration.ofSeconds(30);

    @Test
    void anEndedChildIsReportedAndLeftForItsOwnerToReap() {
        try (ChildProcess child = ChildProcess.builder("/bin/sh").argv(java.util.List.of("sh", "-c", "exit 7")).spawn()) {
            java.util.OptionalInt ended = ProcessControl.awaitEndedChild();
            org.junit.jupiter.api.Assertions.assertEquals(java.util.OptionalInt.of(child.pid()), ended);
            // Not reaped by the look: its owner still reads its status.
            org.junit.jupiter.api.Assertions.assertEquals(7,
                    child.awaitExit(java.time.Duration.ofSeconds(5)).orElseThrow().exitCode());
        }
        // No children left: the wait returns at once instead of blocking (only checkable when this JVM has none).
        if (ProcessHandle.current().children().findAny().isEmpty()) {
            org.junit.jupiter.api.Assertions.assertEquals(java.util.OptionalInt.empty(), ProcessControl.awaitEndedChild());
        }
    }

    @Test
    void pidfdSignalsAndWaitsForAChild() {
        try (ChildProcess child = ChildProcess.builder("/usr/bin/sleep").argv(List.of("sleep", "60")).spawn()) {
            assertEquals(Optional.empty(), child.awaitExit(Duration.ofMillis(10)), "still running");
            assertTrue(child.pidfd().signal(15));
            assertEquals(Optional.of(new ChildExit(-1, 15)), child.awaitExit(WAIT));
            assertFalse(child.pidfd().signal(15), "an exited process is reported, not signalled");
        }
        try (ChildProcess child = ChildProcess.builder("/usr/bin/sh").argv(List.of("sh", "-c", "exit 3")).spawn()) {
            assertEquals(Optional.of(new ChildExit(3, 0)), child.awaitExit(WAIT));
        }
    }

    @Test
    void pidfdGetfdCopiesADescriptorOutOfAProcess() {
        List<OwnedFd> pipe = OwnedFd.pipe();
        try (OwnedFd read = pipe.get(0); OwnedFd write = pipe.get(1); Pidfd self = Pidfd.open(LibC.getpid());
             OwnedFd copy = self.takeFd(write.value())) {
            assertNotEquals(write.value(), copy.value());
            copy.write("via-copy".getBytes(StandardCharsets.US_ASCII));
            byte[] buffer = new byte[8];
            assertEquals(8, read.read(buffer, WAIT));
            assertEquals("via-copy", new String(buffer, StandardCharsets.US_ASCII));
        }
    }

    @Test
    void taskMemoryReadsAndWritesWithBothMechanisms() {
        for (TaskMemory.Mechanism mechanism : TaskMemory.Mechanism.values()) {
            TaskMemory memory = TaskMemory.using(mechanism);
            try (Memory target = new Memory(16)) {
                target.write(0, "0123456789abcdef".getBytes(StandardCharsets.US_ASCII), 0, 16);
                byte[] out = new byte[16];
                assertEquals(16, memory.read(LibC.getpid(), LibC.address(target), out, 16), mechanism.toString());
                assertEquals("0123456789abcdef", new String(out, StandardCharsets.US_ASCII));
                assertEquals(4, memory.write(LibC.getpid(), LibC.address(target) + 4, "WXYZ".getBytes(StandardCharsets.US_ASCII), 4));
                assertEquals("0123WXYZ89abcdef", target.getString(0, "US-ASCII").substring(0, 16));
            }
        }
        assertEquals(TaskMemory.Mechanism.PROCESS_VM, TaskMemory.probe().mechanism(), "on this host process_vm_readv works");
    }

    @Test
    void taskMemoryTransfersAreBoundedAtOnePage() {
        TaskMemory memory = TaskMemory.probe();
        try (Memory target = new Memory(TaskMemory.MAX_TRANSFER)) {
            target.clear();
            byte[] page = new byte[TaskMemory.MAX_TRANSFER + 1];
            assertEquals(TaskMemory.MAX_TRANSFER, memory.read(LibC.getpid(), LibC.address(target), page, TaskMemory.MAX_TRANSFER));
            LinuxException e = assertThrows(LinuxException.class,
                    () -> memory.read(LibC.getpid(), LibC.address(target), page, TaskMemory.MAX_TRANSFER + 1));
            assertEquals(Errno.EINVAL, e.errno());
        }
    }

    @Test
    void scmRightsPassesDescriptorsWithPeerCredentialsAndCookies() {
        List<OwnedFd> pair = UnixSockets.seqpacketPair();
        List<OwnedFd> pipe = OwnedFd.pipe();
        OwnedFd a = pair.get(0);
        try (OwnedFd b = pair.get(1); OwnedFd read = pipe.get(0); OwnedFd write = pipe.get(1)) {
            UnixSockets.send(a.value(), new byte[] {42}, write.value());
            UnixSockets.Message message = UnixSockets.receive(b.value(), 16, WAIT).orElseThrow();
            assertArrayEquals(new byte[] {42}, message.data());
            assertEquals(1, message.fds().size());
            try (OwnedFd passed = message.fds().get(0)) {
                passed.write(new byte[] {9});
                byte[] one = new byte[1];
                assertEquals(1, read.read(one, WAIT));
                assertEquals(9, one[0]);
            }
            UnixSockets.PeerCredentials peer = UnixSockets.peerCredentials(b.value());
            assertEquals(new UnixSockets.PeerCredentials(LibC.getpid(), 0, 0), peer);
            long cookieA = UnixSockets.cookie(a.value());
            assertNotEquals(0, cookieA);
            assertNotEquals(cookieA, UnixSockets.cookie(b.value()));
            assertEquals(cookieA, UnixSockets.cookie(a.value()), "a cookie is stable");
            long inode = UnixSockets.socketInode(LibC.getpid(), a.value()).orElseThrow();
            assertTrue(inode > 0);
            assertEquals(Optional.empty(), UnixSockets.socketInode(LibC.getpid(), read.value()), "a pipe is not a socket");
            a.close();
            assertTrue(UnixSockets.receive(b.value(), 16, WAIT).orElseThrow().endOfStream());
            assertEquals(Optional.empty(), UnixSockets.receive(read.value(), 16, Duration.ofMillis(10)), "bounded wait");
        } finally {
            a.close();
        }
    }

    @Test
    void descriptorsPerMessageAreBounded() {
        List<OwnedFd> pair = UnixSockets.seqpacketPair();
        try (OwnedFd a = pair.get(0); OwnedFd b = pair.get(1)) {
            int[] max = new int[UnixSockets.MAX_FDS_PER_MESSAGE];
            java.util.Arrays.fill(max, b.value());
            UnixSockets.send(a.value(), new byte[] {1}, max);
            UnixSockets.Message message = UnixSockets.receive(b.value(), 16, WAIT).orElseThrow();
            assertEquals(UnixSockets.MAX_FDS_PER_MESSAGE, message.fds().size());
            message.fds().forEach(OwnedFd::close);
            int[] tooMany = new int[UnixSockets.MAX_FDS_PER_MESSAGE + 1];
            java.util.Arrays.fill(tooMany, b.value());
            assertEquals(Errno.EINVAL, assertThrows(LinuxException.class, () -> UnixSockets.send(a.value(), new byte[] {1}, tooMany)).errno());
        }
    }

    @Test
    void bindToDeviceSticks() {
        int fd = LibC.socket(WorkloadFilter.AF_INET, WorkloadFilter.SOCK_DGRAM | 0x80000, 0);
        try (OwnedFd socket = OwnedFd.adopt(fd)) {
            assertEquals(Optional.empty(), UnixSockets.boundDevice(socket.value()));
            UnixSockets.bindToDevice(socket.value(), "lo");
            assertEquals(Optional.of("lo"), UnixSockets.boundDevice(socket.value()));
            assertEquals(Errno.EINVAL, assertThrows(LinuxException.class,
                    () -> UnixSockets.bindToDevice(socket.value(), "a-name-too-long-for-ifnamsiz")).errno());
        }
    }

    @Test
    void ptyWindowSizeRoundTrips() {
        try (Pty pty = Pty.open()) {
            assertTrue(pty.slaveName().startsWith("/dev/pts/"), pty.slaveName());
            pty.resize(new Pty.WindowSize(42, 132));
            assertEquals(new Pty.WindowSize(42, 132), pty.windowSize());
            pty.slave().write("hi\n".getBytes(StandardCharsets.US_ASCII));
            byte[] buffer = new byte[16];
            int n = pty.master().read(buffer, WAIT);
            assertTrue(new String(buffer, 0, n, StandardCharsets.US_ASCII).startsWith("hi"));
        }
    }

    @Test
    void cgroupLeafKillsEveryMemberIncludingOrphans() {
        Path root = Cgroup.v2Root().orElseThrow(() -> new AssertionError("cgroup2 must be mounted on this machine"));
        Cgroup leaf = Cgroup.create(root, "openshell-test-" + ProcessHandle.current().pid());
        try (ChildProcess child = ChildProcess.builder("/usr/bin/sh")
                .argv(List.of("sh", "-c", "setsid /usr/bin/sleep 60 & exec /usr/bin/sleep 60")).spawn()) {
            leaf.move(child.pid());
            assertTrue(leaf.events().populated());
            assertTrue(leaf.members().contains(child.pid()));
            leaf.killAll();
            assertEquals(Optional.of(new ChildExit(-1, 9)), child.awaitExit(WAIT));
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (leaf.events().populated()) {
                // The setsid'd orphan is reaped by init, asynchronously: wait for the kernel's event.
                assertTrue(System.nanoTime() < deadline, "cgroup still populated: " + leaf.members());
                Thread.onSpinWait();
            }
        } finally {
            leaf.remove();
        }
        assertEquals(Errno.EINVAL, assertThrows(LinuxException.class, () -> Cgroup.create(root, "../escape")).errno());
    }

    @Test
    void probingPicksProcMemWhereDockersDefaultProfileRefusesProcessVmReadvAndPidfdGetfd() throws Exception {
        // Docker's default profile answers these two with EPERM; the same filter on one thread
        // reproduces that, and the probes must notice it rather than assume.
        BpfProgram dockerLike = BpfProgram.builder()
                .loadNr()
                .jumpIfEqual((int) LibC.SYS_PROCESS_VM_READV, "eperm")
                .jumpIfEqual((int) LibC.SYS_PIDFD_GETFD, "eperm")
                .ret(Seccomp.RET_ALLOW)
                .label("eperm")
                .ret(Seccomp.errno(Errno.EPERM))
                .build();
        KernelFeatures features = CapabilitiesTest.onFreshThread(() -> {
            ProcessControl.setNoNewPrivileges();
            Seccomp.install(dockerLike);
            return KernelFeatures.probe();
        });
        assertFalse(features.processVmReadv());
        assertFalse(features.pidfdGetfd());
        assertTrue(features.procMem());
        assertEquals(Optional.of(TaskMemory.Mechanism.PROC_MEM), features.taskMemory());
        assertTrue(features.lacking().contains("process_vm_readv refused (task memory via /proc/<pid>/mem)"), features.lacking().toString());
        TaskMemory.Mechanism picked = CapabilitiesTest.onFreshThread(() -> {
            ProcessControl.setNoNewPrivileges();
            Seccomp.install(dockerLike);
            return TaskMemory.probe().mechanism();
        });
        assertEquals(TaskMemory.Mechanism.PROC_MEM, picked);
    }

    @Test
    void kernelProbeReportsWhatThisMachineHas() {
        KernelFeatures features = KernelFeatures.probe();
        // At least what the sandbox runtime needs (its StartupProbes.MIN_LANDLOCK_ABI); a newer kernel passes too.
        assertTrue(features.landlockAbi() >= LandlockTest.RUNTIME_MINIMUM_ABI, "this kernel has Landlock ABI " + features.landlockAbi());
        assertTrue(features.seccompListener());
        assertTrue(features.waitKillableRecv());
        assertTrue(features.syncWakeUp());
        assertTrue(features.continueAvailable());
        assertTrue(features.pidfdOpen() && features.pidfdGetfd() && features.processVmReadv() && features.procMem());
        assertTrue(features.cgroup2Writable(), features.toString());
        assertEquals(List.of(), features.lacking(), "ENVIRONMENT.md lists every feature as present here");
        KernelFeatures docker = new KernelFeatures(7, true, true, true, true, true, false, false, true,
                features.cgroup2Root(), true);
        assertEquals(Optional.of(TaskMemory.Mechanism.PROC_MEM), docker.taskMemory());
        assertEquals(2, docker.lacking().size(), docker.lacking().toString());
    }
}
