package openshell.sandbox;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import openshell.isolation.BackendException;
import openshell.linux.LinuxException;
import openshell.linux.Namespaces;
import openshell.linux.ProcessControl;
import openshell.linux.ResourceLimit;
import openshell.protocol.ImageModules;

/**
 * The runtime's health probe, {@code openshell-sandbox --check}: the startup path up to where the
 * runtime would serve (no core dumps, the image's own modules ({@link ImageModules}), {@code lo}
 * up, every startup probe, the resolver view and the DNS relay), one JSON line of evidence, then
 * exit 0. It reads no launch bundle and opens no channel, so it always ends by itself: the runtime
 * images run it as their smoke test and as the training run of their ahead-of-time cache.
 */
final class SandboxCheck {
    /** The only argument that selects the check. */
    static final String FLAG = "--check";
    /** Exit status when every step passed. */
    static final int EXIT_OK = 0;

    private SandboxCheck() {
    }

    /** @return {@link #EXIT_OK}, or {@link SandboxMain#EXIT_PROBE_FAILED} with the reason on standard error */
    static int run() {
        try {
            RuntimePrivilege privilege = RuntimePrivilege.current();
            privilege.requireReadOnlyImage(Path.of(System.getProperty("java.home")));
            StartupProbes.SeccompProbe seccomp = StartupProbes.seccomp(); // while dumpable, see SandboxMain
            ProcessControl.setDumpable(false);
            new ResourceLimit(ResourceLimit.CORE, 0, 0).applyTo(0);
            ImageModules.check(Path.of(System.getProperty("java.home")));
            try (WorkloadNetwork network = WorkloadNetwork.current()) {
                network.run(() -> {
                    if (!Namespaces.loopbackUp()) {
                        Namespaces.bringLoopbackUp();
                    }
                    return null;
                });
                StartupProbes.Report report = StartupProbes.run(network, seccomp);
                if (!privilege.canMount()) {
                    // Nothing to mount and maybe nowhere to write (a FROM scratch image has no /tmp).
                    ResolverView.verify(Path.of("/etc/resolv.conf"));
                    try (NetworkBroker broker = new NetworkBroker(network, ProcessHandle.current().pid(), NetworkBroker.DECISION_WAIT);
                         DnsRelay relay = DnsRelay.start(broker, NetworkBroker.DNS_RELAY)) {
                        passed(report, relay, privilege);
                    }
                    return EXIT_OK;
                }
                Path runtimeDirectory = Files.createTempDirectory("openshell-check");
                try {
                    ResolverView.install(runtimeDirectory, Path.of("/etc/resolv.conf"));
                    try (NetworkBroker broker = new NetworkBroker(network, ProcessHandle.current().pid(), NetworkBroker.DECISION_WAIT);
                         DnsRelay relay = DnsRelay.start(broker, NetworkBroker.DNS_RELAY)) {
                        passed(report, relay, privilege);
                    }
                } finally {
                    // The bind mount dies with this mount namespace; the file goes now.
                    Files.deleteIfExists(runtimeDirectory.resolve("resolv.conf"));
                    Files.deleteIfExists(runtimeDirectory);
                }
            }
            return EXIT_OK;
        } catch (BackendException | LinuxException | IOException | UncheckedIOException e) {
            System.err.println("openshell-sandbox: check failed: " + e.getMessage());
            return SandboxMain.EXIT_PROBE_FAILED;
        }
    }

    private static void passed(StartupProbes.Report report, DnsRelay relay, RuntimePrivilege privilege) {
        System.out.println("{\"check\":\"passed\",\"kernel\":\"" + report.kernel() + "\",\"landlockAbi\":" + report.landlockAbi()
                + ",\"taskMemory\":\"" + report.taskMemory() + "\",\"interfaces\":\"" + report.interfaces()
                + "\",\"directEgressFailed\":" + !report.egressErrors().isEmpty()
                + ",\"dumpable\":" + ProcessControl.dumpable() + ",\"dnsRelay\":\"" + relay.address()
                + "\",\"privilege\":\"" + (privilege.canMount() ? "namespace-root" : "unprivileged") + "\"}");
        System.out.flush();
    }
}
