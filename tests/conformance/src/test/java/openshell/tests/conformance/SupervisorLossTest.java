package openshell.tests.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import openshell.isolation.AgentSpec;
import openshell.isolation.BackendKey;
import openshell.isolation.BackendRegistry;
import openshell.isolation.BoundBoundary;
import openshell.isolation.ByteChannel;
import openshell.isolation.NetworkMediationSource;
import openshell.isolation.PendingTcpOpen;
import openshell.isolation.RunningBoundary;
import openshell.isolation.VerifiedTopologyDescriptor;
import org.junit.jupiter.api.Test;

/**
 * Supervisor loss with the link itself dropped (the conformance kit's invariant 6 keeps the link
 * to observe the end): mid-transfer, the supervisor side of a real runtime goes away. The relay
 * the workload was writing into closes at once, a new connect is refused ECANCELED at once, no
 * further byte reaches the upstream, and after the runtime's loss bound every workload process
 * is gone.
 */
@org.junit.jupiter.api.extension.ExtendWith(RuntimeLogsOnFailure.class)
class SupervisorLossTest {
    /** Longest wait for the agent's steps (a runtime JVM starts on 2 loaded cores). */
    private static final Duration WAIT = Duration.ofSeconds(120);
    /** How long the upstream must stay quiet after the loss. */
    private static final Duration QUIET = Duration.ofSeconds(3);
    /** Added to the runtime's bound before the workload must be gone (watch interval, cgroup kill). */
    private static final Duration SLACK = Duration.ofSeconds(10);
    /** How long the relay runs before the supervisor goes: long enough for bytes to flow. */
    private static final long BYTES_BEFORE_LOSS = 64 * 1024;

    /** Streams to the upstream; when the stream breaks, reports how and tries a new connect; then idles. */
    private static final String AGENT = """
            import errno, socket, sys, time
            host, port, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
            def log(line):
                with open(out + '/agent.log', 'a') as f:
                    f.write(line + '\\n')
            s = socket.create_connection((host, port), timeout=60)
            log('connected')
            try:
                while True:
                    s.sendall(b'x' * 4096)
                    time.sleep(0.01)
            except OSError as e:
                log('stream-broken ' + errno.errorcode.get(e.errno, str(e.errno)))
            try:
                socket.create_connection((host, port), timeout=60)
                log('reconnect SUCCEEDED')
            except OSError as e:
                log('reconnect ' + errno.errorcode.get(e.errno, str(e.errno)))
            time.sleep(3600)
            """;

    @Test
    void killingTheSupervisorMidTransferStopsEgressAtOnceAndEndsTheWorkloadWithinTheBound() throws Exception {
        RuntimeLaunches launches = RuntimeLaunches.shared();
        try (ServerSocket upstreamServer = new ServerSocket()) {
            upstreamServer.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            AtomicLong upstreamBytes = new AtomicLong();
            Thread.ofPlatform().daemon(true).name("loss-upstream").start(() -> {
                try (Socket s = upstreamServer.accept(); InputStream in = s.getInputStream()) {
                    byte[] buffer = new byte[8192];
                    for (int n; (n = in.read(buffer)) >= 0; ) {
                        upstreamBytes.addAndGet(n);
                    }
                } catch (IOException ended) {
                    // the upstream closed with the test
                }
            });
            // The workload dials an address of its own choosing; the supervisor (this test) dials the upstream.
            String workloadTarget = "192.0.2.10";
            int workloadPort = 8080;
            RuntimeLaunches.Live live = launches.launch(AgentSpec.of(List.of("/bin/sh", "-c", "exec sleep 3600")),
                    RuntimeLaunches.POLICY);
            try {
                BackendKey key = new BackendKey("openshell-sandbox", 1);
                BackendRegistry registry = BackendRegistry.load();
                VerifiedTopologyDescriptor verified = registry.verify(live.descriptor, key);
                BoundBoundary bound = registry.backend(verified).attach(verified, live.context);
                NetworkMediationSource source = bound.mediation();
                RunningBoundary running = bound.confirm().startAgent();
                running.exec().exec(openshell.isolation.ExecSpec.of("/usr/bin/python3", "-c", AGENT, workloadTarget,
                        Integer.toString(workloadPort), live.workspace.toString()));
                PendingTcpOpen open = source.acceptTcp(WAIT).orElseGet(() -> fail("the agent's connect never arrived"));
                assertEquals(workloadTarget, open.destination().address().getHostAddress());
                ByteChannel relay = open.allow();
                Socket upstream = new Socket(InetAddress.getLoopbackAddress(), upstreamServer.getLocalPort());
                Thread pump = Thread.ofPlatform().daemon(true).name("loss-pump").start(() -> {
                    try (InputStream in = relay.input(); OutputStream out = upstream.getOutputStream()) {
                        in.transferTo(out);
                    } catch (IOException | RuntimeException ended) {
                        // the relay ends with the supervisor
                    }
                });
                awaitTrue(() -> upstreamBytes.get() >= BYTES_BEFORE_LOSS, "bytes through the relay before the loss");
                assertTrue(text(live.workspace.resolve("agent.log")).contains("connected"));

                long lostAt = System.nanoTime();
                live.loseSupervisor();
                pump.join(WAIT.toMillis());
                upstream.close();
                long atLoss = upstreamBytes.get();
                awaitTrue(() -> text(live.workspace.resolve("agent.log")).contains("reconnect "),
                        "the workload to see its stream broken and its new connect answered");
                Thread.sleep(QUIET.toMillis());
                assertEquals(atLoss, upstreamBytes.get(), "no byte may reach the upstream after the supervisor is gone");
                String log = text(live.workspace.resolve("agent.log"));
                assertTrue(log.contains("stream-broken E"), "the existing relay must close: " + log);
                assertTrue(log.contains("reconnect ECANCELED"), "a new connect must be refused ECANCELED at once: " + log);
                assertFalse(RuntimeLaunches.processesOf(live.workloadHostUid()).isEmpty(),
                        "the workload outlives the loss until the bound");

                Duration limit = SandboxRuntimeConformanceTest.SUPERVISOR_LOSS_BOUND.plus(SLACK);
                long deadline = lostAt + limit.toNanos();
                while (!RuntimeLaunches.processesOf(live.workloadHostUid()).isEmpty() && System.nanoTime() < deadline) {
                    Thread.sleep(200);
                }
                assertEquals(List.of(), RuntimeLaunches.processesOf(live.workloadHostUid()),
                        "every workload process must be gone within " + limit + " of the loss");
            } finally {
                launches.discard(live.descriptor);
            }
        }
    }

    private static void awaitTrue(java.util.function.BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail(what + " did not happen within " + WAIT);
            }
            Thread.sleep(50);
        }
    }

    private static String text(Path file) {
        try {
            return Files.exists(file) ? Files.readString(file) : "";
        } catch (IOException e) {
            return "";
        }
    }
}
