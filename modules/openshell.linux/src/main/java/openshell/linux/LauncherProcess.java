package openshell.linux;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * The parent's side of a launch: start a {@link WorkloadLauncher} JVM (possibly ahead of time, so
 * its start-up is off the critical path), send it a {@link LaunchPlan}, receive the seccomp
 * listener, acknowledge, and learn that the target was {@code execve}d (the plan socket is
 * close-on-exec, so end of stream means the exec happened).
 */
public final class LauncherProcess implements AutoCloseable {
    private final ChildProcess process;
    private final OwnedFd socket;
    private LaunchStep stage = LaunchStep.PLAN;

    private LauncherProcess(ChildProcess process, OwnedFd socket) {
        this.process = process;
        this.socket = socket;
    }

    /**
     * How to start the launcher JVM. The JNA native library is loaded from
     * {@code jnaLibraryDirectory} with unpacking disabled, never from a temporary directory.
     *
     * @param java                the {@code java} executable (absolute)
     * @param modulePath          module path entries holding {@code openshell.linux} and JNA
     * @param jnaLibraryDirectory directory holding {@code libjnidispatch.so}
     * @param jvmOptions          extra JVM options (heap, AOT cache, CDS)
     */
    public record Command(String java, List<String> modulePath, String jnaLibraryDirectory, List<String> jvmOptions) {
        /** Copies the lists. */
        public Command {
            Objects.requireNonNull(java, "java");
            modulePath = List.copyOf(modulePath);
            Objects.requireNonNull(jnaLibraryDirectory, "jnaLibraryDirectory");
            jvmOptions = List.copyOf(jvmOptions);
        }

        /** @return the launcher's argv */
        public List<String> argv() {
            List<String> argv = new ArrayList<>();
            argv.add(java);
            argv.addAll(jvmOptions);
            argv.add("--enable-native-access=com.sun.jna");
            argv.add("-Djna.boot.library.path=" + jnaLibraryDirectory);
            argv.add("-Djna.nounpack=true");
            argv.add("-Djna.noclasspath=true");
            argv.add("-Djna.platform.library.path=");
            argv.add("-p");
            argv.add(String.join(":", modulePath));
            argv.add("-m");
            argv.add("openshell.linux/" + WorkloadLauncher.class.getName());
            return argv;
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
     * Starts a launcher, which then waits (up to {@link WorkloadLauncher#PLAN_WAIT}) for its plan.
     *
     * @param command how to run it
     * @param stdio   its standard descriptors
     * @return the handle
     */
    public static LauncherProcess start(Command command, Stdio stdio) {
        List<OwnedFd> pair = UnixSockets.seqpacketPair();
        try (OwnedFd theirs = pair.get(1)) {
            ChildProcess child = ChildProcess.builder(command.java())
                    .argv(command.argv())
                    .descriptor(0, stdio.stdin())
                    .descriptor(1, stdio.stdout())
                    .descriptor(2, stdio.stderr())
                    .descriptor(WorkloadLauncher.PLAN_FD, theirs.value())
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
        if (stage != LaunchStep.PLAN) {
            throw new LinuxException("launcher", Errno.EINVAL, "plan already sent");
        }
        byte[] encoded = plan.encode();
        byte[] message = new byte[encoded.length + 1];
        message[0] = WorkloadLauncher.MSG_PLAN;
        System.arraycopy(encoded, 0, message, 1, encoded.length);
        stage = LaunchStep.LISTENER_HANDOFF;
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
        if (data[0] == WorkloadLauncher.MSG_FAILED) {
            m.fds().forEach(OwnedFd::close);
            return failed(data);
        }
        if (data[0] != WorkloadLauncher.MSG_READY || m.fds().size() != 1 || data.length != 39) {
            m.fds().forEach(OwnedFd::close);
            return new LaunchResult.Failed(LaunchStep.LISTENER_HANDOFF, Errno.EINVAL, "malformed ready message");
        }
        ByteBuffer in = ByteBuffer.wrap(data, 1, data.length - 1);
        boolean killable = in.get() != 0;
        LandlockOutcome landlock = new LandlockOutcome(in.getInt(), in.getLong(), in.getLong(), in.getLong(),
                in.getLong(), in.get() != 0);
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
            UnixSockets.send(socket.value(), new byte[] {WorkloadLauncher.MSG_ACK});
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
        return data[0] == WorkloadLauncher.MSG_FAILED ? failed(data)
                : new LaunchResult.Failed(LaunchStep.EXEC, Errno.EINVAL, "unexpected message");
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
     * {@link WorkloadLauncher#FAILURE_EXIT}; the target never runs.
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
