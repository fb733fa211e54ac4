package openshell.linux;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * The parent's side of a launch: start the native launcher ({@code openshell-launcher}, built
 * from {@code src/main/c}; possibly ahead of time), send it a {@link LaunchPlan}, receive the
 * seccomp listener, acknowledge, and learn that the target was {@code execve}d (the plan socket is
 * close-on-exec, so end of stream means the exec happened).
 *
 * <p>Why a native program and not a JVM: every restriction of a workload process must be applied
 * by that process itself, on the thread that then calls {@code execve}, and a JVM cannot fork. A
 * launcher JVM per workload process cost 0.35-0.45 s of CPU and 42 MiB before its target ran;
 * the native launcher runs the same steps ({@link LaunchStep}) in about a millisecond. The
 * decisions stay here: which Landlock rights this kernel can enforce, and whether that is enough
 * for the plan, are chosen by the parent and sent with the plan; the launcher applies exactly
 * what it is sent, and fails the launch at the first step that does not succeed.
 */
public final class LauncherProcess implements AutoCloseable {
    /** The descriptor number of the plan socket in the launcher. */
    public static final int PLAN_FD = 3;
    /** Longest wait of a launcher for its plan: a pre-started launcher may wait this long for work. */
    public static final Duration PLAN_WAIT = Duration.ofMinutes(10);
    /** Longest wait of a launcher for the acknowledgement after it sent the listener. */
    public static final Duration ACK_WAIT = Duration.ofSeconds(60);
    /** Exit status of a launcher that failed a step, or whose parent withdrew. */
    public static final int FAILURE_EXIT = 127;

    static final byte MSG_PLAN = 'P';
    static final byte MSG_ACK = 'A';
    static final byte MSG_READY = 'R';
    static final byte MSG_FAILED = 'F';
    /** 'P', the kernel's Landlock ABI, the handled file-system rights and the scopes, before the plan. */
    static final int PLAN_HEADER_BYTES = 1 + 4 + 8 + 8;
    static final int READY_BYTES = 3;

    private final ChildProcess process;
    private final OwnedFd socket;
    private LaunchStep stage = LaunchStep.PLAN;

    private LauncherProcess(ChildProcess process, OwnedFd socket) {
        this.process = process;
        this.socket = socket;
    }

    /**
     * Where the launcher is.
     *
     * @param executable absolute path of {@code openshell-launcher}
     */
    public record Command(String executable) {
        /** Checks the path. */
        public Command {
            Objects.requireNonNull(executable, "executable");
            if (!executable.startsWith("/")) {
                throw new LinuxException("launcher", Errno.EINVAL, "the launcher must be an absolute path: " + executable);
            }
        }

        /** @return the launcher's argv */
        public List<String> argv() {
            return List.of(executable);
        }
    }

    /**
     * The launcher's (and so the target's) standard descriptors.
     *
     * @param stdin      our descriptor for its fd 0
     * @param stdout     our descriptor for its fd 1
     * @param stderr     our descriptor for its fd 2
     * @param newSession whether to start it in a new session (needed for a controlling terminal)
     */
    public record Stdio(int stdin, int stdout, int stderr, boolean newSession) {
    }

    /**
     * Starts a launcher, which then waits (up to {@link #PLAN_WAIT}) for its plan.
     *
     * @param command how to run it
     * @param stdio   its standard descriptors
     * @return the handle
     */
    public static LauncherProcess start(Command command, Stdio stdio) {
        List<OwnedFd> pair = UnixSockets.seqpacketPair();
        try (OwnedFd theirs = pair.get(1)) {
            ChildProcess child = ChildProcess.builder(command.executable())
                    .argv(command.argv())
                    .descriptor(0, stdio.stdin())
                    .descriptor(1, stdio.stdout())
                    .descriptor(2, stdio.stderr())
                    .descriptor(PLAN_FD, theirs.value())
                    .newSession(stdio.newSession())
                    .spawn();
            return new LauncherProcess(child, pair.get(0));
        } catch (LinuxException e) {
            pair.get(0).close();
            throw e;
        }
    }

