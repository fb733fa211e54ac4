package openshell.tests.conformance;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.ServiceLoader;
import java.util.stream.Stream;
import openshell.isolation.AgentSpec;
import openshell.isolation.BackendKey;
import openshell.isolation.BackendRegistry;
import openshell.isolation.NetworkMediationSource;
import openshell.isolation.RunningBoundary;
import openshell.isolation.TcpDestination;
import openshell.isolation.conformance.ConformanceTarget;
import openshell.isolation.conformance.IsolationConformance;
import openshell.isolation.conformance.Launch;
import openshell.isolation.spi.IsolationBackendProvider;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The whole isolation conformance kit, every check, against the supervisor's
 * {@code openshell-sandbox}@1 backend driving real sandbox runtimes (see {@link RuntimeLaunches}).
 * The probes are ordinary programs of the host's {@code /usr} and {@code /bin}, run as the
 * workload through the backend's own exec.
 */
@org.junit.jupiter.api.extension.ExtendWith(RuntimeLogsOnFailure.class)
class SandboxRuntimeConformanceTest implements ConformanceTarget {
    /**
     * The runtime's documented supervisor-loss bound as the kit observes it: the workload is killed
     * {@code SandboxMain.SUPERVISOR_LOSS_GRACE} (30 s) after the loss, plus its watch interval
     * (200 ms), and the exit of a tree the runtime killed is reported when it is gone, without the
     * output drain wait of a normal exit (see the openshell.sandbox module's table of limits).
     * Measured: the whole check, start and probe included, 34.0 s (it was 44 to 56 s while the
     * killed agent's exit still waited up to 10 s for its output to drain).
     */
    static final Duration SUPERVISOR_LOSS_BOUND = Duration.ofSeconds(30).plus(Duration.ofMillis(200));
    private static final BackendKey BACKEND = new BackendKey("openshell-sandbox", 1);
    private static final String PYTHON = "/usr/bin/python3";
    /**
     * Shell that sets {@code W} to the launch's workspace, found from inside: the runtime's command
     * line names it ({@code --workspace}), and a probe is asked for before the kit launches.
     */
    private static final String FIND_WORKSPACE = "for p in /proc/[0-9]*; do case \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" in"
            + " *openshell.sandbox.SandboxMain*) W=$(tr '\\0' '\\n' < $p/cmdline | sed -n '/^--workspace$/{n;p;}');"
            // The probe's own shell names the runtime's main too: the first match with a workspace wins.
            + " [ -n \"$W\" ] && break;; esac; done;"
            + " [ -n \"$W\" ] || exit 97; ";

    /**
     * Checks this pair cannot pass by design, each with why. Not skipped silently: each shows as an
     * aborted test named after the check, with its reason.
     */
    static final Map<String, String> EXCLUDED = Map.of();

    private final RuntimeLaunches launches = RuntimeLaunches.shared();

    /** Every check of the kit but {@link #EXCLUDED}, which are reported as aborted with their reason. */
    @Override
    @TestFactory
    public Stream<DynamicNode> isolationConformance() {
        Stream<DynamicNode> excluded = EXCLUDED.entrySet().stream().map(e -> DynamicTest.dynamicTest(e.getKey()
                + " (EXCLUDED)", () -> Assumptions.abort("EXCLUDED " + e.getKey() + ": " + e.getValue())));
        return Stream.concat(IsolationConformance.checks(this, name -> !EXCLUDED.containsKey(name)), excluded);
    }

    @Override
    public BackendKey backend() {
        return BACKEND;
    }

    @Override
    public IsolationBackendProvider backendProvider() {
        return ServiceLoader.load(IsolationBackendProvider.class).stream().map(ServiceLoader.Provider::get)
                .filter(p -> p.key().equals(BACKEND)).findFirst()
                .orElseThrow(() -> new IllegalStateException(BACKEND + " is not registered"));
    }

    @Override
    public BackendRegistry registry() {
        return BackendRegistry.load();
    }

    @Override
    public Launch freshLaunch(AgentSpec agent) {
        RuntimeLaunches.Live live = launches.launch(agent, RuntimeLaunches.POLICY);
        return new Launch(live.descriptor, live.context);
    }

    @Override
    public void discard(Launch launch) {
        launches.discard(launch.descriptor());
    }

    @Override
    public Optional<List<String>> connectProbe(TcpDestination destination) {
        return Optional.of(List.of("/bin/bash", "-c", "exec 3<>" + devTcp(destination)));
    }

    @Override
    public Optional<List<String>> directEgressProbe(TcpDestination destination) {
        return Optional.of(List.of(PYTHON, "-c", Probes.DIRECT_EGRESS, destination.address().getHostAddress(),
                Integer.toString(destination.port())));
    }

    @Override
    public Optional<List<String>> dnsProbe(String name) {
        return Optional.of(List.of(PYTHON, "-c", Probes.DNS_QUERY, name));
    }

    @Override
    public Optional<List<String>> unresolvedIdentityProbe(TcpDestination destination) {
        // A private copy of bash that deletes itself before it connects: its executable is gone.
        return Optional.of(List.of("/bin/sh", "-c", FIND_WORKSPACE + "copy=\"$W/vanishing-bash-$$\"; cp /bin/bash \"$copy\""
                + " && exec \"$copy\" -c \"rm -f '$copy' && exec 3<>" + devTcp(destination) + "\""));
    }

    @Override
    public Optional<List<String>> unreadableBinaryProbe(TcpDestination destination) {
        return Optional.of(List.of("/bin/sh", "-c", FIND_WORKSPACE + "exec \"$W/unreadable-bash\" -c 'exec 3<>"
                + devTcp(destination) + "'"));
    }

    @Override
    public Optional<List<String>> policyForbiddenProbe() {
        // /tmp is world-writable, so only the launch's filesystem policy (Landlock) can refuse this.
        return Optional.of(List.of("/bin/sh", "-c", "echo escaped > /tmp/openshell-conformance-forbidden-$$"));
    }

    @Override
    public Optional<List<String>> loopbackEchoProbe() {
        return Optional.of(List.of(PYTHON, "-c", Probes.LOOPBACK_ECHO));
    }

    @Override
    public Optional<Duration> supervisorLossBound() {
        return Optional.of(SUPERVISOR_LOSS_BOUND);
    }

    @Override
    public void loseSupervisor(RunningBoundary running, NetworkMediationSource source) {
        // The kit observes the end of the workload through the control link, so the supervisor's
        // mediation goes away (as when its decision loop dies) while the link stays; dropping the
        // link itself is SupervisorLossTest.
        source.close();
    }


    private static String devTcp(TcpDestination destination) {
        return "/dev/tcp/" + destination.address().getHostAddress() + "/" + destination.port();
    }
}
