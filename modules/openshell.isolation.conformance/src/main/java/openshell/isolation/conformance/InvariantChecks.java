package openshell.isolation.conformance;

import static openshell.isolation.conformance.Workbench.await;
import static openshell.isolation.conformance.Workbench.expect;
import static openshell.isolation.conformance.Workbench.finish;
import static openshell.isolation.conformance.Workbench.heldOpen;
import static openshell.isolation.conformance.Workbench.required;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;

import openshell.isolation.AgentSpec;
import openshell.isolation.BackendException;
import openshell.isolation.BackendException.Kind;
import openshell.isolation.BoundBoundary;
import openshell.isolation.ByteChannel;
import openshell.isolation.ConfirmationEvidence;
import openshell.isolation.DenyReason;
import openshell.isolation.ExecSession;
import openshell.isolation.ExitStatus;
import openshell.isolation.LoopbackTarget;
import openshell.isolation.NetworkMediationSource;
import openshell.isolation.PendingTcpOpen;
import openshell.isolation.ReadyBoundary;
import openshell.isolation.RunningBoundary;
import openshell.isolation.TcpDestination;
import openshell.isolation.VerifiedTopologyDescriptor;

/** The six invariants of the design (§3), each shown with probes the backend supplies. */
final class InvariantChecks {
    /** The control every backend must name in its evidence: the one that makes egress mediated. */
    static final String MEDIATION_CONTROL = "network-mediation";

    private InvariantChecks() {
    }

    static List<Check> all() {
        return List.of(
                new Check("invariant1.egress-only-via-mediation", InvariantChecks::egressOnlyViaMediation),
                new Check("invariant2.nothing-runs-before-controls", InvariantChecks::nothingBeforeControls),
                new Check("invariant3.whole-policy-decides", InvariantChecks::wholePolicyDecides),
                new Check("invariant4.only-through-active-backend", InvariantChecks::onlyThroughActiveBackend),
                new Check("invariant5.boundaries-share-nothing", InvariantChecks::boundariesShareNothing),
                new Check("invariant6.supervisor-loss-fails-closed", InvariantChecks::supervisorLossFailsClosed));
    }

    private static void egressOnlyViaMediation(Workbench bench) {
        try (HostListener listener = HostListener.open()) {
            TcpDestination destination = listener.destination();
            List<String> connect = required(bench.target().connectProbe(destination), "connect probe", "invariant 1");
            List<String> direct = required(bench.target().directEgressProbe(destination), "direct-egress probe", "invariant 1");
            Workbench.Started started = bench.startIdle();

            // The destination is reachable through mediation, so a failed direct attempt means the fence held.
            ExecSession mediated = bench.exec(started.running(), connect);
            try (ByteChannel _ = heldOpen(started.source(), mediated, destination, listener).allow()) {
                assertEquals(new ExitStatus.Exited(0), finish(mediated, "the mediated connect probe"),
                        "an allowed open must connect");
            }
            AtomicBoolean draining = denyEverything(started.source());
            try {
                ExecSession bypass = bench.exec(started.running(), direct);
                ExitStatus status = finish(bypass, "the direct-egress probe");
                assertEquals(0, listener.accepted(), "the workload reached " + destination + " around mediation");
                assertNotEquals(new ExitStatus.Exited(0), status, "the direct-egress probe reports that it got out");
            } finally {
                draining.set(false);
            }
            assertTrue(started.evidence().directEgressFailed(), "the confirmation evidence must show that direct egress failed");
        }
    }

    private static void nothingBeforeControls(Workbench bench) {
        try (HostListener listener = HostListener.open()) {
            TcpDestination destination = listener.destination();
            List<String> connect = required(bench.target().connectProbe(destination), "connect probe", "invariant 2");
            // The agent's first instruction is a connect, so any run before startAgent shows at the source.
            BoundBoundary bound = bench.attach(bench.launch(AgentSpec.of(connect)));
            NetworkMediationSource source = bench.mediation(bound);
            quiet(source, "after attach");
            ReadyBoundary ready = bench.confirm(bound);
            ConfirmationEvidence evidence = ready.evidence();
            assertTrue(evidence.controls().stream().anyMatch(c -> c.name().equals(MEDIATION_CONTROL)),
                    "confirm must prove '" + MEDIATION_CONTROL + "' in force; evidence: " + evidence.controls());
            quiet(source, "after confirm");
            RunningBoundary running = bench.start(ready);
            Optional<PendingTcpOpen> open = Workbench.nextOpen(source, running.agent(), IsolationConformance.WAIT);
            if (open.isEmpty()) {
                fail("the agent's connect never reached mediation (agent: "
                        + running.agent().awaitExit(Duration.ZERO).map(Object::toString).orElse("running")
                        + ", destination reached directly: " + (listener.accepted() > 0) + ")");
            }
            open.orElseThrow().deny(DenyReason.POLICY);
            assertNotEquals(new ExitStatus.Exited(0), await(running.agent(), "the agent"));
        }
    }

