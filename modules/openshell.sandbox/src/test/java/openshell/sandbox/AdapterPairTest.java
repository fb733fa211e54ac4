package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import openshell.isolation.AgentSpec;
import openshell.isolation.BackendException;
import openshell.isolation.BackendRegistry;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.BoundBoundary;
import openshell.isolation.DenyReason;
import openshell.isolation.ExecSession;
import openshell.isolation.ExecSpec;
import openshell.isolation.ExitStatus;
import openshell.isolation.IdentityResolution;
import openshell.isolation.NetworkMediationSource;
import openshell.isolation.PendingDnsQuery;
import openshell.isolation.PendingTcpOpen;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.ReadyBoundary;
import openshell.isolation.RunningBoundary;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.TopologyDescriptor;
import openshell.isolation.VerifiedTopologyDescriptor;
import openshell.isolation.WorkloadIdentity;
import openshell.isolation.spi.IsolationBackendProvider;
import openshell.protocol.Initiator;
import openshell.protocol.LaunchTls;
import openshell.protocol.RuntimeEndpoint;
import openshell.protocol.SupervisorEndpoint;
import openshell.protocol.TokenAudience;
import openshell.protocol.TokenGrant;
import openshell.protocol.TokenIssuer;
import openshell.protocol.TokenSlot;
import openshell.protocol.TokenVerifier;
import openshell.protocol.Transport;
import openshell.supervisor.OpenShellRuntimeBackend;
import org.junit.jupiter.api.Test;

/**
 * Both adapters over a real Unix socket with TLS and real tokens, in one JVM: the supervisor's
 * {@code OpenShellRuntimeBackend} drives this runtime's {@link RuntimeService} over
 * {@link SandboxRuntime}, whose workload processes run under the real launcher, seccomp and
 * Landlock in a fresh network namespace.
 */
class AdapterPairTest {
    private static final String SANDBOX = "sbx-pair";
    private static final long GENERATION = 1;
    private static final String ISSUER = "openshell-gateway";
    private static final Duration WAIT = TestSandbox.WAIT;
    /** Blocking readers get their own threads: the common pool has one worker on two cores. */
    private static final java.util.concurrent.Executor VIRTUAL = task -> Thread.ofVirtual().start(task);
    private static final String ALLOWED = "10.20.30.40";
    private static final String DENIED = "10.20.30.41";

    /** The runtime's protocol side and the supervisor's endpoint on one Unix socket (runtime-initiated). */
    private static final class Pair implements AutoCloseable {
        final Path directory = Files.createTempDirectory("osa");
        final TokenIssuer issuer = TokenIssuer.generate(ISSUER, "gateway-key-1", Clock.systemUTC());
        final LaunchTls tls = LaunchTls.issue("session-pair");
        final SupervisorEndpoint supervisor;
        final RuntimeEndpoint runtime;

        Pair(RuntimeControl control) throws Exception {
            Transport where = Transport.unix(directory.resolve("supervisor.sock"));
            TokenSlot slot = new TokenSlot(issuer.mintPair(new TokenGrant(SANDBOX, GENERATION, "lineage-1", "supervisor",
                    Duration.ofMinutes(30)), 1), Clock.systemUTC());
            supervisor = SupervisorEndpoint.builder().transport(where).initiator(Initiator.RUNTIME)
                    .pin(tls.pin()).tokens(slot).build();
            supervisor.listen();
            TokenVerifier verifier = TokenVerifier.builder().key(issuer.verificationKey()).issuer(ISSUER)
                    .audience(TokenAudience.SANDBOX).sandboxId(SANDBOX).runtimeGeneration(GENERATION).build();
            runtime = RuntimeEndpoint.builder().transport(where).initiator(Initiator.RUNTIME).identity(tls.runtime())
                    .verifier(verifier).addService(new RuntimeService(control, GENERATION, Clock.systemUTC())).build().start();
        }

        @Override
        public void close() throws java.io.IOException {
            runtime.close();
            supervisor.close();
            try (var files = Files.list(directory)) {
                for (Path f : files.toList()) {
                    Files.deleteIfExists(f);
                }
            }
            Files.deleteIfExists(directory);
        }
    }

    private static VerifiedTopologyDescriptor descriptor() {
        BackendRegistry registry = BackendRegistry.of(List.of(new OpenShellRuntimeBackend.Provider()));
        return registry.verify(TopologyDescriptor.of(OpenShellRuntimeBackend.KEY, new byte[0]), OpenShellRuntimeBackend.KEY);
    }

    /** What attach -> mediation -> confirm -> startAgent gave. */
    private record Started(NetworkMediationSource mediation, RunningBoundary running) {
    }

