package openshell.isolation.conformance.selftest;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import openshell.isolation.conformance.IsolationConformance;

import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.testkit.engine.EngineExecutionResults;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Event;

/**
 * The kit bites: run through JUnit exactly as a backend's build would, the plain backend passes
 * every lifecycle and process check and fails every check that needs isolation it does not have;
 * each broken variant fails exactly the checks its defect breaks.
 */
class KitBitesTest {
    /** What the plain backend cannot honestly pass: it has no PTY, no mediation, no fence, no identity. */
    static final Set<String> NEEDS_ISOLATION = Set.of(
            "exec.pty-merges-and-resizes",
            "mediation.resolved-open-one-shot",
            "mediation.unresolved-open-only-denied",
            "mediation.dns-query-one-shot",
            "identity.unreadable-binary-digest-empty",
            "invariant1.egress-only-via-mediation",
            "invariant2.nothing-runs-before-controls",
            "invariant3.whole-policy-decides",
            "invariant4.only-through-active-backend",
            "invariant5.boundaries-share-nothing",
            "invariant6.supervisor-loss-fails-closed");

    /** The checks a plain backend passes: the ones the broken variants are measured against. */
    static final Predicate<String> PASSABLE = name -> !NEEDS_ISOLATION.contains(name);

    /** The plain backend's run, shared by the tests that read it: one run is enough to read twice. */
    private static Outcome baseline;

    static synchronized Outcome baseline() {
        if (baseline == null) {
            baseline = run(Baseline.class);
        }
        return baseline;
    }

    @Test
    void plainBackendPassesLifecycleAndProcessChecksAndFailsEveryIsolationCheck() {
        Outcome outcome = baseline();
        assertEquals(new TreeSet<>(IsolationConformance.checkNames()), outcome.ran(), "every check must run; none skipped");
        assertEquals(new TreeSet<>(NEEDS_ISOLATION), outcome.failed().keySet(), outcome.toString());
        assertEquals(Set.of(), PlainTarget.provisioned(), "the kit must discard every launch it made");
        assertEquals(Set.of(), PlainBackend.bound(), "the kit must release every boundary it attached");
        assertTrue(outcome.passed().containsAll(List.of("lifecycle.start-twice-refused", "process.exit-code-and-signal-distinct",
                "exec.separate-stdout-stderr", "forward.carries-bytes", "registry.mismatch-denied-no-fallback")));
    }

    @Test
    void missingProbesAndLeaksFailLoudlyWithTheReason() {
        Map<String, String> failed = baseline().failed();
        for (String check : List.of("mediation.unresolved-open-only-denied", "mediation.dns-query-one-shot",
                "identity.unreadable-binary-digest-empty",
                "invariant3.whole-policy-decides", "invariant6.supervisor-loss-fails-closed")) {
            assertTrue(failed.get(check).contains("supplies no"), check + ": " + failed.get(check));
            assertTrue(failed.get(check).contains("never skipped"), check + ": " + failed.get(check));
        }
        // The plain backend supplies honest connect probes: the kit sees them get out.
        for (String check : List.of("mediation.resolved-open-one-shot", "invariant1.egress-only-via-mediation",
                "invariant4.only-through-active-backend", "invariant5.boundaries-share-nothing")) {
            assertTrue(failed.get(check).contains("no pending TCP open"), check + ": " + failed.get(check));
            assertTrue(failed.get(check).contains("reached directly, around mediation"), check + ": " + failed.get(check));
        }
        assertTrue(failed.get("invariant2.nothing-runs-before-controls").contains("'network-mediation'"),
                failed.get("invariant2.nothing-runs-before-controls"));
        assertTrue(failed.get("exec.pty-merges-and-resizes").contains("UNAVAILABLE"), failed.get("exec.pty-merges-and-resizes"));
    }

    @Test
    void probeOutputIsReadUpToMaxProbeOutputAndNoFurther() {
        String atBound = run(EchoLineAtBound.class).failed().get("forward.carries-bytes");
        assertTrue(atBound.contains("printed " + IsolationConformance.MAX_PROBE_OUTPUT + " characters"), atBound);
        String overBound = run(EchoLineOverBound.class).failed().get("forward.carries-bytes");
        assertTrue(overBound.contains("exceeds " + IsolationConformance.MAX_PROBE_OUTPUT + " bytes"), overBound);
    }

