package openshell.isolation.conformance.selftest;

import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;

import openshell.isolation.AgentSpec;
import openshell.isolation.BackendKey;
import openshell.isolation.BackendRegistry;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.TcpDestination;
import openshell.isolation.TopologyDescriptor;
import openshell.isolation.WorkloadIdentity;
import openshell.isolation.conformance.ConformanceTarget;
import openshell.isolation.conformance.Launch;
import openshell.isolation.spi.IsolationBackendProvider;

/**
 * The plain backend plugged into the kit. Its probes are honest: a connect probe and a "direct
 * egress" probe that really connect (nothing stops them), an echo service. It supplies no probe
 * it could not honour (unresolved identity, unreadable binary, policy, supervisor loss).
 */
public class PlainTarget implements ConformanceTarget {
    private static final SandboxSessionId STALE = SandboxSessionId.fresh();
    private static final PolicySnapshot POLICY = PolicySnapshot.of(1,
            "version: 1\nnetwork_policies: {}\n".getBytes(StandardCharsets.UTF_8));

    /** Environments provisioned and not yet discarded, across every plain target. */
    private static final Set<String> PROVISIONED = ConcurrentHashMap.newKeySet();

    private final Set<Defect> defects;
    private final PlainProvider provider;

    PlainTarget(Set<Defect> defects) {
        this.defects = Set.copyOf(defects);
        this.provider = new PlainProvider(defects);
    }

    /**
     * The service provider method: the plain backend without defects, for the command-line
     * runner.
     *
     * @return the target
     */
    public static PlainTarget provider() {
        return new PlainTarget(Set.of());
    }

    @Override
    public BackendKey backend() {
        return PlainBackend.KEY;
    }

    @Override
    public IsolationBackendProvider backendProvider() {
        return provider;
    }

    @Override
    public BackendRegistry registry() {
        return BackendRegistry.of(List.of(provider));
    }

    @Override
    public Launch freshLaunch(AgentSpec agent) {
        String environment = "plain-" + UUID.randomUUID();
        PROVISIONED.add(environment);
        SandboxSessionId session = defects.contains(Defect.STALE_SESSION) ? STALE : SandboxSessionId.fresh();
        return new Launch(TopologyDescriptor.of(PlainBackend.KEY, environment.getBytes(StandardCharsets.UTF_8)),
                new SandboxContext(new SandboxId(environment), session, POLICY, agent, WorkloadIdentity.of(65534, 65534)));
    }

    @Override
    public void discard(Launch launch) {
        PROVISIONED.remove(new String(launch.descriptor().payload(), StandardCharsets.UTF_8));
    }

    /** @return environments provisioned and not discarded */
    static Set<String> provisioned() {
        return Set.copyOf(PROVISIONED);
    }

    @Override
    public Optional<List<String>> connectProbe(TcpDestination destination) {
        return Optional.of(java(ConnectProbe.class, destination.address().getHostAddress(), String.valueOf(destination.port())));
    }

    @Override
    public Optional<List<String>> directEgressProbe(TcpDestination destination) {
        // Nothing to get around: an ordinary connect is already direct egress here.
        return connectProbe(destination);
    }

    @Override
    public Optional<List<String>> loopbackEchoProbe() {
        return Optional.of(java(EchoProbe.class));
    }

    static List<String> java(Class<?> program, String... args) {
        Path classes;
        try {
            classes = Path.of(program.getProtectionDomain().getCodeSource().getLocation().toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        return Stream.concat(Stream.of(java.toString(), "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx32m",
                "-cp", classes.toString(), program.getName()), Stream.of(args)).toList();
    }
}