    /** Runs the lifecycle up to Running over the protocol, asserting each step on the way. */
    private static Started start(SandboxRuntime control, Pair pair, PolicySnapshot policy, StartupProbes.Report report) {
        OpenShellRuntimeBackend backend = OpenShellRuntimeBackend.over(d -> pair.supervisor.connect());
        SandboxContext context = new SandboxContext(new SandboxId(SANDBOX), SandboxSessionId.fresh(), policy,
                new AgentSpec(List.of("/usr/bin/sleep", "600"), Map.of("PATH", "/usr/bin:/bin"), "/"),
                new WorkloadIdentity(TestSandbox.NOBODY, TestSandbox.NOBODY, List.of()));
        BoundBoundary bound = backend.attach(descriptor(), context);
        assertEquals(SandboxRuntime.State.ATTACHED, control.state());
        NetworkMediationSource mediation = bound.mediation();
        ReadyBoundary ready = bound.confirm();
        assertTrue(ready.evidence().directEgressFailed());
        assertEquals(report.kernel(), ready.evidence().kernel());
        assertEquals(policy.sha256(), ready.evidence().policySha256());
        assertTrue(ready.evidence().controls().stream().anyMatch(c -> c.mechanism().contains("Landlock ABI " + report.landlockAbi())),
                ready.evidence().toString());
        assertEquals(BackendException.Kind.INVALID, assertThrows(BackendException.class, bound::confirm).kind(),
                "a consumed handle refuses");
        RunningBoundary running = ready.startAgent();
        assertTrue(running.running());
        return new Started(mediation, running);
    }

    @Test
    void attachMediationConfirmStartAgentAndExecWithSeparateOutputAndStatus() throws Exception {
        PolicySnapshot policy = PolicySnapshot.of(1, "version: 1\n".getBytes(StandardCharsets.UTF_8));
        try (TestSandbox sandbox = new TestSandbox()) {
            StartupProbes.Report report = StartupProbes.run(sandbox.network);
            try (SandboxRuntime control = new SandboxRuntime(report, sandbox.broker, ProcessTreeTest.tree(sandbox), policy.sha256());
                 Pair pair = new Pair(control)) {
                Started started = start(control, pair, policy, report);
                NetworkMediationSource mediation = started.mediation();
                RunningBoundary running = started.running();

                try (ExecSession echo = running.exec().exec(ExecSpec.builder(List.of("/usr/bin/bash", "-c", "echo out-$0; echo err-$0 >&2; exit 7", "x"))
                        .environment(Map.of("PATH", "/usr/bin:/bin")).build())) {
                    CompletableFuture<byte[]> err = CompletableFuture.supplyAsync(() -> readAll(echo.stderr()), VIRTUAL);
                    assertEquals("out-x\n", new String(echo.stdout().readAllBytes(), StandardCharsets.UTF_8));
                    assertEquals("err-x\n", new String(err.get(WAIT.toSeconds(), TimeUnit.SECONDS), StandardCharsets.UTF_8));
                    assertEquals(Optional.of(new ExitStatus.Exited(7)), echo.process().awaitExit(WAIT));
                }

                running.terminate();
                assertEquals(SandboxRuntime.State.ENDED, control.state());
                mediation.close();
            }
        }
    }