    /** @return the launcher (later: the target) process */
    public ChildProcess process() {
        return process;
    }

    /**
     * Sends the plan and waits until every control is in force or a step failed.
     *
     * @param plan    the plan
     * @param timeout the longest wait (JVM start included, for a launcher started just now)
     * @return {@link LaunchResult.Ready} or {@link LaunchResult.Failed}
     */
    public LaunchResult sendPlan(LaunchPlan plan, Duration timeout) {
        return sendPlan(plan, timeout, Landlock.abiVersion());
    }

    /** As above, as if the kernel's Landlock ABI were {@code abi}: tests show what an older kernel gets. */
    LaunchResult sendPlan(LaunchPlan plan, Duration timeout, int abi) {
        if (stage != LaunchStep.PLAN) {
            throw new LinuxException("launcher", Errno.EINVAL, "plan already sent");
        }
        byte[] encoded = plan.encode();
        stage = LaunchStep.LISTENER_HANDOFF;
        LandlockOutcome planned;
        try {
            planned = landlockFor(plan.landlock(), abi);
        } catch (LinuxException e) {
            withdraw();
            return new LaunchResult.Failed(LaunchStep.LANDLOCK, e.errno(), e.getMessage());
        }
        byte[] message = ByteBuffer.allocate(PLAN_HEADER_BYTES + encoded.length).put(MSG_PLAN).putInt(abi)
                .putLong(planned.handledFs()).putLong(planned.scopes()).put(encoded).array();
        try {
            UnixSockets.send(socket.value(), message);
        } catch (LinuxException e) {
            return new LaunchResult.Failed(LaunchStep.PLAN, e.errno(), "launcher gone before the plan: " + e.getMessage());
        }
        Optional<UnixSockets.Message> reply;
        try {
            reply = UnixSockets.receive(socket.value(), 8192, timeout);
        } catch (LinuxException e) {
            return new LaunchResult.Failed(LaunchStep.PLAN, e.errno(), "launcher gone: " + e.getMessage());
        }
        if (reply.isEmpty()) {
            return new LaunchResult.Failed(LaunchStep.LISTENER_HANDOFF, Errno.ETIMEDOUT, "no answer within " + timeout);
        }
        UnixSockets.Message m = reply.get();
        if (m.endOfStream()) {
            return new LaunchResult.Failed(LaunchStep.PLAN, Errno.ECHILD, "launcher ended without a report");
        }
        byte[] data = m.data();
        if (data[0] == MSG_FAILED) {
            m.fds().forEach(OwnedFd::close);
            return failed(data);
        }
        if (data[0] != MSG_READY || m.fds().size() != 1 || data.length != READY_BYTES) {
            m.fds().forEach(OwnedFd::close);
            return new LaunchResult.Failed(LaunchStep.LISTENER_HANDOFF, Errno.EINVAL, "malformed ready message");
        }
        boolean killable = data[1] != 0;
        boolean enforced = data[2] != 0;
        if (enforced != (planned.handledFs() != 0 || planned.scopes() != 0)) {
            m.fds().forEach(OwnedFd::close);
            return new LaunchResult.Failed(LaunchStep.LANDLOCK, Errno.EINVAL,
                    "the launcher reports Landlock " + (enforced ? "enforced" : "not enforced") + ", not what was planned");
        }
        LandlockOutcome landlock = new LandlockOutcome(planned.abi(), planned.requestedFs(), planned.handledFs(),
                planned.requestedScopes(), planned.scopes(), enforced);
        stage = LaunchStep.ACKNOWLEDGEMENT;
        return new LaunchResult.Ready(SeccompListener.adopt(m.fds().get(0), killable), landlock);
    }