    private static void wholePolicyDecides(Workbench bench) {
        Workbench.Started started = bench.startIdle();
        assertEquals(started.launch().context().policy().sha256(), started.evidence().policySha256(),
                "the backend must enforce the whole policy of the launch, not another document");
        List<String> forbidden = required(bench.target().policyForbiddenProbe(), "policy-forbidden probe", "invariant 3");
        ExecSession session = bench.exec(started.running(), forbidden);
        assertNotEquals(new ExitStatus.Exited(0), finish(session, "the policy-forbidden probe"),
                "an action the launch's policy forbids succeeded");
    }

    private static void onlyThroughActiveBackend(Workbench bench) {
        try (HostListener listener = HostListener.open()) {
            TcpDestination destination = listener.destination();
            List<String> connect = required(bench.target().connectProbe(destination), "connect probe", "invariant 4");
            Workbench.Started started = bench.startIdle();
            // An exec is behind the same controls as the agent: its connect is mediated too.
            ExecSession session = bench.exec(started.running(), connect);
            heldOpen(started.source(), session, destination, listener).deny(DenyReason.POLICY);
            finish(session, "the denied exec");
            VerifiedTopologyDescriptor verified = bench.verify(LifecycleChecks.relaunch(started.launch()));
            expect(Kind.DENIED, () -> bench.adopt(bench.backend(verified).attach(verified,
                            LifecycleChecks.relaunch(started.launch()).context())),
                    "a second backend instance attaching the active boundary");
            started.running().terminate();
            expect(Kind.TERMINATED, () -> bench.exec(started.running(), connect), "exec after terminate");
            expect(Kind.TERMINATED, () -> bench.adopt(started.running().portForward().connect(LoopbackTarget.of(1))),
                    "forward after terminate");
        }
    }

    private static void boundariesShareNothing(Workbench bench) {
        try (HostListener listener = HostListener.open()) {
            TcpDestination destination = listener.destination();
            List<String> connect = required(bench.target().connectProbe(destination), "connect probe", "invariant 5");
            Workbench.Started a = bench.startIdle();
            Workbench.Started b = bench.startIdle();
            assertNotEquals(a.launch().context().sessionId(), b.launch().context().sessionId());
            assertEquals(a.launch().context().policy().sha256(), a.evidence().policySha256());
            assertEquals(b.launch().context().policy().sha256(), b.evidence().policySha256());

            ExecSession first = bench.exec(b.running(), connect);
            heldOpen(b.source(), first, destination, listener).deny(DenyReason.POLICY);
            quiet(a.source(), "at boundary A while B connected");
            finish(first, "B's probe");

            a.running().terminate();
            assertTrue(b.running().running(), "terminating A must leave B running");
            ExecSession second = bench.exec(b.running(), connect);
            heldOpen(b.source(), second, destination, listener).deny(DenyReason.POLICY);
            finish(second, "B's second probe");
        }
    }

    private static void supervisorLossFailsClosed(Workbench bench) {
        Duration bound = required(bench.target().supervisorLossBound(), "supervisor-loss bound", "invariant 6");
        try (HostListener listener = HostListener.open()) {
            TcpDestination destination = listener.destination();
            List<String> connect = required(bench.target().connectProbe(destination), "connect probe", "invariant 6");
            Workbench.Started started = bench.startIdle();
            bench.target().loseSupervisor(started.running(), started.source());
            try {
                ExecSession session = bench.exec(started.running(), connect);
                assertNotEquals(new ExitStatus.Exited(0), finish(session, "a connect after supervisor loss"),
                        "a connect after supervisor loss must fail closed");
            } catch (BackendException refused) {
                // Refusing the exec itself is failing closed too.
            }
            assertEquals(0, listener.accepted(), "the workload reached " + destination + " without its supervisor");
            Duration limit = bound.plus(IsolationConformance.SUPERVISOR_LOSS_SLACK);
            assertTrue(started.running().agent().awaitExit(limit).isPresent(),
                    "the workload must be terminated within the documented bound " + bound + " after supervisor loss");
        }
    }

    /** Nothing may arrive at the source for the quiet window. */
    private static void quiet(NetworkMediationSource source, String when) {
        source.acceptTcp(IsolationConformance.QUIET_WINDOW).ifPresent(open -> {
            open.deny(DenyReason.POLICY);
            fail("a TCP open to " + open.destination() + " arrived " + when);
        });
    }

    /** Denies every open that arrives until the returned flag is cleared. */
    private static AtomicBoolean denyEverything(NetworkMediationSource source) {
        AtomicBoolean on = new AtomicBoolean(true);
        Thread.ofVirtual().name("conformance-deny-all").start(() -> {
            try {
                while (on.get()) {
                    source.acceptTcp(IsolationConformance.POLL).ifPresent(open -> open.deny(DenyReason.POLICY));
                    source.acceptDns(Duration.ZERO).ifPresent(query -> query.refuse(DenyReason.POLICY));
                }
            } catch (BackendException closed) {
                // The source ended with the boundary.
            }
        });
        return on;
    }
}