    /**
     * The whole mediated path over the protocol, with the runtime holding more live workload
     * processes than the virtual-thread scheduler has carriers (each has a blocking exit watch):
     * a name resolved through the DNS relay and answered on the Dns stream; an allowed connect
     * announced on PendingConnections, decided on its Relay stream and relayed both ways to a real
     * upstream on the host; a denied connect failing with EACCES in the workload.
     */
    @Test
    void mediatedDnsAllowedAndDeniedConnectsCrossTheProtocol() throws Exception {
        PolicySnapshot policy = PolicySnapshot.of(1, "version: 1\n".getBytes(StandardCharsets.UTF_8));
        try (TestSandbox sandbox = new TestSandbox(); TestSandbox.Upstream upstream = new TestSandbox.Upstream();
             DnsRelay relay = DnsRelay.start(sandbox.broker, NetworkBroker.DNS_RELAY)) {
            assertEquals(NetworkBroker.DNS_RELAY, relay.address());
            StartupProbes.Report report = StartupProbes.run(sandbox.network);
            try (SandboxRuntime control = new SandboxRuntime(report, sandbox.broker, ProcessTreeTest.tree(sandbox), policy.sha256());
                 Pair pair = new Pair(control)) {
                Started started = start(control, pair, policy, report);
                NetworkMediationSource mediation = started.mediation();
                RunningBoundary running = started.running();
                // Before the fix these alone froze the runtime: one blocked native wait per process pinned a carrier.
                List<ExecSession> sleepers = new ArrayList<>();
                for (int i = 0; i < Runtime.getRuntime().availableProcessors(); i++) {
                    sleepers.add(running.exec().exec(ExecSpec.builder(List.of("/usr/bin/sleep", "600"))
                            .environment(Map.of("PATH", "/usr/bin:/bin")).build()));
                }

                ConcurrentLinkedQueue<PendingTcpOpen> opens = new ConcurrentLinkedQueue<>();
                ConcurrentLinkedQueue<PendingDnsQuery> queries = new ConcurrentLinkedQueue<>();
                AtomicBoolean stop = new AtomicBoolean();
                Thread tcp = Thread.ofVirtual().name("test-tcp-decisions").start(() -> {
                    while (!stop.get()) {
                        Optional<PendingTcpOpen> next = mediation.acceptTcp(Duration.ofMillis(200));
                        if (next.isEmpty()) {
                            continue;
                        }
                        opens.add(next.get());
                        if (next.get().destination().address().getHostAddress().equals(ALLOWED)) {
                            Thread.ofVirtual().start(() -> TestSandbox.pump(next.get().allow(), upstream.port()));
                        } else {
                            next.get().deny(DenyReason.POLICY);
                        }
                    }
                });
                Thread dns = Thread.ofVirtual().name("test-dns-answers").start(() -> {
                    while (!stop.get()) {
                        Optional<PendingDnsQuery> next = mediation.acceptDns(Duration.ofMillis(200));
                        next.ifPresent(q -> {
                            queries.add(q);
                            q.answer(DnsRelayTest.answer(q.query()));
                        });
                    }
                });
                String script = String.join("\n",
                        "getent hosts example.test",
                        "exec 3<>/dev/tcp/" + ALLOWED + "/80 && echo hello >&3 && read -r line <&3 && echo \"got:$line\"",
                        "exec 3<&-",
                        "/usr/bin/python3 -c \"$0\"");
                String denied = String.join("\n",
                        "import socket, errno",
                        "s = socket.socket()",
                        "try:",
                        "    s.connect(('" + DENIED + "', 80)); print('connected')",
                        "except OSError as e: print('denied', errno.errorcode[e.errno])");
                try (ExecSession client = running.exec().exec(ExecSpec.builder(List.of("/usr/bin/bash", "-c", script, denied))
                        .environment(Map.of("PATH", "/usr/bin:/bin")).build())) {
                    CompletableFuture<byte[]> err = CompletableFuture.supplyAsync(() -> readAll(client.stderr()), VIRTUAL);
                    String out = new String(CompletableFuture.supplyAsync(() -> readAll(client.stdout()), VIRTUAL)
                            .get(WAIT.toSeconds(), TimeUnit.SECONDS), StandardCharsets.UTF_8);
                    assertEquals(List.of(ALLOWED + " example.test", "got:echo:hello", "denied EACCES"),
                            out.lines().map(l -> l.trim().replaceAll("\\s+", " ")).toList(),
                            () -> out + new String(err.getNow(new byte[0]), StandardCharsets.UTF_8));
                    assertEquals(Optional.of(new ExitStatus.Exited(0)), client.process().awaitExit(WAIT));
                } finally {
                    stop.set(true);
                    tcp.join(WAIT);
                    dns.join(WAIT);
                }
                assertEquals(List.of("hello"), List.copyOf(upstream.received), "the upstream read what the workload wrote");
                assertEquals(2, opens.size(), "one announcement per mediated connect: " + opens);
                PendingTcpOpen allowed = opens.peek();
                assertEquals(InetAddress.getByName(ALLOWED), allowed.destination().address());
                assertEquals(80, allowed.destination().port());
                assertTrue(allowed.socket().inode() > 0);
                BinaryIdentity identity = assertInstanceOf(IdentityResolution.Resolved.class, allowed.identity()).identity();
                assertEquals(TestSandbox.realPath("/usr/bin/bash"), identity.path());
                assertEquals(Optional.of(TestSandbox.sha256(TestSandbox.realPath("/usr/bin/bash"))), identity.executable().sha256());
                BinaryIdentity deniedIdentity = assertInstanceOf(IdentityResolution.Resolved.class,
                        List.copyOf(opens).get(1).identity()).identity();
                assertEquals(TestSandbox.realPath("/usr/bin/python3"), deniedIdentity.path());
                assertTrue(queries.stream().anyMatch(q -> new String(q.query(), StandardCharsets.ISO_8859_1).contains("example")),
                        "the name query crossed the Dns stream");
                assertEquals("/usr/bin/getent", assertInstanceOf(IdentityResolution.Resolved.class,
                        queries.peek().identity()).identity().path());

                sleepers.forEach(ExecSession::close);
                running.terminate();
                mediation.close();
            }
        }
    }

    @Test
    void theRegisteredProviderNamesTheBackendAndRefusesWithoutLaunchMaterial() {
        IsolationBackendProvider provider = new OpenShellRuntimeBackend.Provider();
        assertEquals("openshell-sandbox", provider.key().name());
        assertEquals(1, provider.key().version());
        PolicySnapshot policy = PolicySnapshot.of(1, new byte[] {1});
        SandboxContext context = new SandboxContext(new SandboxId(SANDBOX), SandboxSessionId.fresh(), policy,
                AgentSpec.of(List.of("/usr/bin/true")), new WorkloadIdentity(1000, 1000, List.of()));
        assertEquals(BackendException.Kind.UNAVAILABLE, assertThrows(BackendException.class,
                () -> provider.create().attach(descriptor(), context)).kind());
    }

    private static byte[] readAll(java.io.InputStream in) {
        try {
            return in.readAllBytes();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
