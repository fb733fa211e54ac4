package openshell.sandbox;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import openshell.isolation.BackendException;
import openshell.linux.BpfProgram;
import openshell.linux.Errno;
import openshell.linux.KernelFeatures;
import openshell.linux.Landlock;
import openshell.linux.LinuxException;
import openshell.linux.OwnedFd;
import openshell.linux.ProcessControl;
import openshell.linux.Seccomp;
import openshell.linux.SeccompListener;
import openshell.linux.SeccompNotification;
import openshell.linux.TaskMemory;

/**
 * What must really work on this kernel before the runtime serves anything: a seccomp listener
 * that receives a notification, reads the caller's memory and injects a descriptor (ADDFD); no
 * listener above us already (a stacked listener fails with EBUSY: a nested sandbox); the Landlock ABI (reported: the policy decides whether it is enough);
 * and a network namespace with only {@code lo}, where a direct connection out fails. Each probe
 * does the real thing, never a version check.
 */
final class StartupProbes {
    /** Longest wait for each probe's own step. */
    static final Duration PROBE_WAIT = Duration.ofSeconds(10);
    /**
     * The least Landlock ABI a CI kernel is expected to have. Not a refusal here: whether a kernel's
     * Landlock is enough is the policy's {@code landlock.compatibility}, decided with the bundle
     * ({@link StaticConfinement}).
     */
    static final int MIN_LANDLOCK_ABI = 5;
    /** Where the direct-egress probe tries to go; any address outside the box will do. */
    static final List<InetSocketAddress> EGRESS_TARGETS = List.of(
            new InetSocketAddress(address(new byte[] {1, 1, 1, 1}), 443),
            new InetSocketAddress(address(new byte[] {8, 8, 8, 8}), 53));

    private StartupProbes() {
    }

