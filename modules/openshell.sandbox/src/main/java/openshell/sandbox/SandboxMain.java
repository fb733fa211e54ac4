package openshell.sandbox;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import openshell.isolation.BackendException;
import openshell.linux.LinuxException;
import openshell.linux.Namespaces;
import openshell.linux.ProcessControl;
import openshell.linux.ResourceLimit;
import openshell.protocol.ImageModules;
import openshell.protocol.Initiator;
import openshell.protocol.LaunchBundles;
import openshell.protocol.LaunchRehearsal;
import openshell.protocol.ProtocolException;
import openshell.protocol.RuntimeBundle;
import openshell.protocol.RuntimeEndpoint;
import openshell.protocol.Transport;

/**
 * The runtime's entry point, as the process driver starts it: {@code --sandbox ID --generation N
 * --channel SOCKET --bundle-stdin [--workspace DIR]}, root of fresh user, net, mount, pid, ipc and
 * uts namespaces. A warm spare, started before its sandbox exists, gets {@code --late-arguments}
 * instead of the sandbox, generation and workspace, and reads them from standard input ahead of
 * its bundle ({@link LaunchBundles#readLateArguments}); it brings {@code lo} up, runs the probes and
 * starts the resolver view and the DNS relay first (none of them depends on its sandbox), prints
 * {@link LaunchBundles#SPARE_WAITING}, and only then reads. Startup order: no core dumps and non-dumpable (its memory will hold its TLS
 * key), read the runtime launch bundle from standard input, close it, parse it and zero the bytes,
 * bring {@code lo} up, run every probe, install the resolver view and the DNS relay, and only
 * then dial the supervisor's channel and serve the Sandbox Protocol (runtime-initiated: nothing
 * in the sandbox listens).
 *
 * <p>It serves until the boundary ends (terminateBoundary, or the agent's exit) and the
 * supervisor has left or {@link #ENDED_LINGER} passed, then exits 0. Supervision is a link whose
 * supervisor takes pending connections; without it egress stops at once (connects are denied
 * ECANCELED, no relay survives). If there is none for {@link #SUPERVISOR_LOSS_GRACE} (or none came
 * within {@link #FIRST_CONTACT_WAIT}), every workload process is terminated, and it exits
 * {@link #EXIT_SUPERVISOR_LOST} (after {@link #ENDED_LINGER} if a link still reads statuses).
 */
public final class SandboxMain {
    /** Exit status for bad arguments or bundle. */
    static final int EXIT_USAGE = 64;
    /** Exit status when a probe fails: the runtime never serves on a kernel that cannot enforce. */
    static final int EXIT_PROBE_FAILED = 70;
    /** Exit status after the supervisor was lost (or never came) and the workload was terminated. */
    static final int EXIT_SUPERVISOR_LOST = 75;
    /** Longest wait for the first supervisor link after serving starts. */
    static final Duration FIRST_CONTACT_WAIT = Duration.ofSeconds(60);
    /** Longest time without any supervisor link before the workload is terminated. */
    static final Duration SUPERVISOR_LOSS_GRACE = Duration.ofSeconds(30);
    /** After the boundary ended, how long the supervisor may still read exit statuses before the runtime exits. */
    static final Duration ENDED_LINGER = Duration.ofSeconds(30);
    /** How often the main looks at the boundary and the links. */
    static final Duration WATCH_INTERVAL = Duration.ofMillis(200);
    /**
     * Who may be at the other end of the channel this runtime dials. The supervisor runs as a host
     * user that is not mapped into the sandbox's user namespace, so the kernel reports it as the
     * overflow uid, which cannot be told apart from a mapped one: the peer's uid proves nothing
     * here. What does: the runtime dials a path in the sandbox's 0700 run directory (writable only
     * by host root and this runtime), and every call must then present a sandbox-audience token
     * over TLS with this launch's identity.
     */
    static final openshell.protocol.UnixPeerPolicy SUPERVISOR_PEER = peer -> { };
    /** What the runtime reports as the enforced policy's digest: it holds no policy, the supervisor does. */
    static final String POLICY_HELD_BY_SUPERVISOR = "held-by-supervisor";

    private SandboxMain() {
    }

