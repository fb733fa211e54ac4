package openshell.perf.sandbox;

import java.io.IOException;
import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The benchmark's DNS server on 127.0.0.1:53 of its own network namespace: A records from a
 * fixed table, NXDOMAIN for every other name, an empty answer for other types. The direct side of
 * the dns scenario asks it, and the supervisors ask it too ({@code --upstream-resolver}), so no
 * query ever goes to the resolver the host is configured with.
 */
final class LoopbackResolver implements AutoCloseable {
    /** osperf's dns mode asks port 53. */
    static final int PORT = 53;

    private final DatagramSocket socket;
    private final Map<String, InetAddress> table;
    private final AtomicLong answered = new AtomicLong();

    LoopbackResolver(Map<String, InetAddress> table) throws IOException {
        this.table = Map.copyOf(table);
        try {
            this.socket = new DatagramSocket(new InetSocketAddress(InetAddress.getLoopbackAddress(), PORT));
        } catch (IOException e) {
            throw new IOException("cannot serve DNS on 127.0.0.1:" + PORT + " (root, in the loopback-only namespace): " + e, e);
        }
        Thread.ofPlatform().daemon().name("loopback-resolver").start(this::serve);
    }

    /** @return {@code 127.0.0.1:53}, as the gateway's {@code --upstream-resolver} takes it */
    String endpoint() {
        return InetAddress.getLoopbackAddress().getHostAddress() + ":" + PORT;
    }

    long answered() {
        return answered.get();
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
                    answered.incrementAndGet();
                }
            } catch (IOException e) {
                // closed at the end of the run
            }
        }
    }

    /** One question without compression (what osperf and the supervisor send); anything else is dropped. */
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
        InetAddress address = table.get(name.toString().toLowerCase(java.util.Locale.ROOT));
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
