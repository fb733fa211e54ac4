package openshell.tests.sandbox;

import java.net.InetAddress;
import java.util.Set;

import openshell.tests.support.LoopbackRule;

/**
 * This suite's network rule: it talks only to loopback. Its JVM runs in a network namespace whose
 * only interface is lo (the pom's {@code <jvm>}, the conformance kit's loopback-only wrapper), its
 * upstreams listen there behind operator host aliases, names no alias answers are resolved by a
 * {@link openshell.tests.support.LoopbackResolver} on loopback, and every supervisor's audit must
 * show that it dialled nothing but loopback or {@link #NAMESPACE_ADDRESS}.
 */
final class Loopback {
    /** An address the wrapper puts on the namespace's lo: not loopback to a workload, reachable only in this namespace. */
    static final InetAddress NAMESPACE_ADDRESS = InetAddress.ofLiteral("198.51.100.1");

    private Loopback() {
    }

    /** Fails unless lo is the only interface this JVM sees (so nothing can leave this machine). */
    static void assertOnly() {
        LoopbackRule.assertOnlyLoopback("tests/sandbox/pom.xml's <jvm>");
    }

    /** Every dial a supervisor recorded went to loopback or to {@link #NAMESPACE_ADDRESS}. */
    static void assertDialledOnlyLoopback(String supervisorLog) {
        LoopbackRule.assertDialledOnlyLoopback(supervisorLog, Set.of(NAMESPACE_ADDRESS));
    }
}
