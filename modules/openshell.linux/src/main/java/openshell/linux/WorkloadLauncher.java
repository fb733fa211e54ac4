package openshell.linux;

import com.sun.jna.Memory;
import com.sun.jna.StringArray;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.TimeUnit;

/**
 * The launcher: a JVM {@code main} the trusted parent starts for every workload process (see
 * {@link LauncherProcess}). It reads a {@link LaunchPlan} from the inherited socket on fd
 * {@link #PLAN_FD}, runs the {@link LaunchStep}s in order on its main thread, hands the seccomp
 * listener to the parent, waits for the acknowledgement and {@code execve}s the target from that
 * same thread. If any step fails it reports the step and errno and exits with
 * {@link #FAILURE_EXIT}; the target never runs.
 *
 * <p>Why on one thread: seccomp filters, no_new_privs, capability sets and Landlock domains are
 * per-thread and only the calling thread's survive {@code execve}. The uid/gid/groups changes go
 * through glibc, which applies them to every thread. The listener is sent by a courier thread
 * started before any restriction: the filter notifies {@code sendmsg}, and nobody could answer
 * that notification before the parent holds the listener.
 */
public final class WorkloadLauncher {
    /** The descriptor number of the plan socket in the launcher. */
    public static final int PLAN_FD = 3;
    /** Longest wait for a plan: a pre-started launcher may wait this long for work. */
    public static final Duration PLAN_WAIT = Duration.ofMinutes(10);
    /** Longest wait for the parent's acknowledgement after the listener was sent. */
    public static final Duration ACK_WAIT = Duration.ofSeconds(60);
    /** Exit status of a launcher that failed a step. */
    public static final int FAILURE_EXIT = 127;

    static final byte MSG_PLAN = 'P';
    static final byte MSG_ACK = 'A';
    static final byte MSG_READY = 'R';
    static final byte MSG_FAILED = 'F';
    static final int F_SETFD = 2;
    static final int FD_CLOEXEC = 1;
    static final int CLOSE_RANGE_CLOEXEC = 4;
    static final int SIG_SETMASK = 2;

    private WorkloadLauncher() {
    }

    /**
     * Entry point.
     *
     * @param args ignored; everything comes in the plan
     */
    public static void main(String[] args) {
        // Unset, JNA builds a library search path by running "/sbin/ldconfig -p" as a child
        // process (~100 ms); the launcher needs only libc, by soname, and runs no helpers.
        if (System.getProperty("jna.platform.library.path") == null) {
            System.setProperty("jna.platform.library.path", "");
        }
        // A normal exit (not halt) so that a training run can write the JDK's AOT cache.
        System.exit(run(PLAN_FD));
    }

    static int run(int socket) {
        LibC.load();
        preloadModuleClasses();
        warmUp();
        Courier courier = new Courier(socket);
        LaunchStep step = LaunchStep.PLAN;
        try {
            LibC.check(LibC.fcntl(socket, F_SETFD, FD_CLOEXEC), "fcntl(F_SETFD, FD_CLOEXEC)");
            Optional<UnixSockets.Message> received = UnixSockets.receive(socket, LaunchPlan.MAX_PLAN_BYTES + 1, PLAN_WAIT);
            if (received.isEmpty() || received.get().endOfStream()) {
                return FAILURE_EXIT;
            }
            received.get().fds().forEach(OwnedFd::close);
            byte[] data = received.get().data();
            if (data[0] != MSG_PLAN) {
                throw new LinuxException("launcher plan", Errno.EINVAL, "expected a plan message");
            }
            LaunchPlan plan = LaunchPlan.decode(Arrays.copyOfRange(data, 1, data.length));

            step = LaunchStep.NAMESPACES;
            joinNamespaces(plan.namespaces());
            step = LaunchStep.TERMINAL;
            if (plan.controllingTerminal()) {
                Pty.makeControllingTerminal(0);
            }
            step = LaunchStep.RLIMITS;
            for (ResourceLimit limit : plan.rlimits()) {
                limit.applyTo(0);
            }
            step = LaunchStep.CAPABILITY_BOUNDING_SET;
            Capabilities.dropBoundingSet();
            Capabilities.clearAmbient();
            step = LaunchStep.IDENTITY;
            Credentials.setGroups(plan.groups().stream().mapToInt(Integer::intValue).toArray());
            Credentials.setGid(plan.gid());
            Credentials.setUid(plan.uid());
            step = LaunchStep.CAPABILITIES;
            Capabilities.set(new Capabilities.Sets(0, 0, 0));
            Capabilities.requireNone();
            step = LaunchStep.NO_NEW_PRIVS;
            ProcessControl.setNoNewPrivileges();
            if (!ProcessControl.noNewPrivileges()) {
                throw new LinuxException("prctl(PR_GET_NO_NEW_PRIVS)", Errno.EPERM, "no_new_privs did not stick");
            }
            step = LaunchStep.WORKING_DIRECTORY;
            LibC.check(LibC.chdir(plan.workingDirectory()), "chdir(" + plan.workingDirectory() + ")");
            step = LaunchStep.LANDLOCK;
            LandlockOutcome landlock = applyLandlock(plan);
            // Build everything execve needs before the filter, so nothing after it allocates natively by surprise.
            StringArray argv = new StringArray(plan.argv().toArray(String[]::new), "UTF-8");
            StringArray envp = new StringArray(plan.envp().toArray(String[]::new), "UTF-8");
            Memory emptySet = new Memory(128);
            LibC.sigemptyset(LibC.address(emptySet));

            step = LaunchStep.SECCOMP;
            SeccompListener listener = Seccomp.installWithListener(plan.filter());
            step = LaunchStep.LISTENER_HANDOFF;
            courier.send(ready(landlock, listener.waitKillable()), listener.fd().value());
            listener.close();
            step = LaunchStep.ACKNOWLEDGEMENT;
            Optional<UnixSockets.Message> ack = UnixSockets.receive(socket, 16, ACK_WAIT);
            if (ack.isEmpty() || ack.get().data().length != 1 || ack.get().data()[0] != MSG_ACK) {
                ack.ifPresent(m -> m.fds().forEach(OwnedFd::close));
                throw new LinuxException("launcher acknowledgement", Errno.ECANCELED,
                        ack.isEmpty() ? "no acknowledgement within " + ACK_WAIT : "parent withdrew");
            }
            step = LaunchStep.EXEC;
            LibC.pthread_sigmask(SIG_SETMASK, LibC.address(emptySet), 0);
            // Everything but stdio closes at exec: the plan socket (its EOF tells the parent exec
            // succeeded) and whatever the JVM opened.
            LibC.check(LibC.syscall(LibC.SYS_CLOSE_RANGE, 3, 0xffffffffL, CLOSE_RANGE_CLOEXEC, 0, 0, 0), "close_range");
            LibC.execve(plan.executable(), argv, envp);
            throw new LinuxException("execve(" + plan.executable() + ")", LibC.errno(), "");
        } catch (LinuxException e) {
            report(socket, step, e.errno(), e.getMessage());
            return FAILURE_EXIT;
        } catch (RuntimeException | Error e) {
            report(socket, step, 0, e.toString());
            return FAILURE_EXIT;
        }
    }

