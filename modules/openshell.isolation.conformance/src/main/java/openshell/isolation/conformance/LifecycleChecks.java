package openshell.isolation.conformance;

import static openshell.isolation.conformance.Workbench.await;
import static openshell.isolation.conformance.Workbench.expect;
import static openshell.isolation.conformance.Workbench.finish;
import static openshell.isolation.conformance.Workbench.readAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;

import openshell.isolation.BackendException.Kind;
import openshell.isolation.BoundBoundary;
import openshell.isolation.ExecSession;
import openshell.isolation.ExecSpec;
import openshell.isolation.ExitStatus;
import openshell.isolation.LoopbackTarget;
import openshell.isolation.ProcessSignal;
import openshell.isolation.ReadyBoundary;
import openshell.isolation.RunningBoundary;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.VerifiedTopologyDescriptor;

/** The typestate: order, one use per handle, exclusive attachment, independent boundaries. */
final class LifecycleChecks {
    private LifecycleChecks() {
    }

    static List<Check> all() {
        return List.of(
                new Check("lifecycle.session-fresh-per-launch", LifecycleChecks::sessionFresh),
                new Check("lifecycle.confirm-before-mediation-refused", LifecycleChecks::confirmBeforeMediation),
                new Check("lifecycle.mediation-taken-once", LifecycleChecks::mediationOnce),
                new Check("lifecycle.start-twice-refused", LifecycleChecks::startTwice),
                new Check("lifecycle.consumed-handles-reject", LifecycleChecks::consumedHandles),
                new Check("lifecycle.attach-bound-resource-denied", LifecycleChecks::attachBound),
                new Check("lifecycle.terminated-boundary-refuses", LifecycleChecks::terminatedRefuses),
                new Check("lifecycle.agent-exit-ends-boundary", LifecycleChecks::agentExitEnds),
                new Check("lifecycle.terminate-one-leaves-second", LifecycleChecks::terminateOneLeavesSecond));
    }

    private static void sessionFresh(Workbench bench) {
        Launch first = bench.launch(bench.idleAgent());
        Launch second = bench.launch(bench.idleAgent());
        assertNotEquals(first.context().sessionId(), second.context().sessionId(), "every launch needs a fresh session id");
        assertEquals(SandboxSessionId.LENGTH, first.context().sessionId().value().length());
    }

    private static void confirmBeforeMediation(Workbench bench) {
        BoundBoundary bound = bench.attach(bench.launch(bench.idleAgent()));
        expect(Kind.INVALID, () -> bench.adopt(bound.confirm()), "confirm before the mediation source is taken");
        // The refusal did not consume the handle: the right order still works.
        bench.mediation(bound);
        bench.start(bench.confirm(bound));
    }

    private static void mediationOnce(Workbench bench) {
        BoundBoundary bound = bench.attach(bench.launch(bench.idleAgent()));
        bench.mediation(bound);
        expect(Kind.INVALID, () -> bench.adopt(bound.mediation()), "taking the mediation source twice");
        bench.start(bench.confirm(bound));
    }

    private static void startTwice(Workbench bench) {
        BoundBoundary bound = bench.attach(bench.launch(bench.idleAgent()));
        bench.mediation(bound);
        ReadyBoundary ready = bench.confirm(bound);
        RunningBoundary running = bench.start(ready);
        expect(Kind.INVALID, () -> bench.start(ready), "starting the agent twice");
        assertTrue(running.running(), "the first start must be unaffected");
    }

