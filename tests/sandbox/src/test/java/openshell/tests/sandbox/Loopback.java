package openshell.tests.sandbox;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * This suite's network rule: it talks only to loopback. Its JVM runs in a network namespace whose
 * only interface is lo (the pom's {@code <jvm>}, the conformance kit's loopback-only wrapper), its
 * upstreams listen there behind operator host aliases, names no alias answers are resolved by a
 * {@link Resolver} of its own on loopback, and every supervisor's audit must show that it dialled
 * nothing but loopback.
 */
final class Loopback {
    /** An address the wrapper puts on the namespace's lo: not loopback to a workload, reachable only in this namespace. */
    static final InetAddress NAMESPACE_ADDRESS = InetAddress.ofLiteral("198.51.100.1");

    private static final Pattern DESTINATION_ADDRESS = Pattern.compile("\"destination\":\\{[^}]*\"address\":\"([^\"]+)\"");

    private Loopback() {
    }

    /** Fails unless lo is the only interface this JVM sees (so nothing can leave this machine). */
    static void assertOnly() throws SocketException {
        List<String> names = NetworkInterface.networkInterfaces().map(NetworkInterface::getName).toList();
        if (!names.equals(List.of("lo"))) {
            fail("this suite runs only in a network namespace whose only interface is loopback (tests/sandbox/pom.xml's"
                    + " <jvm>, modules/openshell.isolation.conformance/loopback-only/bin/java); this JVM sees " + names);
        }
    }

    /**
     * Every dial a supervisor recorded (an audit line with an {@code upstream} outcome) went to
     * loopback or to {@link #NAMESPACE_ADDRESS}: a test never makes the supervisor reach anything else.
     */
    static void assertDialledOnlyLoopback(String supervisorLog) {
        List<String> dials = supervisorLog.lines().filter(l -> l.startsWith("{\"time\"") && l.contains("\"upstream\":\""))
                .toList();
        for (String line : dials) {
            Matcher m = DESTINATION_ADDRESS.matcher(line);
            assertTrue(m.find(), "a dial without a destination address: " + line);
            InetAddress address = InetAddress.ofLiteral(m.group(1));
            assertTrue(address.isLoopbackAddress() || address.equals(NAMESPACE_ADDRESS),
                    "the supervisor dialled " + address.getHostAddress() + ", which is neither loopback nor this test's namespace: " + line);
        }
    }

    /**
     * A UDP DNS server on 127.0.0.1 with a fixed table of A records (NXDOMAIN for every other
     * name, an empty answer for other types), recording each question: the supervisor's upstream
     * resolver ({@code --upstream-resolver}) in place of the host's.
     */
    static final class Resolver implements AutoCloseable {
        private final DatagramSocket socket;
        private final Map<String, InetAddress> table;
        private final List<String> asked = new CopyOnWriteArrayList<>();

        Resolver(Map<String, InetAddress> table) throws IOException {
            this.table = Map.copyOf(table);
            this.socket = new DatagramSocket(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            Thread.ofPlatform().daemon().name("loopback-resolver").start(this::serve);
        }

        InetSocketAddress address() {
            return new InetSocketAddress(InetAddress.getLoopbackAddress(), socket.getLocalPort());
        }

        /** @return each question as {@code name/type}, in arrival order */
        List<String> asked() {
            return List.copyOf(asked);
        }

        private void serve() {
            byte[] buffer = new byte[512];
            while (!socket.isClosed()) {
                try {
                    DatagramPacket p = new DatagramPacket(buffer, buffer.length);
                    socket.receive(p);
                    byte[] reply = answer(Arrays.copyOf(p.getData(), p.getLength()));
                    if (reply != null) {
                        socket.send(new DatagramPacket(reply, reply.length, p.getSocketAddress()));
                    }
                } catch (IOException e) {
                    // closed at the end of the test
                }
            }
        }

        /** One question, no compression (what the supervisor sends); anything else is dropped. */
        private byte[] answer(byte[] q) {
            if (q.length < 17 || (q[2] & 0x80) != 0) {
                return null;
            }
            StringBuilder name = new StringBuilder();
            int p = 12;
            while (p < q.length && q[p] != 0) {
                int len = q[p] & 0xff;
                if (len > 63 || p + 1 + len > q.length) {
                    return null;
                }
                name.append(name.isEmpty() ? "" : ".").append(new String(q, p + 1, len, StandardCharsets.US_ASCII));
                p += 1 + len;
            }
            if (p + 5 > q.length) {
                return null;
            }
            int end = p + 5;
            int type = ((q[p + 1] & 0xff) << 8) | (q[p + 2] & 0xff);
            asked.add(name + "/" + type);
            InetAddress address = table.get(name.toString());
            boolean a = address != null && type == 1 && address.getAddress().length == 4;
            byte[] r = Arrays.copyOf(q, end + (a ? 16 : 0));
            r[2] = (byte) (0x80 | (q[2] & 0x01));
            r[3] = (byte) (0x80 | (address == null ? 3 : 0));
            r[6] = 0;
            r[7] = (byte) (a ? 1 : 0);
            r[8] = r[9] = r[10] = r[11] = 0;
            if (a) {
                byte[] rr = {(byte) 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4};
                System.arraycopy(rr, 0, r, end, rr.length);
                System.arraycopy(address.getAddress(), 0, r, end + rr.length, 4);
            }
            return r;
        }

        @Override
        public void close() {
            socket.close();
        }
    }
}
