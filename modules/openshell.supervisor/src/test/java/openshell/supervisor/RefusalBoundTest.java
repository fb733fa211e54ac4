package openshell.supervisor;

import static openshell.supervisor.Fixture.WAIT;
import static openshell.supervisor.Fixture.loopback;
import static openshell.supervisor.Fixture.who;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.net.InetAddress;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import openshell.isolation.DenyReason;
import openshell.isolation.TcpDestination;
import openshell.isolation.dns.DnsMessage;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A runtime that floods the supervisor with connects or DNS queries over their admission bounds
 * gets each refused and audited, but never more than {@link SandboxMediation#MAX_REFUSING}
 * refusals run on threads of their own: the rest wait on the thread they arrived on.
 */
@Timeout(120)
class RefusalBoundTest {
    /** Arrivals over the bound, beyond the refusals that may run at once. */
    private static final int FLOOD = SandboxMediation.MAX_REFUSING + 8;
    /** How long the flood gets to start more refusals than it may (it would, at once, without the bound). */
    private static final long SETTLE_MILLIS = 300;

    /** An open whose refusal waits at {@code gate}, counting the refusals under way. */
    private static final class HeldOpen extends TestMediationSource.Open {
        private final CountDownLatch gate;
        private final AtomicInteger entered;

        HeldOpen(CountDownLatch gate, AtomicInteger entered, int port) {
            super(who("/usr/bin/nc"), new TcpDestination(loopback(), port));
            this.gate = gate;
            this.entered = entered;
        }

        @Override
        public void deny(DenyReason reason) {
            entered.incrementAndGet();
            await(gate);
            super.deny(reason);
        }
    }

    /** A query whose refusal waits at {@code gate}. */
    private static final class HeldQuery extends TestMediationSource.Query {
        private final CountDownLatch gate;
        private final AtomicInteger entered;

        HeldQuery(CountDownLatch gate, AtomicInteger entered, int id) {
            super(who("/usr/bin/curl"), DnsMessage.query(id, "www.example.test", 1));
            this.gate = gate;
            this.entered = entered;
        }

        @Override
        public void refuse(DenyReason reason) {
            entered.incrementAndGet();
            await(gate);
            super.refuse(reason);
        }
    }

    @Test
    void connectsOverTheRelayBoundAreRefusedByAtMostMaxRefusingThreads() throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.start(TcpMediationTest.tcpPolicy("echo.test", echo.port()),
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test"))).maxActiveRelays(1))) {
            f.resolve(who("/usr/bin/nc"), "echo.test");
            // The one relay slot, held open for the whole flood.
            Socket held = f.connect(who("/usr/bin/nc"), loopback(), echo.port());
            try {
                CountDownLatch gate = new CountDownLatch(1);
                AtomicInteger entered = new AtomicInteger();
                List<HeldOpen> flood = new ArrayList<>();
                for (int i = 0; i < FLOOD; i++) {
                    flood.add(f.source.offer(new HeldOpen(gate, entered, echo.port())));
                }
                // MAX_REFUSING on threads of their own, one more on the accept loop, the rest not taken yet.
                assertBoundHolds(f, entered);
                gate.countDown();
                for (HeldOpen open : flood) {
                    assertEquals(DenyReason.EXHAUSTED, open.outcome.get(WAIT.toSeconds(), TimeUnit.SECONDS));
                }
                assertEquals(FLOOD, f.audit.stream().filter(l -> l.contains("\"cause\":\"EXHAUSTED\"")).count(),
                        "every refusal audited");
                awaitNoneRefusing(f);
            } finally {
                held.close();
            }
        }
    }

    @Test
    void queriesOverTheInFlightBoundAreRefusedByAtMostMaxRefusingThreads() throws Exception {
        CountDownLatch resolving = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        HostResolver stuck = name -> {
            resolving.countDown();
            await(release);
            return List.of(InetAddress.ofLiteral("93.184.216.34"));
        };
        String policy = """
                version: 1
                network_policies:
                  web:
                    endpoints:
                      - host: www.example.test
                        port: 443
                        protocol: tcp
                    binaries:
                      - path: /usr/bin/curl
                """;
        try (Fixture f = Fixture.start(policy, b -> b.resolver(stuck).maxDnsInFlight(1))) {
            TestMediationSource.Query first = f.source.query(who("/usr/bin/curl"), DnsMessage.query(1, "www.example.test", 1));
            assertEquals(true, resolving.await(WAIT.toSeconds(), TimeUnit.SECONDS));
            CountDownLatch gate = new CountDownLatch(1);
            AtomicInteger entered = new AtomicInteger();
            List<HeldQuery> flood = new ArrayList<>();
            for (int i = 0; i < FLOOD; i++) {
                flood.add(f.source.offer(new HeldQuery(gate, entered, 100 + i)));
            }
            assertBoundHolds(f, entered);
            gate.countDown();
            for (HeldQuery q : flood) {
                assertEquals(DenyReason.EXHAUSTED, q.refused.get(WAIT.toSeconds(), TimeUnit.SECONDS));
            }
            assertEquals(FLOOD, f.audit.stream().filter(l -> l.contains("\"cause\":\"EXHAUSTED\"")).count(),
                    "every refusal audited");
            release.countDown();
            assertEquals(0, first.response.get(WAIT.toSeconds(), TimeUnit.SECONDS)[3] & 0xf, "the admitted query answered");
            awaitNoneRefusing(f);
        }
    }

    private static void assertBoundHolds(Fixture f, AtomicInteger entered) throws InterruptedException {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (entered.get() < SandboxMediation.MAX_REFUSING + 1 && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        Thread.sleep(SETTLE_MILLIS);
        assertEquals(SandboxMediation.MAX_REFUSING + 1, entered.get(),
                "refusals under way: MAX_REFUSING on their own threads and one on the thread the arrivals come on");
        assertEquals(SandboxMediation.MAX_REFUSING, f.mediation.refusingThreads());
    }

    private static void awaitNoneRefusing(Fixture f) throws InterruptedException {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (f.mediation.refusingThreads() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertEquals(0, f.mediation.refusingThreads());
    }

    private static void await(CountDownLatch latch) {
        try {
            latch.await(WAIT.toSeconds(), TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
