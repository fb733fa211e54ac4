package openshell.tests.escape;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * This suite's network rule: it talks only to loopback. Its JVM runs in a network namespace whose
 * only interface is lo (the pom's {@code <jvm>}, the conformance kit's loopback-only wrapper), so
 * an attempt that got around the sandbox could reach nothing beyond this machine either, and the
 * supervisor's audit must show that it dialled nothing but loopback.
 */
final class Loopback {
    private static final Pattern DESTINATION_ADDRESS = Pattern.compile("\"destination\":\\{[^}]*\"address\":\"([^\"]+)\"");

    private Loopback() {
    }

    /** Fails unless lo is the only interface this JVM sees. */
    static void assertOnly() throws SocketException {
        List<String> names = NetworkInterface.networkInterfaces().map(NetworkInterface::getName).toList();
        if (!names.equals(List.of("lo"))) {
            fail("this suite runs only in a network namespace whose only interface is loopback (tests/escape/pom.xml's"
                    + " <jvm>, modules/openshell.isolation.conformance/loopback-only/bin/java); this JVM sees " + names);
        }
    }

    /** Every dial the supervisor recorded (an audit line with an {@code upstream} outcome) went to loopback. */
    static void assertDialledOnlyLoopback(String supervisorLog) {
        for (String line : supervisorLog.lines().filter(l -> l.startsWith("{\"time\"") && l.contains("\"upstream\":\"")).toList()) {
            Matcher m = DESTINATION_ADDRESS.matcher(line);
            assertTrue(m.find(), "a dial without a destination address: " + line);
            assertTrue(InetAddress.ofLiteral(m.group(1)).isLoopbackAddress(), "the supervisor dialled a non-loopback address: " + line);
        }
    }
}