    /**
     * Loads every class of this module now. After Landlock the main thread may not open class
     * files (an exploded module directory is read file by file), and a pre-started launcher pays
     * this before its plan arrives, off the critical path.
     */
    static void preloadModuleClasses() {
        Module module = WorkloadLauncher.class.getModule();
        ClassLoader loader = WorkloadLauncher.class.getClassLoader();
        if (!module.isNamed()) {
            return;
        }
        java.lang.module.ResolvedModule resolved = module.getLayer().configuration().findModule(module.getName()).orElseThrow();
        try (java.lang.module.ModuleReader reader = resolved.reference().open();
             java.util.stream.Stream<String> entries = reader.list()) {
            for (String entry : (Iterable<String>) entries::iterator) {
                if (entry.endsWith(".class") && !entry.equals("module-info.class")) {
                    Class.forName(entry.substring(0, entry.length() - 6).replace('/', '.'), true, loader);
                }
            }
        } catch (java.io.IOException | ClassNotFoundException e) {
            throw new LinuxException("launcher preload", 0, e.toString());
        }
    }

    /**
     * Runs the read-only parts of a launch once before the plan arrives (decoding a plan, reading
     * capabilities, building a Landlock ruleset without enforcing it, the string formatting the
     * steps use), so that class initialisation and call-site linking happen off the critical path
     * of a pre-started launcher. Changes no state of the process.
     */
    static void warmUp() {
        LaunchPlan sample = LaunchPlan.builder("/bin/true").identity(65534, 65534, java.util.List.of(65534))
                .landlock(LaunchPlan.Mode.BEST_EFFORT, java.util.List.of("/"), java.util.List.of())
                .rlimits(java.util.List.of(new ResourceLimit(ResourceLimit.NOFILE, 1, 1)))
                .build();
        LaunchPlan decoded = LaunchPlan.decode(sample.encode());
        Capabilities.current();
        Capabilities.boundingSet();
        Capabilities.ambientSet();
        ProcessControl.noNewPrivileges();
        Seccomp.notificationSizes();
        int abi = Landlock.abiVersion();
        if (abi > 0) {
            try (Landlock.Ruleset ruleset = Landlock.create(Landlock.fsRights(abi), 0, Landlock.scopes(abi))) {
                ruleset.allow(decoded.readOnlyPaths().get(0), Landlock.READ_ONLY);
            }
        }
        new StringArray(decoded.argv().toArray(String[]::new), "UTF-8");
        ready(new LandlockOutcome(abi, 0, 0, 0, 0, false), false);
        String unused = "chdir(" + decoded.workingDirectory() + ")" + abi + LaunchStep.EXEC;
        if (unused.isEmpty()) {
            throw new IllegalStateException();
        }
    }

