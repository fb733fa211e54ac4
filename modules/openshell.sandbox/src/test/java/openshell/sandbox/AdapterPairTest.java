package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
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
import java.util.concurrent.atomic.AtomicLong;
import openshell.isolation.AgentSpec;
import openshell.isolation.BackendException;
import openshell.isolation.BackendRegistry;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.BoundBoundary;
import openshell.isolation.ByteChannel;
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
import openshell.protocol.CreditedStream;
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
    /** More than the credit window and every socket buffer on the way can hold. */
    private static final long FLOOD_BYTES = 256L * 1024 * 1024;

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
        return start(control, pair, policy, report, new AgentSpec(List.of("/usr/bin/sleep", "600"), Map.of("PATH", "/usr/bin:/bin"), "/"),
                link -> { });
    }

    private static Started start(SandboxRuntime control, Pair pair, PolicySnapshot policy, StartupProbes.Report report,
                                 AgentSpec agent, java.util.function.Consumer<openshell.protocol.SupervisorLink> links) {
        OpenShellRuntimeBackend backend = OpenShellRuntimeBackend.over(d -> {
            openshell.protocol.SupervisorLink link = pair.supervisor.connect();
            links.accept(link);
            return link;
        });
        SandboxContext context = new SandboxContext(new SandboxId(SANDBOX), SandboxSessionId.fresh(), policy, agent,
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

    private interface BoundaryBody {
        void run(RunningBoundary running) throws Exception;
    }

    /** A started pair (attach, confirm, agent) around the body, terminated after it. */
    private static void withRunningBoundary(BoundaryBody body) throws Exception {
        PolicySnapshot policy = PolicySnapshot.of(1, "version: 1\n".getBytes(StandardCharsets.UTF_8));
        try (TestSandbox sandbox = new TestSandbox()) {
            StartupProbes.Report report = StartupProbes.run(sandbox.network);
            try (SandboxRuntime control = new SandboxRuntime(report, sandbox.broker, ProcessTreeTest.tree(sandbox), policy.sha256());
                 Pair pair = new Pair(control)) {
                Started started = start(control, pair, policy, report);
                RunningBoundary running = started.running();
                body.run(running);
                running.terminate();
                started.mediation().close();
            }
        }
    }

    /**
     * A wait that ends before the process does gives its runtime control thread back: the
     * supervisor's exit watch asks again and again while an agent runs for hours, and every wait
     * that kept its thread for MAX_WAIT_CALL would have used the runtime's control threads up.
     */
    @Test
    void waitsThatEndBeforeTheProcessHoldNoControlThread() throws Exception {
        withRunningBoundary(running -> {
            int before = RuntimeService.activeControlThreads();
            try (ExecSession sleep = running.exec().exec(ExecSpec.builder(List.of("/bin/sleep", "120"))
                    .environment(Map.of("PATH", "/usr/bin:/bin")).build())) {
                for (int i = 0; i < 10; i++) {
                    assertEquals(Optional.empty(), sleep.process().awaitExit(Duration.ofMillis(400)), "still running");
                }
                long deadline = System.nanoTime() + WAIT.toNanos();
                while (RuntimeService.activeControlThreads() > before && System.nanoTime() < deadline) {
                    Thread.sleep(20);
                }
                assertTrue(RuntimeService.activeControlThreads() <= before,
                        "control threads still held by ended waits: " + RuntimeService.activeControlThreads()
                                + " (before: " + before + ")");
                sleep.process().signal(openshell.isolation.ProcessSignal.KILL);
                assertEquals(Optional.of(new ExitStatus.Signaled(9)), sleep.process().awaitExit(WAIT));
            }
        });
    }

    /** Process I/O under message credits: a MiB through stdin and back on stdout, far beyond one credit window. */
    @Test
    void aMebibyteCrossesStdinAndStdoutUnderCredits() throws Exception {
        withRunningBoundary(running -> {
            byte[] data = new byte[1 << 20];
            for (int i = 0; i < data.length; i++) {
                data[i] = (byte) (i * 31 + (i >> 12));
            }
            try (ExecSession cat = running.exec().exec(ExecSpec.builder(List.of("/usr/bin/cat"))
                    .environment(Map.of("PATH", "/usr/bin:/bin")).build())) {
                CompletableFuture<byte[]> out = CompletableFuture.supplyAsync(() -> readAll(cat.stdout()), VIRTUAL);
                cat.stdin().write(data);
                cat.stdin().close();
                org.junit.jupiter.api.Assertions.assertArrayEquals(data, out.get(WAIT.toSeconds(), TimeUnit.SECONDS));
                assertEquals(Optional.of(new ExitStatus.Exited(0)), cat.process().awaitExit(WAIT));
            }
        });
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

    /**
     * A workload that stops reading stalls only its own relay: while the supervisor's side of
     * that relay is blocked writing (out of credit, the runtime's socket buffers full), an exec
     * (control calls plus a process stream) and a DNS query on the same link still complete.
     */
    @Test
    void aWorkloadThatStopsReadingFreezesNeitherControlNorDns() throws Exception {
        PolicySnapshot policy = PolicySnapshot.of(1, "version: 1\n".getBytes(StandardCharsets.UTF_8));
        try (TestSandbox sandbox = new TestSandbox();
             DnsRelay relay = DnsRelay.start(sandbox.broker, NetworkBroker.DNS_RELAY)) {
            assertEquals(NetworkBroker.DNS_RELAY, relay.address());
            StartupProbes.Report report = StartupProbes.run(sandbox.network);
            try (SandboxRuntime control = new SandboxRuntime(report, sandbox.broker, ProcessTreeTest.tree(sandbox), policy.sha256());
                 Pair pair = new Pair(control)) {
                Started started = start(control, pair, policy, report);
                NetworkMediationSource mediation = started.mediation();
                RunningBoundary running = started.running();
                AtomicLong flooded = new AtomicLong();
                CompletableFuture<Thread> flood = CompletableFuture.supplyAsync(() -> {
                    long deadline = System.nanoTime() + WAIT.toNanos();
                    while (System.nanoTime() < deadline) {
                        Optional<PendingTcpOpen> next = mediation.acceptTcp(Duration.ofMillis(200));
                        if (next.isPresent()) {
                            ByteChannel channel = next.get().allow();
                            return Thread.ofVirtual().name("test-flood").start(() -> {
                                byte[] block = new byte[64 * 1024];
                                try (channel) {
                                    while (flooded.get() < FLOOD_BYTES) {
                                        channel.output().write(block);
                                        flooded.addAndGet(block.length);
                                    }
                                } catch (java.io.IOException e) {
                                    // the relay closed when the workload was terminated
                                }
                            });
                        }
                    }
                    throw new AssertionError("no pending connection within " + WAIT);
                }, VIRTUAL);
                AtomicBoolean stop = new AtomicBoolean();
                Thread dns = Thread.ofVirtual().name("test-dns-answers").start(() -> {
                    while (!stop.get()) {
                        mediation.acceptDns(Duration.ofMillis(200)).ifPresent(q -> q.answer(DnsRelayTest.answer(q.query())));
                    }
                });
                try (ExecSession sink = running.exec().exec(ExecSpec.builder(List.of("/usr/bin/python3", "-c", String.join("\n",
                                "import socket, time",
                                "s = socket.create_connection(('" + ALLOWED + "', 80), timeout=60)",
                                "print('connected', flush=True)",
                                "time.sleep(600)")))
                        .environment(Map.of("PATH", "/usr/bin:/bin")).build())) {
                    String first = CompletableFuture.supplyAsync(() -> firstLine(sink.stdout()), VIRTUAL)
                            .get(WAIT.toSeconds(), TimeUnit.SECONDS);
                    assertEquals("connected", first);
                    Thread flooding = flood.get(WAIT.toSeconds(), TimeUnit.SECONDS);
                    long deadline = System.nanoTime() + WAIT.toNanos();
                    while (flooded.get() < CreditedStream.MAX_IN_FLIGHT * (long) CreditedStream.MAX_CHUNK_BYTES
                            && System.nanoTime() < deadline) {
                        Thread.onSpinWait();
                    }

                    try (ExecSession probe = running.exec().exec(ExecSpec.builder(List.of("/usr/bin/bash", "-c",
                            "echo ok; getent hosts example.test")).environment(Map.of("PATH", "/usr/bin:/bin")).build())) {
                        String out = new String(CompletableFuture.supplyAsync(() -> readAll(probe.stdout()), VIRTUAL)
                                .get(WAIT.toSeconds(), TimeUnit.SECONDS), StandardCharsets.UTF_8);
                        assertEquals(List.of("ok", ALLOWED + " example.test"),
                                out.lines().map(l -> l.trim().replaceAll("\\s+", " ")).toList());
                        assertEquals(Optional.of(new ExitStatus.Exited(0)), probe.process().awaitExit(WAIT));
                    }
                    assertTrue(flooding.isAlive() && flooded.get() < FLOOD_BYTES,
                            "the relay was still stalled while exec and DNS completed: " + flooded.get() + " bytes written");
                    running.terminate();
                    flooding.join(WAIT);
                    assertTrue(!flooding.isAlive(), "terminating the workload ends its relay");
                } finally {
                    stop.set(true);
                    dns.join(WAIT);
                }
                mediation.close();
            }
        }
    }

    private static String firstLine(java.io.InputStream in) {
        try {
            return new java.io.BufferedReader(new java.io.InputStreamReader(in, StandardCharsets.UTF_8)).readLine();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
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

    /**
     * The agent's output is drained while nobody is attached (so the agent never blocks on a full
     * pipe) and kept up to {@link OutputJournal#MAX_RETAINED_BYTES}: a first attach over the
     * protocol gets an OutputLost for what no longer fits and then the kept tail, byte for byte;
     * a reattach that resumes from an offset gets exactly the rest; an exec cannot resume.
     */
    @Test
    void theAgentsOutputIsKeptForALateAttachAndAResume() throws Exception {
        PolicySnapshot policy = PolicySnapshot.of(1, "version: 1\n".getBytes(StandardCharsets.UTF_8));
        byte[] line = "0123456789abcdef\n".getBytes(StandardCharsets.US_ASCII);
        long total = 3L * OutputJournal.MAX_RETAINED_BYTES;
        AgentSpec agent = new AgentSpec(List.of("/usr/bin/bash", "-c", "yes 0123456789abcdef | head -c " + total + "; exec sleep 600"),
                Map.of("PATH", "/usr/bin:/bin"), "/");
        try (TestSandbox sandbox = new TestSandbox()) {
            StartupProbes.Report report = StartupProbes.run(sandbox.network);
            try (SandboxRuntime control = new SandboxRuntime(report, sandbox.broker, ProcessTreeTest.tree(sandbox), policy.sha256());
                 Pair pair = new Pair(control)) {
                java.util.concurrent.atomic.AtomicReference<openshell.protocol.SupervisorLink> link = new java.util.concurrent.atomic.AtomicReference<>();
                Started started = start(control, pair, policy, report, agent, link::set);
                long agentId = control.agent();
                OutputJournal.Pair journals = control.retainedOutput(agentId).orElseThrow();
                long deadline = System.nanoTime() + WAIT.toNanos();
                while (journals.stdout().written() < total) {
                    assertTrue(System.nanoTime() < deadline, "the agent's output must be drained with nobody attached, got "
                            + journals.stdout().written() + " of " + total + " bytes");
                    Thread.sleep(20);
                }
                openshell.protocol.wire.SandboxRuntimeGrpc.SandboxRuntimeStub stub =
                        openshell.protocol.wire.SandboxRuntimeGrpc.newStub(link.get().channel());

                Attached first = Attached.open(stub, openshell.protocol.wire.ProcessInput.newBuilder()
                        .setProcessId(Long.toString(agentId)).build());
                openshell.protocol.wire.ProcessOutput head = first.next();
                assertTrue(head.hasLost() && !head.getLost().getStderr(), "first comes what was lost: " + head);
                long lost = head.getLost().getBytes();
                assertEquals(journals.stdout().oldest(), lost);
                assertTrue(lost >= total - OutputJournal.MAX_RETAINED_BYTES && lost <= total - OutputJournal.MAX_RETAINED_BYTES
                        + OutputJournal.BLOCK_BYTES, "lost " + lost);
                long offset = lost;
                while (offset < total) {
                    openshell.protocol.wire.ProcessOutput out = first.next();
                    assertTrue(out.hasStdout(), "only stdout follows: " + out);
                    byte[] bytes = out.getStdout().toByteArray();
                    for (byte b : bytes) {
                        if (b != line[(int) (offset % line.length)]) {
                            throw new AssertionError("byte " + offset + " differs");
                        }
                        offset++;
                    }
                }
                first.detach();

                Attached resumed = Attached.reattach(stub, openshell.protocol.wire.ProcessInput.newBuilder()
                        .setResume(openshell.protocol.wire.ResumeOutput.newBuilder().setProcessId(Long.toString(agentId))
                                .setStdoutOffset(total - 100).setStderrOffset(0)).build());
                java.io.ByteArrayOutputStream rest = new java.io.ByteArrayOutputStream();
                while (rest.size() < 100) {
                    openshell.protocol.wire.ProcessOutput out = resumed.next();
                    assertTrue(out.hasStdout(), "a resume inside what is kept loses nothing: " + out);
                    rest.writeBytes(out.getStdout().toByteArray());
                }
                byte[] expected = new byte[100];
                for (int i = 0; i < 100; i++) {
                    expected[i] = line[(int) ((total - 100 + i) % line.length)];
                }
                org.junit.jupiter.api.Assertions.assertArrayEquals(expected, rest.toByteArray());
                assertNull(resumed.poll(Duration.ofMillis(300)), "nothing after the end of the agent's output so far");
                resumed.detach();

                long exec = control.exec(ExecSpec.of("/usr/bin/sleep", "600"));
                Attached refused = Attached.open(stub, openshell.protocol.wire.ProcessInput.newBuilder()
                        .setResume(openshell.protocol.wire.ResumeOutput.newBuilder().setProcessId(Long.toString(exec))
                                .setStdoutOffset(5)).build());
                Throwable failure = refused.failure.get(WAIT.toSeconds(), TimeUnit.SECONDS);
                assertTrue(failure.getMessage().contains("only the agent's output is retained"), failure.getMessage());

                started.running().terminate();
                started.mediation().close();
            }
        }
    }

    /**
     * Port forwards at their bounds, over the protocol against a real listener inside the
     * workload's network namespace: {@link RuntimeService#MAX_UNCLAIMED_FORWARDS} unclaimed
     * forwards are parked and the next is refused UNAVAILABLE; after
     * {@link RuntimeService#FORWARD_CLAIM_WAIT} the unclaimed ones are closed and a forward is
     * parked again. Meanwhile a connect to a listener whose queue is full fails FAILED once
     * {@link SandboxRuntime#PORT_FORWARD_CONNECT_WAIT} passed, not sooner and not never.
     */
    @Test
    void unclaimedForwardsAreBoundedAndExpireAndAStuckConnectGivesUp() throws Exception {
        PolicySnapshot policy = PolicySnapshot.of(1, "version: 1\n".getBytes(StandardCharsets.UTF_8));
        try (TestSandbox sandbox = new TestSandbox()) {
            StartupProbes.Report report = StartupProbes.run(sandbox.network);
            try (SandboxRuntime control = new SandboxRuntime(report, sandbox.broker, ProcessTreeTest.tree(sandbox), policy.sha256());
                 Pair pair = new Pair(control)) {
                java.util.concurrent.atomic.AtomicReference<openshell.protocol.SupervisorLink> link = new java.util.concurrent.atomic.AtomicReference<>();
                Started started = start(control, pair, policy, report,
                        new AgentSpec(List.of("/usr/bin/sleep", "600"), Map.of("PATH", "/usr/bin:/bin"), "/"), link::set);
                // Port 7001 queues every connection; port 7002 queues one and then drops SYNs (a full backlog).
                long listener = control.exec(ExecSpec.builder(List.of("/usr/bin/python3", "-c",
                        "import socket, sys, time\n"
                        + "a = socket.socket(); a.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                        + "a.bind(('127.0.0.1', 7001)); a.listen(256)\n"
                        + "b = socket.socket(); b.bind(('127.0.0.1', 7002)); b.listen(0)\n"
                        + "print('ready', flush=True); time.sleep(600)\n"))
                        .environment(Map.of("PATH", "/usr/bin:/bin")).build());
                java.io.BufferedReader ready = new java.io.BufferedReader(new java.io.InputStreamReader(
                        control.session(listener).stdout(), StandardCharsets.UTF_8));
                assertEquals("ready", ready.readLine());
                openshell.protocol.wire.SandboxRuntimeGrpc.SandboxRuntimeBlockingStub stub =
                        openshell.protocol.wire.SandboxRuntimeGrpc.newBlockingStub(link.get().channel());
                java.util.function.IntFunction<String> forward = port -> stub.portForward(openshell.protocol.RequestDigest.stamp(
                        openshell.protocol.wire.PortForwardRequest.newBuilder().setSandboxPort(port).build(),
                        "forward-" + java.util.UUID.randomUUID())).getForwardId();

                // The stuck connect runs beside the claim wait: one forward fills port 7002's queue, the next hangs.
                java.util.concurrent.CountDownLatch firstParked = new java.util.concurrent.CountDownLatch(1);
                CompletableFuture<String> stuck = CompletableFuture.supplyAsync(() -> {
                    forward.apply(7002);
                    firstParked.countDown();
                    long began = System.nanoTime();
                    try {
                        forward.apply(7002);
                        return "a connect to a full queue was parked";
                    } catch (io.grpc.StatusRuntimeException e) {
                        Duration took = Duration.ofNanos(System.nanoTime() - began);
                        return e.getStatus().getCode() + " after " + took.toMillis() + " ms: " + e.getStatus().getDescription();
                    }
                }, VIRTUAL);

                // Its second call passed the bound check and hangs in connect before the slots fill up.
                assertTrue(firstParked.await(WAIT.toSeconds(), TimeUnit.SECONDS));
                Thread.sleep(500);
                java.util.Set<String> ids = new java.util.HashSet<>();
                long parkedFrom = System.nanoTime();
                long deadline = System.nanoTime() + WAIT.toNanos();
                io.grpc.StatusRuntimeException refused = null;
                while (refused == null) {
                    try {
                        ids.add(forward.apply(7001));
                    } catch (io.grpc.StatusRuntimeException e) {
                        refused = e;
                    }
                    assertTrue(ids.size() <= RuntimeService.MAX_UNCLAIMED_FORWARDS - 1, "more than the bound were parked: "
                            + (ids.size() + 1));
                    assertTrue(System.nanoTime() < deadline, "the bound was never reached");
                }
                assertEquals(RuntimeService.MAX_UNCLAIMED_FORWARDS - 1, ids.size(), "exactly the bound, with the first on port 7002; "
                        + "refused with " + refused.getStatus());
                assertEquals(io.grpc.Status.Code.UNAVAILABLE, refused.getStatus().getCode());
                assertTrue(refused.getStatus().getDescription().contains(RuntimeService.MAX_UNCLAIMED_FORWARDS + " port forwards unclaimed"),
                        refused.getStatus().getDescription());

                String outcome = stuck.get(WAIT.toSeconds() + SandboxRuntime.PORT_FORWARD_CONNECT_WAIT.toSeconds(), TimeUnit.SECONDS);
                assertTrue(outcome.startsWith("INTERNAL after ") && outcome.contains("nothing accepts on loopback port 7002"), outcome);
                long tookMillis = Long.parseLong(outcome.substring("INTERNAL after ".length(), outcome.indexOf(" ms")));
                assertTrue(tookMillis >= SandboxRuntime.PORT_FORWARD_CONNECT_WAIT.toMillis() - 200, outcome);

                // Unclaimed forwards are closed after the claim wait, which frees their slots.
                Duration sinceFirst = Duration.ofNanos(System.nanoTime() - parkedFrom);
                Thread.sleep(Math.max(0, RuntimeService.FORWARD_CLAIM_WAIT.plusSeconds(2).minus(sinceFirst).toMillis()));
                long freed = System.nanoTime() + WAIT.toNanos();
                while (true) {
                    try {
                        assertTrue(ids.add(forward.apply(7001)));
                        break;
                    } catch (io.grpc.StatusRuntimeException e) {
                        assertTrue(System.nanoTime() < freed, "unclaimed forwards were never closed: " + e.getStatus());
                        Thread.sleep(200);
                    }
                }
                started.running().terminate();
                started.mediation().close();
            }
        }
    }

    /** A raw attachProcess stream under credits, as the supervisor's session would hold it. */
    private static final class Attached {
        final java.util.concurrent.BlockingQueue<openshell.protocol.wire.ProcessOutput> received =
                new java.util.concurrent.LinkedBlockingQueue<>();
        final CompletableFuture<Throwable> failure = new CompletableFuture<>();
        final CreditedStream<openshell.protocol.wire.ProcessOutput, openshell.protocol.wire.ProcessInput> stream;

        private Attached(openshell.protocol.wire.SandboxRuntimeGrpc.SandboxRuntimeStub stub) {
            stream = CreditedStream.create(CreditedStream.Kind.SUPERVISOR_PROCESS, new io.grpc.stub.StreamObserver<>() {
                @Override
                public void onNext(openshell.protocol.wire.ProcessOutput value) {
                    received.add(value);
                }

                @Override
                public void onError(Throwable t) {
                    failure.complete(t);
                }

                @Override
                public void onCompleted() {
                    failure.complete(new IllegalStateException("completed"));
                }
            }, Thread.ofVirtual().factory());
            stream.connect(stub.attachProcess(stream.inbound()));
        }

        static Attached open(openshell.protocol.wire.SandboxRuntimeGrpc.SandboxRuntimeStub stub,
                             openshell.protocol.wire.ProcessInput first) {
            Attached attached = new Attached(stub);
            attached.stream.send(first);
            return attached;
        }

        /** Attaches again once the runtime let the last attach go (it looks every EXIT_SLICE). */
        static Attached reattach(openshell.protocol.wire.SandboxRuntimeGrpc.SandboxRuntimeStub stub,
                                 openshell.protocol.wire.ProcessInput first) throws Exception {
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (true) {
                Attached attached = open(stub, first);
                Throwable refused;
                try {
                    refused = attached.failure.get(300, TimeUnit.MILLISECONDS);
                } catch (java.util.concurrent.TimeoutException stillAttached) {
                    return attached;
                }
                assertTrue(refused.getMessage().contains("already attached"), refused.getMessage());
                assertTrue(System.nanoTime() < deadline, "the detached agent was never free to attach again");
            }
        }

        openshell.protocol.wire.ProcessOutput next() throws Exception {
            openshell.protocol.wire.ProcessOutput out = poll(WAIT);
            if (out == null) {
                throw new AssertionError("nothing arrived; failure: " + failure.getNow(null));
            }
            return out;
        }

        openshell.protocol.wire.ProcessOutput poll(Duration wait) throws InterruptedException {
            return received.poll(wait.toMillis(), TimeUnit.MILLISECONDS);
        }

        void detach() {
            stream.fail(io.grpc.Status.CANCELLED.withDescription("detached by the test"));
        }
    }

    private static byte[] readAll(java.io.InputStream in) {
        try {
            return in.readAllBytes();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