    /**
     * The launch arguments.
     *
     * @param sandbox    the sandbox id
     * @param generation the runtime generation
     * @param channel    the supervisor's socket
     * @param workspace  the workspace directory, if any
     */
    record LaunchArguments(String sandbox, long generation, String channel, Optional<String> workspace) {
        /** The flag that makes the runtime read {@link #LATE_OPTIONS} from standard input before its bundle. */
        static final String LATE = LaunchBundles.LATE_ARGUMENTS;
        /** What a warm spare learns only when it is given its sandbox. */
        static final Set<String> LATE_OPTIONS = Set.of("--sandbox", "--generation", "--workspace");

        /**
         * The command line, and with {@link #LATE} the late arguments read from {@code stdin}
         * (which then holds the bundle that follows them).
         */
        static LaunchArguments read(List<String> args, InputStream stdin) throws IOException {
            return parse(LaunchBundles.withLateArguments(args, stdin, LATE_OPTIONS));
        }

        static LaunchArguments parse(List<String> args) {
            String sandbox = null;
            String channel = null;
            String workspace = null;
            long generation = -1;
            boolean stdinBundle = false;
            Set<String> seen = new HashSet<>();
            for (int i = 0; i < args.size(); i++) {
                String arg = args.get(i);
                if (!seen.add(arg)) {
                    throw new IllegalArgumentException(arg + " given twice");
                }
                switch (arg) {
                    case "--bundle-stdin" -> stdinBundle = true;
                    case "--sandbox", "--generation", "--channel", "--workspace" -> {
                        if (i + 1 >= args.size()) {
                            throw new IllegalArgumentException(arg + " needs a value");
                        }
                        String value = args.get(++i);
                        switch (arg) {
                            case "--sandbox" -> sandbox = value;
                            case "--channel" -> channel = value;
                            case "--workspace" -> workspace = value;
                            default -> generation = parseGeneration(value);
                        }
                    }
                    default -> throw new IllegalArgumentException("unknown argument " + arg);
                }
            }
            if (sandbox == null || channel == null || generation < 0 || !stdinBundle) {
                throw new IllegalArgumentException("usage: --sandbox ID --generation N --channel SOCKET --bundle-stdin"
                        + " [--workspace DIR] (or " + LATE + " with " + new TreeSet<>(LATE_OPTIONS) + " first on standard input)");
            }
            return new LaunchArguments(sandbox, generation, channel, Optional.ofNullable(workspace));
        }

        private static long parseGeneration(String value) {
            try {
                return Long.parseLong(value);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("--generation must be a number: " + value);
            }
        }
    }

    /**
     * Entry point.
     *
     * @param args see the class comment
     */
    public static void main(String[] args) {
        if (args.length == 1 && SandboxCheck.FLAG.equals(args[0])) {
            System.exit(SandboxCheck.run()); // the images' health probe, see SandboxCheck
        }
        System.exit(run(List.of(args), System.in));
    }

    /** What standard input gave: the arguments (with any late ones) and the parsed bundle. */
    private record Launch(LaunchArguments arguments, RuntimeBundle bundle, int bundleBytes,
                          openshell.protocol.WorkloadConfinement confinement) {
    }

    /** Reads the late arguments (a spare's) and the bundle, zeroing the bundle's bytes once parsed. */
    private static Launch readLaunch(List<String> args, InputStream stdin) throws IOException {
        LaunchArguments arguments = LaunchArguments.read(args, stdin);
        byte[] bytes = LaunchBundles.read(stdin);
        RuntimeBundle bundle;
        openshell.protocol.WorkloadConfinement confinement;
        try {
            bundle = LaunchBundles.runtimeBundle(bytes);
            confinement = LaunchBundles.runtimeConfinement(bytes);
        } finally {
            Arrays.fill(bytes, (byte) 0);
        }
        if (!bundle.sandboxId().equals(arguments.sandbox()) || bundle.generation() != arguments.generation()) {
            throw new IllegalArgumentException("the launch bundle is for " + bundle.sandboxId() + "@" + bundle.generation()
                    + ", not " + arguments.sandbox() + "@" + arguments.generation());
        }
        return new Launch(arguments, bundle, bytes.length, confinement);
    }