    /**
     * Lets the target run and waits until it has been {@code execve}d. Serve the listener from
     * another thread before calling this: the target's first notified call can come at once.
     *
     * @param timeout the longest wait
     * @return {@link LaunchResult.Started} or {@link LaunchResult.Failed} (step {@code EXEC})
     */
    public LaunchResult acknowledge(Duration timeout) {
        if (stage != LaunchStep.ACKNOWLEDGEMENT) {
            throw new LinuxException("launcher", Errno.EINVAL, "nothing to acknowledge");
        }
        stage = LaunchStep.EXEC;
        try {
            UnixSockets.send(socket.value(), new byte[] {MSG_ACK});
        } catch (LinuxException e) {
            return new LaunchResult.Failed(LaunchStep.ACKNOWLEDGEMENT, e.errno(), "launcher gone: " + e.getMessage());
        }
        Optional<UnixSockets.Message> reply;
        try {
            reply = UnixSockets.receive(socket.value(), 8192, timeout);
        } catch (LinuxException e) {
            return new LaunchResult.Failed(LaunchStep.EXEC, e.errno(), "launcher gone: " + e.getMessage());
        }
        if (reply.isEmpty()) {
            return new LaunchResult.Failed(LaunchStep.EXEC, Errno.ETIMEDOUT, "no exec within " + timeout);
        }
        UnixSockets.Message m = reply.get();
        m.fds().forEach(OwnedFd::close);
        if (m.endOfStream()) {
            return new LaunchResult.Started(process.pid());
        }
        byte[] data = m.data();
        return data[0] == MSG_FAILED ? failed(data)
                : new LaunchResult.Failed(LaunchStep.EXEC, Errno.EINVAL, "unexpected message");
    }

    /**
     * The Landlock rights a launch gets on a kernel of Landlock ABI {@code abi}: what the sandbox
     * targets ({@link KernelFeatures#LANDLOCK_ABI_TARGET}) and the kernel can enforce; none when
     * the kernel has no Landlock.
     *
     * @param mode whether the target's rights are a hard requirement
     * @param abi  the kernel's Landlock ABI (0: none)
     * @return the outcome if the launcher enforces it ({@code enforced} set when any right is handled)
     * @throws LinuxException EOPNOTSUPP if {@code mode} is REQUIRED and the kernel cannot enforce every right
     */
    public static LandlockOutcome landlockFor(LaunchPlan.Mode mode, int abi) {
        long requestedFs = Landlock.fsRights(KernelFeatures.LANDLOCK_ABI_TARGET);
        long requestedScopes = Landlock.scopes(KernelFeatures.LANDLOCK_ABI_TARGET);
        long handledFs = requestedFs & Landlock.fsRights(abi);
        long scopes = requestedScopes & Landlock.scopes(abi);
        if (mode == LaunchPlan.Mode.REQUIRED && (handledFs != requestedFs || scopes != requestedScopes)) {
            throw new LinuxException("landlock", Errno.EOPNOTSUPP, "kernel Landlock ABI " + abi
                    + " cannot enforce what ABI " + KernelFeatures.LANDLOCK_ABI_TARGET + " can, and the plan requires it");
        }
        return new LandlockOutcome(abi, requestedFs, handledFs, requestedScopes, scopes, handledFs != 0 || scopes != 0);
    }

    private static LaunchResult.Failed failed(byte[] data) {
        ByteBuffer in = ByteBuffer.wrap(data, 1, data.length - 1);
        int ordinal = in.getInt();
        int errno = in.getInt();
        String detail = new String(data, 9, data.length - 9, StandardCharsets.UTF_8);
        LaunchStep step = ordinal >= 0 && ordinal < LaunchStep.values().length ? LaunchStep.values()[ordinal] : LaunchStep.PLAN;
        return new LaunchResult.Failed(step, errno, detail);
    }

    /**
     * Refuses the launch instead of acknowledging it (for example after an incomplete
     * {@link LandlockOutcome}): the launcher sees the plan socket close and exits with
     * {@link #FAILURE_EXIT}; the target never runs.
     */
    public void withdraw() {
        socket.close();
    }

    /** Kills the launcher or the target it became. */
    public void kill() {
        process.pidfd().signal(9);
    }

    /** Closes our end of the plan socket (a launcher still waiting then exits) and the pidfd. */
    @Override
    public void close() {
        socket.close();
        process.close();
    }
}