    static Stream<Arguments> defects() {
        return Stream.of(
                Arguments.of(ConfirmWithoutMediation.class, Set.of("lifecycle.confirm-before-mediation-refused")),
                Arguments.of(StartTwice.class, Set.of("lifecycle.start-twice-refused", "lifecycle.consumed-handles-reject")),
                Arguments.of(Reattach.class, Set.of("lifecycle.attach-bound-resource-denied")),
                Arguments.of(ForeignDescriptor.class, Set.of("registry.backend-refuses-foreign-descriptor")),
                Arguments.of(UnstableWait.class, Set.of("process.await-exit-stable")),
                Arguments.of(SignalAfterExitIgnored.class,
                        Set.of("process.signal-after-exit-terminated", "lifecycle.terminated-boundary-refuses")),
                Arguments.of(ShellStatus.class, Set.of("process.exit-code-and-signal-distinct", "process.signal-delivered")),
                Arguments.of(MergedStderr.class, Set.of("exec.separate-stdout-stderr")),
                Arguments.of(ShallowTerminate.class, Set.of("process.terminate-kills-tree")),
                Arguments.of(SharedTerminate.class, Set.of("lifecycle.terminate-one-leaves-second")),
                Arguments.of(ForwardDropsBytes.class, Set.of("forward.carries-bytes")),
                Arguments.of(StaleSession.class, Set.of("lifecycle.session-fresh-per-launch")));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("defects")
    void brokenBackendFailsExactlyTheChecksItBreaks(Class<? extends PlainTarget> variant, Set<String> broken) {
        Outcome outcome = run(variant);
        Set<String> passable = IsolationConformance.checkNames().stream().filter(PASSABLE)
                .collect(Collectors.toCollection(TreeSet::new));
        assertEquals(passable, outcome.ran(), "every passable check must run");
        assertEquals(new TreeSet<>(broken), outcome.failed().keySet(), outcome.toString());
    }

    /** What one run of the kit reported, per check name. */
    record Outcome(Set<String> passed, Map<String, String> failed) {
        Set<String> ran() {
            Set<String> all = new TreeSet<>(passed);
            all.addAll(failed.keySet());
            return all;
        }
    }

    static Outcome run(Class<? extends PlainTarget> target) {
        EngineExecutionResults results = EngineTestKit.engine("junit-jupiter").selectors(selectClass(target)).execute();
        assertEquals(0, results.containerEvents().failed().count(), () -> "the kit itself broke: "
                + results.containerEvents().failed().list());
        assertEquals(0, results.testEvents().skipped().count() + results.testEvents().aborted().count(),
                "a check was skipped or aborted");
        Set<String> passed = new LinkedHashSet<>();
        results.testEvents().succeeded().stream().map(KitBitesTest::name).forEach(passed::add);
        Map<String, String> failed = new TreeMap<>();
        results.testEvents().failed().stream().forEach(e -> failed.put(name(e), reason(e)));
        Set<String> overlap = new HashSet<>(passed);
        overlap.retainAll(failed.keySet());
        assertTrue(overlap.isEmpty(), "a check both passed and failed: " + overlap);
        return new Outcome(passed, failed);
    }

    private static String name(Event event) {
        return event.getTestDescriptor().getDisplayName();
    }

    private static String reason(Event event) {
        return event.getPayload(TestExecutionResult.class)
                .flatMap(TestExecutionResult::getThrowable)
                .map(t -> t.getClass().getSimpleName() + ": " + t.getMessage())
                .orElse("no reason");
    }

    /** The plain backend plugged in exactly as a backend would: the interface's own test factory. */
    static final class Baseline extends PlainTarget {
        Baseline() {
            super(Set.of());
        }
    }

    /** A variant that runs only the checks the plain backend can pass, the rest being shown by the baseline. */
    abstract static class Variant extends PlainTarget {
        private final Predicate<String> include;

        Variant(Set<Defect> defects, Predicate<String> include) {
            super(defects);
            this.include = include;
        }

        Variant(Defect defect) {
            this(Set.of(defect), PASSABLE);
        }

        @TestFactory
        @Override
        public Stream<DynamicNode> isolationConformance() {
            return IsolationConformance.checks(this, include);
        }
    }

    /** An echo probe whose first line is exactly as long as the kit reads. */
    static final class EchoLineAtBound extends Variant {
        EchoLineAtBound() {
            super(Set.of(), "forward.carries-bytes"::equals);
        }

        @Override
        public Optional<List<String>> loopbackEchoProbe() {
            return Optional.of(java(LineProbe.class, String.valueOf(IsolationConformance.MAX_PROBE_OUTPUT)));
        }
    }

    /** An echo probe whose first line is one byte longer than the kit reads. */
    static final class EchoLineOverBound extends Variant {
        EchoLineOverBound() {
            super(Set.of(), "forward.carries-bytes"::equals);
        }

        @Override
        public Optional<List<String>> loopbackEchoProbe() {
            return Optional.of(java(LineProbe.class, String.valueOf(IsolationConformance.MAX_PROBE_OUTPUT + 1)));
        }
    }

    static final class ConfirmWithoutMediation extends Variant {
        ConfirmWithoutMediation() {
            super(Defect.CONFIRM_WITHOUT_MEDIATION);
        }
    }

    static final class StartTwice extends Variant {
        StartTwice() {
            super(Defect.START_TWICE);
        }
    }

    static final class Reattach extends Variant {
        Reattach() {
            super(Defect.REATTACH);
        }
    }

    static final class ForeignDescriptor extends Variant {
        ForeignDescriptor() {
            super(Defect.FOREIGN_DESCRIPTOR);
        }
    }

    static final class UnstableWait extends Variant {
        UnstableWait() {
            super(Defect.UNSTABLE_WAIT);
        }
    }

    static final class SignalAfterExitIgnored extends Variant {
        SignalAfterExitIgnored() {
            super(Defect.SIGNAL_AFTER_EXIT_IGNORED);
        }
    }

    static final class ShellStatus extends Variant {
        ShellStatus() {
            super(Defect.SHELL_STATUS);
        }
    }

    static final class MergedStderr extends Variant {
        MergedStderr() {
            super(Defect.MERGED_STDERR);
        }
    }

    static final class ShallowTerminate extends Variant {
        ShallowTerminate() {
            super(Defect.SHALLOW_TERMINATE);
        }
    }

    static final class SharedTerminate extends Variant {
        SharedTerminate() {
            super(Defect.SHARED_TERMINATE);
        }
    }

    static final class ForwardDropsBytes extends Variant {
        ForwardDropsBytes() {
            super(Defect.FORWARD_DROPS_BYTES);
        }
    }

    static final class StaleSession extends Variant {
        StaleSession() {
            super(Defect.STALE_SESSION);
        }
    }
}