    private static InetAddress address(byte[] raw) {
        try {
            return InetAddress.getByAddress(raw);
        } catch (java.net.UnknownHostException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * What the probes found.
     *
     * @param kernel        the kernel release
     * @param landlockAbi   the Landlock ABI
     * @param taskMemory    how caller memory is read
     * @param waitKillable  whether notifications are received with WAIT_KILLABLE_RECV
     * @param interfaces    the network interfaces the workload sees
     * @param egressErrors  how each direct connection out failed
     */
    record Report(String kernel, int landlockAbi, TaskMemory.Mechanism taskMemory, boolean waitKillable,
                  List<String> interfaces, List<String> egressErrors) {
    }

    /** Runs every probe; throws UNAVAILABLE with the reason at the first that fails. */
    static Report run(WorkloadNetwork network) {
        return run(network, seccomp());
    }

    /** As above, with the seccomp probe already run (before the runtime made itself non-dumpable). */
    static Report run(WorkloadNetwork network, SeccompProbe seccomp) {
        int abi = Landlock.abiVersion();
        List<String> interfaces = network.run(StartupProbes::interfaces);
        if (!interfaces.equals(List.of("lo"))) {
            throw unavailable("the workload's network namespace must hold only lo, it holds " + interfaces);
        }
        List<String> egress = network.run(StartupProbes::directEgress);
        return new Report(kernel(), abi, seccomp.memory(), seccomp.waitKillable(), interfaces, egress);
    }

    static String kernel() {
        try {
            return Files.readString(Path.of("/proc/sys/kernel/osrelease")).trim();
        } catch (IOException e) {
            return "unknown";
        }
    }

    private static BackendException unavailable(String why) {
        return new BackendException(BackendException.Kind.UNAVAILABLE, "startup probe failed: " + why);
    }

    /** @param memory how caller memory was read  @param waitKillable the listener's receive mode */
    record SeccompProbe(TaskMemory.Mechanism memory, boolean waitKillable) {
    }

    /**
     * A thread (created for this, so its filter dies with it) installs a listener for
     * {@code connect} and calls it; this thread receives the notification, reads the sockaddr
     * from the caller's memory, injects one of its descriptors as the call's fd and answers 0.
     */
    static SeccompProbe seccomp() {
        int port = 9;
        List<OwnedFd> pipe = OwnedFd.pipe();
        List<OwnedFd> spare = OwnedFd.pipe();
        spare.get(1).close();
        // The read end only keeps the pipe alive while its write end is injected.
        pipe.get(0).close();
        try (OwnedFd write = pipe.get(1); OwnedFd placeholder = spare.get(0)) {
            CompletableFuture<SeccompListener> handed = new CompletableFuture<>();
            CompletableFuture<Integer> called = new CompletableFuture<>();
            Thread caller = Thread.ofPlatform().daemon(true).name("seccomp-probe").start(() -> {
                try {
                    ProcessControl.setNoNewPrivileges();
                    BpfProgram notifyConnect = BpfProgram.builder().loadNr()
                            .jumpIfEqual(NetworkBroker.NR_CONNECT, "notify")
                            .ret(Seccomp.RET_ALLOW).label("notify").ret(Seccomp.RET_USER_NOTIF).build();
                    handed.complete(Seccomp.installWithListener(notifyConnect));
                    called.complete(SocketCalls.connect(placeholder.value(),
                            new InetSocketAddress(InetAddress.getLoopbackAddress(), port)));
                } catch (LinuxException e) {
                    handed.completeExceptionally(e);
                    called.completeExceptionally(e);
                }
            });
            SeccompListener listener;
            try {
                listener = handed.get(PROBE_WAIT.toMillis(), TimeUnit.MILLISECONDS);
            } catch (java.util.concurrent.ExecutionException e) {
                if (e.getCause() instanceof LinuxException l && l.errno() == Errno.EBUSY) {
                    throw unavailable("this process already runs under a seccomp listener (EBUSY): "
                            + "a sandbox runtime cannot run nested inside another sandbox");
                }
                throw unavailable("seccomp listener: " + e.getCause());
            }
            try (listener) {
                if (listener.awaitPending(PROBE_WAIT) != SeccompListener.Pending.NOTIFICATION) {
                    throw unavailable("the seccomp listener received nothing");
                }
                SeccompNotification n = listener.newNotification();
                if (!listener.receive(n)) {
                    throw unavailable("the notification vanished");
                }
                TaskMemory memory = TaskMemory.probe();
                byte[] sockaddr = new byte[16];
                memory.read(n.pid(), n.argument(1), sockaddr, sockaddr.length);
                int seenPort = ByteBuffer.wrap(sockaddr, 2, 2).order(ByteOrder.BIG_ENDIAN).getShort() & 0xffff;
                if (seenPort != port || !listener.isValid(n.id())) {
                    throw unavailable("task memory read did not return the caller's sockaddr");
                }
                if (!listener.injectFd(n.id(), write.value(), placeholder.value(), true) || !listener.respondValue(n.id(), 0)) {
                    throw unavailable("ADDFD or the answer was refused");
                }
                int rc = called.get(PROBE_WAIT.toMillis(), TimeUnit.MILLISECONDS);
                String injected = Files.readSymbolicLink(Path.of("/proc/self/fd/" + placeholder.value())).toString();
                String expected = Files.readSymbolicLink(Path.of("/proc/self/fd/" + write.value())).toString();
                if (rc != 0 || !injected.equals(expected)) {
                    throw unavailable("ADDFD did not install the descriptor (" + injected + " vs " + expected + ", rc " + rc + ")");
                }
                caller.join(PROBE_WAIT.toMillis());
                return new SeccompProbe(memory.mechanism(), listener.waitKillable());
            }
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException | IOException e) {
            throw unavailable("seccomp probe: " + e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw unavailable("interrupted");
        }
    }

    /** From the calling thread's own view ({@code /proc/thread-self/net}): the JDK's list may come from another namespace. */
    private static List<String> interfaces() throws IOException {
        List<String> names = new ArrayList<>();
        List<String> lines = Files.readAllLines(Path.of("/proc/thread-self/net/dev"));
        for (String line : lines.subList(Math.min(2, lines.size()), lines.size())) {
            names.add(line.substring(0, line.indexOf(':')).trim());
        }
        Collections.sort(names);
        return names;
    }

    /** Every direct connection out must fail at once; one that connects, or hangs, means a route exists. */
    private static List<String> directEgress() {
        List<String> errors = new ArrayList<>();
        for (InetSocketAddress target : EGRESS_TARGETS) {
            try (SocketChannel channel = SocketChannel.open()) {
                channel.configureBlocking(false);
                if (channel.connect(target)) {
                    throw unavailable("a direct connection to " + target + " succeeded");
                }
                throw unavailable("a direct connection to " + target + " is in progress: a route out exists");
            } catch (IOException e) {
                errors.add(target + ": " + e.getMessage());
            }
        }
        return errors;
    }

    /** @return whether the kernel probe of {@code openshell.linux} agrees (for evidence) */
    static KernelFeatures features() {
        return KernelFeatures.probe();
    }
}
