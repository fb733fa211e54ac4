package openshell.tests.support;

import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The network rule's two checks: the JVM runs where only loopback exists (a network namespace
 * whose only interface is {@code lo}: the conformance kit's loopback-only wrapper), and every dial
 * a supervisor recorded went to loopback or to an address the caller put on that namespace's lo.
 * Failures are {@link AssertionError}s, so JUnit and the benchmarks report them alike.
 */
public final class LoopbackRule {
    /** The wrapper that runs a JVM in a network namespace whose only interface is lo. */
    public static final String WRAPPER = "modules/openshell.isolation.conformance/loopback-only/bin/java";

    private static final Pattern DESTINATION_ADDRESS = Pattern.compile("\"destination\":\\{[^}]*\"address\":\"([^\"]+)\"");

    private LoopbackRule() {
    }

    /**
     * @param where what runs the caller there (its pom's {@code <jvm>}), for the message
     * @throws AssertionError unless lo is the only interface this JVM sees
     */
    public static void assertOnlyLoopback(String where) {
        List<String> names;
        try {
            names = NetworkInterface.networkInterfaces().map(NetworkInterface::getName).toList();
        } catch (SocketException e) {
            throw new AssertionError("cannot list this JVM's network interfaces: " + e.getMessage(), e);
        }
        if (!names.equals(List.of("lo"))) {
            throw new AssertionError("this runs only in a network namespace whose only interface is loopback (" + where
                    + ", " + WRAPPER + "); this JVM sees " + names);
        }
    }

    /**
     * @param supervisorLog a supervisor's log, whose audit lines record each upstream dial
     * @param alsoAllowed   addresses on the namespace's lo that are not loopback to a workload
     * @throws AssertionError if a dial went anywhere else, or names no destination address
     */
    public static void assertDialledOnlyLoopback(String supervisorLog, Set<InetAddress> alsoAllowed) {
        for (String line : supervisorLog.lines().filter(l -> l.startsWith("{\"time\"") && l.contains("\"upstream\":\"")).toList()) {
            Matcher m = DESTINATION_ADDRESS.matcher(line);
            if (!m.find()) {
                throw new AssertionError("a dial without a destination address: " + line);
            }
            InetAddress address = InetAddress.ofLiteral(m.group(1));
            if (!address.isLoopbackAddress() && !alsoAllowed.contains(address)) {
                throw new AssertionError("the supervisor dialled " + address.getHostAddress()
                        + ", which is neither loopback nor an address of this test's namespace: " + line);
            }
        }
    }
}
