package openshell.sandbox;

import java.io.IOException;
import java.io.InputStream;
import java.util.List;
import java.util.Optional;
import openshell.isolation.BackendException;
import openshell.linux.LinuxException;
import openshell.linux.Namespaces;
import openshell.linux.ProcessControl;
import openshell.linux.ResourceLimit;

/**
 * The runtime's entry point, as the process driver starts it: {@code --sandbox ID --generation N
 * --channel SOCKET --bundle-stdin [--workspace DIR]}, root of fresh user, net, mount, pid, ipc and
 * uts namespaces. Startup order: no core dumps and non-dumpable (its memory will hold its TLS
 * key), read the launch bundle from standard input and close it, bring {@code lo} up, run every
 * probe, and only then serve.
 */
public final class SandboxMain {
    /** Largest launch bundle read from standard input; a larger one is refused. */
    static final int MAX_BUNDLE_BYTES = 1 << 20;
    /** Exit status for bad arguments or bundle. */
    static final int EXIT_USAGE = 64;
    /** Exit status when a probe fails: the runtime never serves on a kernel that cannot enforce. */
    static final int EXIT_PROBE_FAILED = 70;
    /** Exit status after successful probes while no protocol adapter is present (issue #4). */
    static final int EXIT_NO_PROTOCOL = 69;

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
        static LaunchArguments parse(List<String> args) {
            String sandbox = null;
            String channel = null;
            String workspace = null;
            long generation = -1;
            boolean stdinBundle = false;
            for (int i = 0; i < args.size(); i++) {
                String arg = args.get(i);
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
                throw new IllegalArgumentException("usage: --sandbox ID --generation N --channel SOCKET --bundle-stdin [--workspace DIR]");
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

    static int run(List<String> args, InputStream stdin) {
        LaunchArguments arguments;
        byte[] bundle;
        try {
            ProcessControl.setDumpable(false);
            new ResourceLimit(ResourceLimit.CORE, 0, 0).applyTo(0);
            arguments = LaunchArguments.parse(args);
            bundle = readBundle(stdin);
        } catch (IllegalArgumentException | IOException e) {
            System.err.println("openshell-sandbox: " + e.getMessage());
            return EXIT_USAGE;
        }
        StartupProbes.Report report;
        try (WorkloadNetwork network = WorkloadNetwork.current()) {
            network.run(() -> {
                if (!Namespaces.loopbackUp()) {
                    Namespaces.bringLoopbackUp();
                }
                return null;
            });
            report = StartupProbes.run(network);
            // The resolver view and the DNS relay exist before any workload process could look for them.
            java.nio.file.Path runtimeDirectory = java.nio.file.Files.createTempDirectory("openshell-sandbox");
            ResolverView.install(runtimeDirectory, java.nio.file.Path.of("/etc/resolv.conf"));
            try (NetworkBroker broker = new NetworkBroker(network, ProcessHandle.current().pid(), NetworkBroker.DECISION_WAIT);
                 DnsRelay relay = DnsRelay.start(broker, NetworkBroker.DNS_RELAY)) {
                System.out.println("{\"sandbox\":\"" + arguments.sandbox() + "\",\"generation\":" + arguments.generation()
                        + ",\"kernel\":\"" + report.kernel() + "\",\"landlockAbi\":" + report.landlockAbi()
                        + ",\"taskMemory\":\"" + report.taskMemory() + "\",\"interfaces\":\"" + report.interfaces()
                        + "\",\"directEgressFailed\":" + !report.egressErrors().isEmpty() + ",\"bundleBytes\":" + bundle.length
                        + ",\"dumpable\":" + ProcessControl.dumpable() + ",\"dnsRelay\":\"" + relay.address()
                        + "\",\"resolvConf\":\"" + java.nio.file.Files.readString(java.nio.file.Path.of("/etc/resolv.conf"))
                                .lines().filter(l -> l.startsWith("nameserver")).findFirst().orElse("") + "\"}");
                System.out.flush();
            } finally {
                // Nothing serves yet (issue #4): the view dies with this mount namespace, the file goes now.
                java.nio.file.Files.deleteIfExists(runtimeDirectory.resolve("resolv.conf"));
                java.nio.file.Files.deleteIfExists(runtimeDirectory);
            }
        } catch (BackendException | LinuxException | IOException | java.io.UncheckedIOException e) {
            System.err.println("openshell-sandbox: refusing to serve: " + e.getMessage());
            return EXIT_PROBE_FAILED;
        }
        // Serving needs the Sandbox Protocol adapter over RuntimeControl (issue #4), not in this build.
        System.err.println("openshell-sandbox: probes passed; no Sandbox Protocol adapter in this build (issue #4)");
        return EXIT_NO_PROTOCOL;
    }

    /** Reads the whole bundle, at most {@link #MAX_BUNDLE_BYTES}, and closes standard input. */
    static byte[] readBundle(InputStream stdin) throws IOException {
        try (stdin) {
            byte[] bundle = stdin.readNBytes(MAX_BUNDLE_BYTES + 1);
            if (bundle.length > MAX_BUNDLE_BYTES) {
                throw new IllegalArgumentException("launch bundle larger than " + MAX_BUNDLE_BYTES + " bytes");
            }
            if (bundle.length == 0) {
                throw new IllegalArgumentException("empty launch bundle on standard input");
            }
            return bundle;
        }
    }
}
