package openshell.sandbox;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import openshell.isolation.ByteChannel;
import openshell.isolation.DenyReason;
import openshell.isolation.PendingTcpOpen;
import openshell.linux.ChildExit;
import openshell.linux.ChildProcess;
import openshell.linux.LaunchPlan;
import openshell.linux.LaunchResult;
import openshell.linux.LauncherProcess;
import openshell.linux.NamespaceType;
import openshell.linux.Namespaces;
import openshell.linux.OwnedFd;

/**
 * A sandbox for tests: a fresh network namespace with only {@code lo} (held by a sleeping
 * {@code unshare --net}), the broker serving every workload process's listener, and workload
 * processes started through the real launcher as nobody, under Landlock and the workload filter,
 * inside that namespace. The test plays the supervisor.
 */
final class TestSandbox implements AutoCloseable {
    static final Duration WAIT = Duration.ofSeconds(60);
    static final int NOBODY = 65534;

    final ChildProcess holder;
    final String netns;
    final WorkloadNetwork network;
    final NetworkBroker broker;
    private final Path resolverDirectory;
    private final List<Thread> supervisors = new ArrayList<>();
    private final AtomicBoolean stopped = new AtomicBoolean();

    TestSandbox(Duration decisionWait) {
        holder = ChildProcess.builder("/usr/bin/unshare").argv(List.of("unshare", "--net", "/usr/bin/sleep", "600")).spawn();
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (Namespaces.of(holder.pid(), NamespaceType.NET) == Namespaces.current(NamespaceType.NET)) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("unshare --net did not create a namespace");
            }
            Thread.onSpinWait();
        }
        netns = "/proc/" + holder.pid() + "/ns/net";
        network = WorkloadNetwork.enter(netns);
        // The namespace thread gets its own mount namespace, where the resolver view is installed.
        resolverDirectory = network.run(() -> {
            Namespaces.unshare(NamespaceType.MOUNT);
            Path dir = Files.createTempDirectory("openshell-sandbox-test");
            ResolverView.install(dir, Path.of("/etc/resolv.conf"));
            return dir;
        });
        broker = new NetworkBroker(network, ProcessHandle.current().pid(), decisionWait);
    }

    TestSandbox() {
        this(NetworkBroker.DECISION_WAIT);
    }

    static LauncherProcess.Command command() {
        // The runtime's own lookup: the tests launch with the launcher the runtime would find.
        return WorkloadLaunch.command();
    }

    /** A plan for {@code executable argv...} as nobody in the sandbox's network namespace. */
    LaunchPlan.Builder plan(String executable, List<String> argv, String... extraReadOnly) {
        List<String> readOnly = new ArrayList<>(List.of("/usr", "/lib", "/lib64", "/bin", "/etc", "/proc"));
        readOnly.addAll(List.of(extraReadOnly));
        return LaunchPlan.builder(executable).argv(argv)
                .envp(List.of("PATH=/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE=1"))
                .identity(NOBODY, NOBODY, List.of(NOBODY))
                .namespace(NamespaceType.NET, netns)
                .landlock(LaunchPlan.Mode.REQUIRED, readOnly, List.of("/dev/null"));
    }

    LaunchPlan.Builder bash(String script) {
        return plan("/usr/bin/bash", List.of("bash", "-c", script));
    }

    LaunchPlan.Builder python(String script) {
        return plan("/usr/bin/python3", List.of("python3", "-c", script));
    }

    /** What a workload process did. */
    record Outcome(LaunchResult started, String output, ChildExit exit) {
        @Override
        public String toString() {
            return started + " exit " + exit + "\n" + output;
        }
    }

    /** Runs a workload process to its end; its listener is served by the broker. */
    Outcome run(LaunchPlan plan) throws IOException {
        List<OwnedFd> output = OwnedFd.pipe();
        try (OwnedFd devNull = Namespaces.openPath("/dev/null"); OwnedFd read = output.get(0)) {
            LauncherProcess launcher;
            try (OwnedFd write = output.get(1)) {
                // Spawned from the namespace thread: the launcher inherits its network and mount namespaces.
                int in = devNull.value();
                int out = write.value();
                launcher = network.run(() -> LauncherProcess.start(command(), new LauncherProcess.Stdio(in, out, out, false)));
            }
            try (launcher) {
                LaunchResult ready = launcher.sendPlan(plan, WAIT);
                if (!(ready instanceof LaunchResult.Ready r)) {
                    String text = new String(read.readToEnd(1 << 20, WAIT), StandardCharsets.UTF_8);
                    return new Outcome(ready, text, launcher.process().awaitExit(WAIT).orElseThrow());
                }
                broker.serve(r.listener());
                LaunchResult started = launcher.acknowledge(WAIT);
                String text = new String(read.readToEnd(1 << 20, WAIT), StandardCharsets.UTF_8);
                ChildExit exit = launcher.process().awaitExit(WAIT).orElseThrow();
                return new Outcome(started, text, exit);
            }
        }
    }

    /** An upstream on the host side: answers each line with "echo:" + line, then closes. */
    static final class Upstream implements AutoCloseable {
        final ServerSocket server;
        final ConcurrentLinkedQueue<String> received = new ConcurrentLinkedQueue<>();

        Upstream() throws IOException {
            server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            Thread.ofPlatform().daemon(true).name("test-upstream").start(() -> {
                while (!server.isClosed()) {
                    try {
                        Socket s = server.accept();
                        Thread.ofVirtual().start(() -> serve(s));
                    } catch (IOException e) {
                        return;
                    }
                }
            });
        }

        private void serve(Socket s) {
            try (s) {
                s.setSoTimeout((int) WAIT.toMillis());
                InputStream in = s.getInputStream();
                StringBuilder line = new StringBuilder();
                for (int c; (c = in.read()) >= 0 && c != '\n'; ) {
                    line.append((char) c);
                }
                received.add(line.toString());
                s.getOutputStream().write(("echo:" + line + "\n").getBytes(StandardCharsets.UTF_8));
                s.getOutputStream().flush();
            } catch (IOException e) {
                // The test asserts on what arrived.
            }
        }

        int port() {
            return server.getLocalPort();
        }

        @Override
        public void close() throws IOException {
            server.close();
        }
    }

    /** Plays the supervisor: decides each pending open; an allowed one is pumped to the upstream. */
    void supervise(Function<PendingTcpOpen, Optional<DenyReason>> decide, int upstreamPort,
                   ConcurrentLinkedQueue<PendingTcpOpen> seen) {
        Thread t = Thread.ofPlatform().daemon(true).name("test-supervisor").start(() -> {
            while (!stopped.get()) {
                Optional<PendingTcpOpen> next;
                try {
                    next = broker.acceptTcp(Duration.ofMillis(200));
                } catch (RuntimeException e) {
                    return;
                }
                if (next.isEmpty()) {
                    continue;
                }
                PendingTcpOpen open = next.get();
                seen.add(open);
                Optional<DenyReason> denial = decide.apply(open);
                if (denial.isPresent()) {
                    open.deny(denial.get());
                    continue;
                }
                Thread.ofVirtual().start(() -> pump(open.allow(), upstreamPort));
            }
        });
        supervisors.add(t);
    }

    static void pump(ByteChannel channel, int upstreamPort) {
        try (channel; Socket upstream = new Socket(InetAddress.getLoopbackAddress(), upstreamPort)) {
            upstream.setSoTimeout((int) WAIT.toMillis());
            Thread up = Thread.ofVirtual().start(() -> copy(channel.input(), upstreamOut(upstream), true, upstream));
            copy(upstream.getInputStream(), channel.output(), false, null);
            channel.output().close();
            up.join(WAIT.toMillis());
        } catch (IOException | RuntimeException e) {
            NetworkBroker.audit("test-pump", "failed", e.toString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static OutputStream upstreamOut(Socket s) {
        try {
            return s.getOutputStream();
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private static void copy(InputStream in, OutputStream out, boolean shutdown, Socket socket) {
        try {
            in.transferTo(out);
            out.flush();
            if (shutdown && socket != null) {
                socket.shutdownOutput();
            }
        } catch (IOException e) {
            // One side closed; the other copy ends too.
        }
    }

    /**
     * @param commandLine what a process's {@code /proc/<pid>/cmdline} must satisfy (its arguments
     *                    each ended by NUL)
     * @return whether some process's command line does
     */
    static boolean anyCommandLine(java.util.function.Predicate<String> commandLine) throws IOException {
        try (java.util.stream.Stream<Path> procs = Files.list(Path.of("/proc"))) {
            return procs.filter(p -> p.getFileName().toString().chars().allMatch(Character::isDigit)).anyMatch(p -> {
                try {
                    return commandLine.test(new String(Files.readAllBytes(p.resolve("cmdline")), StandardCharsets.UTF_8));
                } catch (IOException gone) {
                    return false;
                }
            });
        }
    }

    static String sha256(String path) throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(Path.of(path))));
    }

    static String realPath(String path) throws IOException {
        return Path.of(path).toRealPath().toString();
    }

    @Override
    public void close() {
        stopped.set(true);
        broker.close();
        for (Thread t : supervisors) {
            try {
                t.join(WAIT.toMillis());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        network.close();
        holder.pidfd().signal(9);
        holder.awaitExit(WAIT);
        holder.close();
        deleteTree(resolverDirectory);
    }

    /** Removes a directory the test created, with everything in it. */
    static void deleteTree(Path dir) {
        try (var paths = Files.walk(dir)) {
            for (Path p : paths.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