    static int run(List<String> args, InputStream stdin) {
        // A warm spare prepares everything its sandbox does not decide before it waits for one.
        boolean spare = args.contains(LaunchArguments.LATE);
        // Before the bundle is read: an image that would refuse to serve never holds its secrets.
        try {
            ImageModules.check(Path.of(System.getProperty("java.home")));
        } catch (IOException e) {
            System.err.println("openshell-sandbox: refusing to serve: " + e.getMessage());
            return EXIT_PROBE_FAILED;
        }
        // JNA's start-up (next, on this thread) takes the first ~100 ms; the second core warms
        // what follows it meanwhile. Nothing secret is involved (see LaunchRehearsal.primeAhead).
        LaunchRehearsal.primeAhead();
        Launch launch = null;
        RuntimePrivilege privilege;
        StartupProbes.SeccompProbe seccomp;
        try {
            privilege = RuntimePrivilege.current();
            privilege.requireReadOnlyImage(Path.of(System.getProperty("java.home")));
            // While this process is still dumpable, before a byte of the bundle was read: a runtime
            // without capabilities (a container's user) cannot open its own /proc/<tid>/mem once it is
            // not (the kernel then gives the files to root), which is what the probe reads.
            seccomp = StartupProbes.seccomp();
        } catch (BackendException | LinuxException e) {
            System.err.println("openshell-sandbox: refusing to serve: " + e.getMessage());
            return EXIT_PROBE_FAILED;
        }
        try {
            ProcessControl.setDumpable(false);
            new ResourceLimit(ResourceLimit.CORE, 0, 0).applyTo(0);
            if (!spare) {
                launch = readLaunch(args, stdin);
            }
        } catch (IllegalArgumentException | IOException | ProtocolException e) {
            System.err.println("openshell-sandbox: " + e.getMessage());
            return EXIT_USAGE;
        }
        Path runtimeDirectory = null;
        try (WorkloadNetwork network = WorkloadNetwork.current()) {
            network.run(() -> {
                if (!Namespaces.loopbackUp()) {
                    Namespaces.bringLoopbackUp();
                }
                return null;
            });
            StartupProbes.Report report = StartupProbes.run(network, seccomp);
            // The resolver view and the DNS relay exist before any workload process could look for them.
            runtimeDirectory = RuntimeDirectory.create(channelOf(args), IdentityCapture.selfUid());
            if (privilege.canMount()) {
                ResolverView.install(runtimeDirectory, Path.of("/etc/resolv.conf"));
            } else {
                ResolverView.verify(Path.of("/etc/resolv.conf"));
            }
            // The runtime closes the broker and the process tree; the process exits right after anyway.
            NetworkBroker broker = new NetworkBroker(network, ProcessHandle.current().pid(), NetworkBroker.DECISION_WAIT);
            broker.taskMemory(report.taskMemory());
            TrustStoreView trust = TrustStoreView.system(runtimeDirectory, privilege);
            try (DnsRelay relay = DnsRelay.start(broker, NetworkBroker.DNS_RELAY)) {
                if (spare) {
                    try {
                        rehearse();
                        // Started, and waiting for its sandbox (the driver reads this line).
                        System.out.println(LaunchBundles.SPARE_WAITING);
                        System.out.flush();
                        launch = readLaunch(args, stdin);
                    } catch (IllegalArgumentException | IOException | ProtocolException e) {
                        System.err.println("openshell-sandbox: " + e.getMessage());
                        broker.close();
                        return EXIT_USAGE;
                    }
                }
                return serve(launch, report, broker, trust, relay, runtimeDirectory, privilege);
            }
        } catch (BackendException | LinuxException | ProtocolException | IOException | UncheckedIOException e) {
            System.err.println("openshell-sandbox: refusing to serve: " + e.getMessage());
            return EXIT_PROBE_FAILED;
        } finally {
            if (runtimeDirectory != null) {
                try {
                    RuntimeDirectory.remove(runtimeDirectory);
                } catch (IOException e) {
                    System.err.println("openshell-sandbox: cannot remove " + runtimeDirectory + ": " + e.getMessage());
                }
            }
        }
    }