    static void joinNamespaces(Map<NamespaceType, String> namespaces) {
        for (Map.Entry<NamespaceType, String> entry : namespaces.entrySet()) {
            NamespaceType type = entry.getKey();
            try (OwnedFd ns = Namespaces.openPath(entry.getValue())) {
                switch (type) {
                    case USER, MOUNT, PID -> {
                        // A multithreaded process cannot setns into these (and a pid namespace would
                        // only apply to children): the launcher must have been started inside them.
                        long target = Namespaces.inode(java.nio.file.Path.of("/proc/self/fd/" + ns.value()));
                        if (target != Namespaces.current(type)) {
                            throw new LinuxException("setns(" + type + ")", Errno.EINVAL,
                                    "a JVM cannot enter a " + type + " namespace; start the launcher inside it");
                        }
                    }
                    default -> Namespaces.enter(type, ns);
                }
            }
        }
    }

    static LandlockOutcome applyLandlock(LaunchPlan plan) {
        return applyLandlock(plan, Landlock.abiVersion());
    }

    /** As above, for a given kernel ABI (lets a test show what an older kernel would get). */
    static LandlockOutcome applyLandlock(LaunchPlan plan, int abi) {
        long requestedFs = Landlock.fsRights(KernelFeatures.LANDLOCK_ABI_TARGET);
        long requestedScopes = Landlock.scopes(KernelFeatures.LANDLOCK_ABI_TARGET);
        long handledFs = requestedFs & Landlock.fsRights(abi);
        long scopes = requestedScopes & Landlock.scopes(abi);
        if (plan.landlock() == LaunchPlan.Mode.REQUIRED && (handledFs != requestedFs || scopes != requestedScopes)) {
            throw new LinuxException("landlock", Errno.EOPNOTSUPP, "kernel Landlock ABI " + abi
                    + " cannot enforce what ABI " + KernelFeatures.LANDLOCK_ABI_TARGET + " can, and the plan requires it");
        }
        if (abi == 0) {
            return new LandlockOutcome(0, requestedFs, 0, requestedScopes, 0, false);
        }
        try (Landlock.Ruleset ruleset = Landlock.create(handledFs, 0, scopes)) {
            for (String path : plan.readOnlyPaths()) {
                ruleset.allow(path, Landlock.READ_ONLY & handledFs);
            }
            for (String path : plan.readWritePaths()) {
                ruleset.allow(path, handledFs);
            }
            ruleset.restrictSelf();
        }
        return new LandlockOutcome(abi, requestedFs, handledFs, requestedScopes, scopes, true);
    }

    static byte[] ready(LandlockOutcome landlock, boolean waitKillable) {
        return ByteBuffer.allocate(2 + 4 + 8 * 4 + 1).put(MSG_READY).put((byte) (waitKillable ? 1 : 0))
                .putInt(landlock.abi()).putLong(landlock.requestedFs()).putLong(landlock.handledFs())
                .putLong(landlock.requestedScopes()).putLong(landlock.scopes())
                .put((byte) (landlock.enforced() ? 1 : 0)).array();
    }

    private static void report(int socket, LaunchStep step, int errno, String detail) {
        byte[] text = detail.getBytes(StandardCharsets.UTF_8);
        byte[] message = ByteBuffer.allocate(9 + Math.min(text.length, 4000)).put(MSG_FAILED).putInt(step.ordinal())
                .putInt(errno).put(text, 0, Math.min(text.length, 4000)).array();
        // write(2), not sendmsg: after the filter is installed, sendmsg would wait for a listener nobody reads.
        try (Memory buffer = new Memory(message.length)) {
            buffer.write(0, message, 0, message.length);
            LibC.write(socket, LibC.address(buffer), message.length);
        }
    }

    /** The one unrestricted thread; it only ever sends the listener. */
    private static final class Courier {
        private final SynchronousQueue<Runnable> work = new SynchronousQueue<>();
        private final int socket;

        Courier(int socket) {
            this.socket = socket;
            Thread.ofPlatform().daemon(true).name("listener-courier").start(() -> {
                try {
                    work.take().run();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
        }

        void send(byte[] data, int fd) {
            CompletableFuture<Void> sent = new CompletableFuture<>();
            Runnable job = () -> {
                try {
                    UnixSockets.send(socket, data, fd);
                    sent.complete(null);
                } catch (RuntimeException e) {
                    sent.completeExceptionally(e);
                }
            };
            try {
                if (!work.offer(job, ACK_WAIT.toSeconds(), TimeUnit.SECONDS)) {
                    throw new LinuxException("listener hand-off", Errno.ETIMEDOUT, "courier thread not ready");
                }
                sent.get(ACK_WAIT.toSeconds(), TimeUnit.SECONDS);
            } catch (java.util.concurrent.ExecutionException e) {
                if (e.getCause() instanceof LinuxException linux) {
                    throw linux;
                }
                throw new LinuxException("listener hand-off", 0, e.getCause().toString());
            } catch (java.util.concurrent.TimeoutException e) {
                throw new LinuxException("listener hand-off", Errno.ETIMEDOUT, "sendmsg did not complete");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new LinuxException("listener hand-off", Errno.EINTR, "interrupted");
            }
        }
    }
}
