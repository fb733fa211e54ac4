package openshell.tests.escape;

import java.util.Set;

import openshell.tests.support.LoopbackRule;

/**
 * This suite's network rule: it talks only to loopback. Its JVM runs in a network namespace whose
 * only interface is lo (the pom's {@code <jvm>}, the conformance kit's loopback-only wrapper), so
 * an attempt that got around the sandbox could reach nothing beyond this machine either, and the
 * supervisor's audit must show that it dialled nothing but loopback.
 */
final class Loopback {
    private Loopback() {
    }

    /** Fails unless lo is the only interface this JVM sees. */
    static void assertOnly() {
        LoopbackRule.assertOnlyLoopback("tests/escape/pom.xml's <jvm>");
    }

    /** Every dial the supervisor recorded (an audit line with an {@code upstream} outcome) went to loopback. */
    static void assertDialledOnlyLoopback(String supervisorLog) {
        LoopbackRule.assertDialledOnlyLoopback(supervisorLog, Set.of());
    }
}