    /** The {@code --channel} argument, which a warm spare has before its late arguments. */
    static Optional<Path> channelOf(List<String> args) {
        int at = args.indexOf("--channel");
        try {
            return at >= 0 && at + 1 < args.size() ? Optional.of(Path.of(args.get(at + 1))) : Optional.empty();
        } catch (java.nio.file.InvalidPathException e) {
            // Not a path at all: the launch's own parse refuses it (or the dial fails) with a clear error.
            return Optional.empty();
        }
    }

    /** A spare runs the launch's cold code once while it waits ({@link openshell.protocol.LaunchRehearsal}). */
    private static void rehearse() {
        try {
            openshell.protocol.LaunchRehearsal.run();
        } catch (RuntimeException | LinkageError e) {
            // It only warms up: the real launch runs the same code and reports its own failures.
            System.err.println("openshell-sandbox: the warm spare's rehearsal failed: " + e);
        }
    }

    /** From the bundle on: the workspace, the process tree, the endpoint; then serving until the exit. */
    private static int serve(Launch launch, StartupProbes.Report report, NetworkBroker broker, TrustStoreView trust,
                             DnsRelay relay, Path runtimeDirectory, RuntimePrivilege privilege) throws IOException {
        LaunchArguments arguments = launch.arguments();
        RuntimeBundle bundle = launch.bundle();
        Path workspace = arguments.workspace().map(Path::of).orElse(null);
        if (workspace == null) {
            workspace = WorkloadLaunch.freshWorkspace(bundle.workloadUid(), bundle.workloadGid());
        }
        privilege.requireIdentity(bundle.workloadUid(), bundle.workloadGid());
        // Without a mount the workload's trust bundle lies beside the runtime's files: readable, never writable.
        List<Path> besideTrust = privilege.canMount() ? List.of() : List.of(TrustStoreView.besideFile(runtimeDirectory));
        String leafName = "workload-" + arguments.generation() + "-" + ProcessHandle.current().pid();
        java.util.function.Supplier<Enclosure> leaf;
        if (privilege.canMount()) {
            // The process driver delegates a cgroup: no leaf there is a broken launch, refused now.
            Enclosure made = Enclosure.of(WorkloadLaunch.leaf(leafName));
            leaf = () -> made;
        } else {
            // A container: its cgroup v2 leaf if it has one, else its PID namespace (see Enclosure).
            leaf = () -> {
                try {
                    return Enclosure.of(WorkloadLaunch.leaf(leafName));
                } catch (BackendException e) {
                    return Enclosure.pidNamespace();
                }
            };
        }
        try (SandboxRuntime control = new SandboxRuntime(report, broker, new ProcessTree(WorkloadLaunch.command(),
                     WorkloadLaunch.template(launch.confinement(), bundle.workloadUid(), bundle.workloadGid(), workspace,
                             report.landlockAbi(), privilege, besideTrust), broker, leaf),
                     POLICY_HELD_BY_SUPERVISOR, Optional.of(trust));
             RuntimeEndpoint endpoint = RuntimeEndpoint.builder()
                     .transport(Transport.unix(Path.of(arguments.channel())))
                     .initiator(Initiator.RUNTIME)
                     .identity(bundle.identity())
                     .verifier(bundle.verifier())
                     .peerPolicy(SUPERVISOR_PEER)
                     .addService(new RuntimeService(control, arguments.generation(), Clock.systemUTC(),
                             Optional.of(Path.of(arguments.channel()))))
                     .build()) {
            endpoint.start();
            System.out.println(JsonLine.write(JsonLine.object().add("sandbox", arguments.sandbox())
                    .add("generation", arguments.generation()).add("serving", true).add("channel", arguments.channel())
                    .add("kernel", String.valueOf(report.kernel())).add("landlockAbi", report.landlockAbi())
                    .add("taskMemory", String.valueOf(report.taskMemory()))
                    .add("interfaces", String.valueOf(report.interfaces()))
                    .add("directEgressFailed", !report.egressErrors().isEmpty()).add("bundleBytes", launch.bundleBytes())
                    .add("dumpable", ProcessControl.dumpable()).add("privilege", privilege.describe()).add("dnsRelay", String.valueOf(relay.address()))
                    .add("workspace", workspace.toString()).add("runtimeDirectory", runtimeDirectory.toString())));
            System.out.flush();
            return serve(control, endpoint);
        }
    }

