package openshell.linux;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;

/**
 * What this kernel (and the seccomp profile around this process) actually offers, found by trying
 * each call, never by reading a version number. {@link #lacking()} names every missing feature so
 * a caller can refuse to start, or report a degraded mode, instead of pretending.
 *
 * @param landlockAbi          Landlock ABI version, 0 if absent
 * @param seccompListener      {@code SECCOMP_FILTER_FLAG_NEW_LISTENER} works
 * @param waitKillableRecv     {@code SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV} is accepted (5.19+)
 * @param syncWakeUp           {@code SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP} is accepted (6.6+)
 * @param continueAvailable    {@code SECCOMP_RET_USER_NOTIF} is an available action
 * @param pidfdOpen            {@code pidfd_open} works
 * @param pidfdGetfd           {@code pidfd_getfd} works (EPERM under Docker's default profile)
 * @param processVmReadv       {@code process_vm_readv} works (EPERM under Docker's default profile)
 * @param procMem              {@code /proc/<pid>/mem} can be read
 * @param cgroup2Root          where cgroup v2 is mounted, if it is
 * @param cgroup2Writable      a leaf can be created there
 */
public record KernelFeatures(int landlockAbi, boolean seccompListener, boolean waitKillableRecv, boolean syncWakeUp,
                             boolean continueAvailable, boolean pidfdOpen, boolean pidfdGetfd, boolean processVmReadv,
                             boolean procMem, Optional<Path> cgroup2Root, boolean cgroup2Writable) {

    /** The Landlock ABI the sandbox is written for (fs rights, TCP ports, scopes, logging flags). */
    public static final int LANDLOCK_ABI_TARGET = 7;

    /** @return what this machine offers */
    public static KernelFeatures probe() {
        AtomicReference<boolean[]> seccomp = new AtomicReference<>(new boolean[3]);
        // A filter binds its thread forever: probe on a thread that ends right after.
        Thread probe = Thread.ofPlatform().name("seccomp-probe").unstarted(() -> {
            boolean[] result = new boolean[3];
            try {
                ProcessControl.setNoNewPrivileges();
                BpfProgram allowAll = BpfProgram.builder().ret(Seccomp.RET_ALLOW).build();
                try (SeccompListener listener = Seccomp.installWithListener(allowAll)) {
                    result[0] = true;
                    result[1] = listener.waitKillable();
                    result[2] = listener.enableSyncWakeUp();
                }
            } catch (LinuxException e) {
                result[0] = false;
            }
            seccomp.set(result);
        });
        probe.start();
        try {
            probe.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new LinuxException("probe", Errno.EINTR, "interrupted");
        }
        boolean[] s = seccomp.get();
        boolean pidfdOpen = false;
        boolean pidfdGetfd = false;
        try (Pidfd self = Pidfd.open(LibC.getpid())) {
            pidfdOpen = true;
            try (OwnedFd copy = self.takeFd(self.fd().value())) {
                pidfdGetfd = copy.isOpen();
            } catch (LinuxException e) {
                pidfdGetfd = false;
            }
        } catch (LinuxException e) {
            pidfdOpen = false;
        }
        boolean vm = works(TaskMemory.Mechanism.PROCESS_VM);
        boolean mem = works(TaskMemory.Mechanism.PROC_MEM);
        Optional<Path> cgroupRoot = Cgroup.v2Root();
        boolean cgroupWritable = cgroupRoot.map(KernelFeatures::canCreateLeaf).orElse(false);
        boolean notifAction = false;
        try {
            notifAction = Seccomp.actionAvailable(Seccomp.RET_USER_NOTIF);
        } catch (LinuxException e) {
            notifAction = false;
        }
        return new KernelFeatures(Landlock.abiVersion(), s[0], s[1], s[2], notifAction, pidfdOpen, pidfdGetfd, vm, mem,
                cgroupRoot, cgroupWritable);
    }

    private static boolean works(TaskMemory.Mechanism mechanism) {
        try {
            byte[] out = new byte[1];
            try (com.sun.jna.Memory probe = new com.sun.jna.Memory(8)) {
                probe.setByte(0, (byte) 42);
                TaskMemory.using(mechanism).read(LibC.getpid(), LibC.address(probe), out, 1);
                return out[0] == 42;
            }
        } catch (LinuxException e) {
            return false;
        }
    }

    private static boolean canCreateLeaf(Path root) {
        Path leaf = root.resolve("openshell-probe-" + ProcessHandle.current().pid());
        try {
            Files.createDirectory(leaf);
            Files.delete(leaf);
            return true;
        } catch (java.io.IOException e) {
            return false;
        }
    }

    /** @return the mechanism {@link TaskMemory#probe()} would pick, if any works */
    public Optional<TaskMemory.Mechanism> taskMemory() {
        return processVmReadv ? Optional.of(TaskMemory.Mechanism.PROCESS_VM)
                : procMem ? Optional.of(TaskMemory.Mechanism.PROC_MEM) : Optional.empty();
    }

    /** @return a line per missing or degraded feature; empty when everything is present */
    public List<String> lacking() {
        List<String> missing = new ArrayList<>();
        if (landlockAbi == 0) {
            missing.add("landlock: absent or disabled");
        } else if (landlockAbi < LANDLOCK_ABI_TARGET) {
            missing.add("landlock: ABI " + landlockAbi + " < " + LANDLOCK_ABI_TARGET);
        }
        if (!seccompListener) {
            missing.add("seccomp: no user-notification listener");
        }
        if (!waitKillableRecv) {
            missing.add("seccomp: no WAIT_KILLABLE_RECV (received notifications are interruptible)");
        }
        if (!syncWakeUp) {
            missing.add("seccomp: no SYNC_WAKE_UP");
        }
        if (!continueAvailable) {
            missing.add("seccomp: USER_NOTIF action unavailable");
        }
        if (!pidfdOpen) {
            missing.add("pidfd_open unavailable");
        }
        if (!pidfdGetfd) {
            missing.add("pidfd_getfd refused (listener hand-off must use SCM_RIGHTS)");
        }
        if (!processVmReadv) {
            missing.add("process_vm_readv refused (task memory via /proc/<pid>/mem)");
        }
        if (!procMem) {
            missing.add("/proc/<pid>/mem unreadable");
        }
        if (cgroup2Root.isEmpty()) {
            missing.add("cgroup2 not mounted");
        } else if (!cgroup2Writable) {
            missing.add("cgroup2 at " + cgroup2Root.get() + " not writable");
        }
        return missing;
    }
}
