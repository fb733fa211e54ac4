package openshell.isolation.conformance;

import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Predicate;
import java.util.stream.Stream;

import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;

/**
 * The checks every isolation backend must pass, as JUnit dynamic tests named by stable check
 * names ({@code registry.*}, {@code lifecycle.*}, {@code process.*}, {@code exec.*},
 * {@code forward.*}, {@code mediation.*}, {@code identity.*}, {@code invariant1..6.*}). Each
 * check launches its own boundaries and releases them however it ends.
 */
public final class IsolationConformance {
    /** Longest wait for any one expected event: a process exit, a pending open, end of a stream. */
    public static final Duration WAIT = Duration.ofSeconds(30);
    /** Longest a descendant may outlive its process's terminate(); a tree kill takes milliseconds. */
    public static final Duration TERMINATE_BOUND = Duration.ofSeconds(10);
    /** Longest a whole check may run; at the bound it fails. */
    public static final Duration CHECK_BOUND = Duration.ofSeconds(120);
    /** How long the kit watches for something that must not happen (an open before start, at another boundary). */
    public static final Duration QUIET_WINDOW = Duration.ofSeconds(1);
    /** Most bytes read from one probe stream; more fails the check. */
    public static final int MAX_PROBE_OUTPUT = 64 * 1024;
    /** Bytes sent through a port forward and expected back. */
    public static final int FORWARD_PAYLOAD = 64 * 1024;
    /** Added to a backend's own supervisor-loss bound, for a loaded machine. */
    public static final Duration SUPERVISOR_LOSS_SLACK = Duration.ofSeconds(10);

    static final Duration POLL = Duration.ofMillis(100);
    static final int LISTEN_BACKLOG = 16;

    private static final List<Check> CHECKS = catalog();

    private IsolationConformance() {
    }

    private static List<Check> catalog() {
        List<Check> all = new ArrayList<>();
        all.addAll(RegistryChecks.all());
        all.addAll(LifecycleChecks.all());
        all.addAll(ProcessChecks.all());
        all.addAll(MediationChecks.all());
        all.addAll(InvariantChecks.all());
        Set<String> names = new HashSet<>();
        for (Check check : all) {
            if (!names.add(check.name())) {
                throw new IllegalStateException("two checks named " + check.name());
            }
        }
        return List.copyOf(all);
    }

    /** @return the name of every check, in the order they run */
    public static List<String> checkNames() {
        return CHECKS.stream().map(Check::name).toList();
    }

    /**
     * @param target the backend under test
     * @return every check as a dynamic test named by its check name
     */
    public static Stream<DynamicNode> checks(ConformanceTarget target) {
        return checks(target, name -> true);
    }

    /**
     * Some of the checks, for a backend's focused test or the kit's own tests. A backend's
     * conformance run uses {@link #checks(ConformanceTarget)}: every check applies to every backend.
     *
     * @param target  the backend under test
     * @param include which check names to run
     * @return the selected checks as dynamic tests
     */
    public static Stream<DynamicNode> checks(ConformanceTarget target, Predicate<String> include) {
        if (target == null || include == null) {
            throw new IllegalArgumentException("a target and a selection are required");
        }
        return CHECKS.stream()
                .filter(check -> include.test(check.name()))
                .map(check -> DynamicTest.dynamicTest(check.name(), () -> run(target, check)));
    }

    private static void run(ConformanceTarget target, Check check) {
        assertTimeoutPreemptively(CHECK_BOUND, () -> {
            try (Workbench bench = new Workbench(target)) {
                check.body().run(bench);
            }
        }, () -> check.name() + " did not finish within " + CHECK_BOUND);
    }
}