    /** Watches the boundary and the supervisor link until the runtime should exit; returns the exit status. */
    static int serve(SandboxRuntime control, RuntimeEndpoint endpoint) {
        return new Watch(System.nanoTime()).until(control::state, endpoint::linkCount, () -> {
            // No link, no supervisor: egress stops now, not when a stream of the dead link notices.
            if (endpoint.linkCount() == 0 && control.supervised()) {
                control.supervision(false);
            }
            return control.supervised();
        }, control::lastSupervised, control::terminate);
    }

    /** The exit rules, apart from the clock, so they can be tested without waiting. */
    static final class Watch {
        private final long started;
        private long lastLink = -1;
        private long ended = -1;
        private boolean everLinked;

        Watch(long startedNanos) {
            this.started = startedNanos;
        }

        /**
         * One look. Returns the exit status, or -1 to keep serving.
         *
         * @param now   nanoTime
         * @param state the boundary's state
         * @param links open supervisor links
         * @return exit status or -1
         */
        int look(long now, SandboxRuntime.State state, int links) {
            return look(now, state, links, true);
        }

        /**
         * One look. Returns the exit status, or -1 to keep serving.
         *
         * @param now      nanoTime
         * @param state    the boundary's state
         * @param links    open supervisor links
         * @param mediated whether a supervisor takes pending connections: a link without that is
         *                 no supervision (nobody decides), and counts as lost
         * @return exit status or -1
         */
        int look(long now, SandboxRuntime.State state, int links, boolean mediated) {
            return look(now, state, links, mediated, java.util.OptionalLong.empty());
        }

        /**
         * One look. Returns the exit status, or -1 to keep serving.
         *
         * @param now            nanoTime
         * @param state          the boundary's state
         * @param links          open supervisor links
         * @param mediated       whether a supervisor takes pending connections now
         * @param lastSupervised when the control plane last had supervision (now while it has it),
         *                       so a supervision shorter than the look interval still counts
         * @return exit status or -1
         */
        int look(long now, SandboxRuntime.State state, int links, boolean mediated, java.util.OptionalLong lastSupervised) {
            if (links > 0 && mediated) {
                everLinked = true;
                lastLink = now;
            }
            if (lastSupervised.isPresent()) {
                everLinked = true;
                lastLink = Math.max(lastLink, lastSupervised.getAsLong());
            }
            if (state == SandboxRuntime.State.ENDED) {
                if (ended < 0) {
                    ended = now;
                }
                if (links == 0 || now - ended >= ENDED_LINGER.toNanos()) {
                    return 0;
                }
                return -1;
            }
            if (!everLinked && now - started >= FIRST_CONTACT_WAIT.toNanos()) {
                return EXIT_SUPERVISOR_LOST;
            }
            if (everLinked && !(links > 0 && mediated) && now - lastLink >= SUPERVISOR_LOSS_GRACE.toNanos()) {
                return EXIT_SUPERVISOR_LOST;
            }
            return -1;
        }

        int until(java.util.function.Supplier<SandboxRuntime.State> state, java.util.function.IntSupplier links,
                  java.util.function.BooleanSupplier mediated, java.util.function.Supplier<java.util.OptionalLong> lastSupervised,
                  Runnable terminate) {
            boolean lost = false;
            while (true) {
                int status = look(System.nanoTime(), state.get(), links.getAsInt(), mediated.getAsBoolean(),
                        lastSupervised.get());
                if (status == EXIT_SUPERVISOR_LOST && !lost) {
                    System.err.println("openshell-sandbox: " + (everLinked ? "supervisor lost for " + SUPERVISOR_LOSS_GRACE
                            : "no supervisor within " + FIRST_CONTACT_WAIT) + "; terminating the workload");
                    terminate.run();
                    lost = true;
                    // A link still open may read the statuses, as after any end (ENDED_LINGER).
                    continue;
                }
                if (status >= 0) {
                    return lost ? EXIT_SUPERVISOR_LOST : status;
                }
                try {
                    Thread.sleep(WATCH_INTERVAL);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    terminate.run();
                    return EXIT_SUPERVISOR_LOST;
                }
            }
        }
    }
}