    private static void consumedHandles(Workbench bench) {
        BoundBoundary bound = bench.attach(bench.launch(bench.idleAgent()));
        bench.mediation(bound);
        ReadyBoundary ready = bench.confirm(bound);
        expect(Kind.INVALID, () -> bench.adopt(bound.mediation()), "mediation() on a confirmed bound handle");
        expect(Kind.INVALID, () -> bench.adopt(bound.confirm()), "confirm() on a confirmed bound handle");
        expect(Kind.INVALID, bound::abort, "abort() on a confirmed bound handle");
        bench.start(ready);
        expect(Kind.INVALID, ready::evidence, "evidence() on a started ready handle");
        expect(Kind.INVALID, () -> bench.adopt(ready.startAgent()), "startAgent() on a started ready handle");
        expect(Kind.INVALID, ready::abort, "abort() on a started ready handle");

        BoundBoundary aborted = bench.attach(bench.launch(bench.idleAgent()));
        aborted.abort();
        expect(Kind.INVALID, () -> bench.adopt(aborted.mediation()), "mediation() on an aborted bound handle");
        expect(Kind.INVALID, () -> bench.adopt(aborted.confirm()), "confirm() on an aborted bound handle");
        expect(Kind.INVALID, aborted::abort, "abort() on an aborted bound handle");

        BoundBoundary third = bench.attach(bench.launch(bench.idleAgent()));
        bench.mediation(third);
        ReadyBoundary abortedReady = bench.confirm(third);
        abortedReady.abort();
        expect(Kind.INVALID, () -> bench.adopt(abortedReady.startAgent()), "startAgent() on an aborted ready handle");
        expect(Kind.INVALID, abortedReady::evidence, "evidence() on an aborted ready handle");
        expect(Kind.INVALID, abortedReady::abort, "abort() on an aborted ready handle");
    }

    private static void attachBound(Workbench bench) {
        Launch launch = bench.launch(bench.idleAgent());
        BoundBoundary bound = bench.attach(launch);
        Launch again = relaunch(launch);
        VerifiedTopologyDescriptor verified = bench.verify(again);
        expect(Kind.DENIED, () -> bench.adopt(bench.backend(verified).attach(verified, again.context())),
                "attaching an environment that is already bound");
        bench.mediation(bound);
        RunningBoundary running = bench.start(bench.confirm(bound));
        expect(Kind.DENIED, () -> bench.adopt(bench.backend(verified).attach(verified, again.context())),
                "attaching an environment whose agent runs");
        assertTrue(running.running(), "a refused attach must not disturb the running boundary");
    }

    private static void terminatedRefuses(Workbench bench) {
        RunningBoundary running = bench.startIdle().running();
        running.terminate();
        assertFalse(running.running(), "a terminated boundary must say so");
        ExitStatus agent = await(running.agent(), "the agent of a terminated boundary");
        expect(Kind.TERMINATED, () -> bench.adopt(running.exec().exec(ExecSpec.of(bench.target().shell(), "-c", "exit 0"))),
                "exec in a terminated boundary");
        expect(Kind.TERMINATED, () -> bench.adopt(running.portForward().connect(LoopbackTarget.of(1))),
                "a port forward into a terminated boundary");
        expect(Kind.TERMINATED, () -> running.agent().signal(ProcessSignal.TERM), "a signal to the agent of a terminated boundary");
        running.terminate();
        assertEquals(agent, running.agent().awaitExit(), "the agent's status must not change");
    }

    private static void agentExitEnds(Workbench bench) {
        RunningBoundary running = bench.start(bench.script("exit 0")).running();
        assertEquals(new ExitStatus.Exited(0), await(running.agent(), "the agent"));
        assertFalse(running.running(), "the boundary must end with its agent");
        expect(Kind.TERMINATED, () -> bench.adopt(running.exec().exec(ExecSpec.of(bench.target().shell(), "-c", "exit 0"))),
                "exec after the agent ended");
    }

    private static void terminateOneLeavesSecond(Workbench bench) {
        RunningBoundary first = bench.startIdle().running();
        RunningBoundary second = bench.startIdle().running();
        first.terminate();
        assertFalse(first.running());
        await(first.agent(), "the terminated boundary's agent");
        assertTrue(second.running(), "terminating one boundary must leave another running");
        assertTrue(second.agent().awaitExit(Duration.ZERO).isEmpty(), "the other boundary's agent must still run");
        ExecSession session = bench.sh(second, "echo alive");
        assertEquals("alive\n", readAll(session.stdout(), "stdout of an exec in the surviving boundary"));
        assertEquals(new ExitStatus.Exited(0), finish(session, "an exec in the surviving boundary"));
    }

    /** The same environment and sandbox in a new launch: what a second supervisor would try. */
    static Launch relaunch(Launch launch) {
        SandboxContext c = launch.context();
        return new Launch(launch.descriptor(),
                new SandboxContext(c.sandboxId(), SandboxSessionId.fresh(), c.policy(), c.agent(), c.workload()));
    }
}
