package openshell.isolation.conformance;

import static org.junit.jupiter.api.Assertions.fail;

import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.List;

/**
 * The network rule of every suite that runs sandboxes: its JVM runs in a network namespace of its
 * own whose only interface is loopback ({@code loopback-only/bin/java} beside this module's pom,
 * surefire's {@code <jvm>}), so a test can dial or query nothing but this machine's loopback and
 * the namespaces it creates itself. A suite asserts it before it starts anything, so that a run
 * outside that namespace (an IDE, a forgotten {@code <jvm>}) fails instead of reaching the host's
 * network or its configured resolver.
 */
public final class LoopbackOnly {
    /**
     * The kit's ground-truth address: TEST-NET-2, never routed, put on the namespace's loopback by
     * the wrapper. A workload reaches it only by leaving its own network namespace.
     */
    public static final InetAddress GROUND_TRUTH = InetAddress.ofLiteral("198.51.100.1");

    private LoopbackOnly() {
    }

    /** Fails unless loopback is this network namespace's only interface and it holds {@link #GROUND_TRUTH}. */
    public static void assertInForce() {
        List<NetworkInterface> interfaces;
        try {
            interfaces = NetworkInterface.networkInterfaces().toList();
        } catch (SocketException e) {
            fail("cannot list this namespace's network interfaces: " + e);
            return;
        }
        List<String> names = interfaces.stream().map(NetworkInterface::getName).toList();
        if (!names.equals(List.of("lo"))) {
            fail("this JVM sees the network interfaces " + names + ": a sandbox suite runs only in a network namespace whose"
                    + " only interface is loopback (modules/openshell.isolation.conformance/loopback-only/bin/java as"
                    + " surefire's <jvm>), so that no test reaches another machine or the host's resolver");
        }
        if (interfaces.getFirst().inetAddresses().noneMatch(GROUND_TRUTH::equals)) {
            fail("loopback does not hold " + GROUND_TRUTH.getHostAddress() + ": run through loopback-only/bin/java, which puts it there");
        }
    }
}
