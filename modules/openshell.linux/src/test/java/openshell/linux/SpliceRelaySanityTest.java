package openshell.linux;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.Optional;
import java.util.zip.CRC32C;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.Test;

/**
 * A rough look at what the relay costs against a direct loopback connection: 64-byte round trips
 * and one-way bulk throughput. It prints the numbers and asserts only that every byte arrived,
 * because timings on a shared build machine prove nothing.
 */
class SpliceRelaySanityTest {
    private static final int ROUND_TRIPS = 2000;
    private static final int MESSAGE_BYTES = 64;
    private static final int BULK_BYTES = 64 << 20;

    @Test
    void roundTripsAndBulkThroughputThroughTheRelay() throws Exception {
        // Closed in reverse: the listeners before the pool, whose close waits for their accept loops.
        try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor(); ServerSocket echo = SpliceRelayTest.listen();
             ServerSocket sink = SpliceRelayTest.listen(); ServerSocket workloadSide = SpliceRelayTest.listen();
             SpliceRelay relay = SpliceRelay.start("relay-sanity")) {
            pool.submit(() -> serve(echo, pool, SpliceRelaySanityTest::echo));
            pool.submit(() -> serve(sink, pool, SpliceRelaySanityTest::digest));

            double directRoundTrip;
            try (Socket direct = new Socket(echo.getInetAddress(), echo.getLocalPort())) {
                directRoundTrip = roundTrips(direct);
            }
            double directBulk;
            try (Socket direct = new Socket(sink.getInetAddress(), sink.getLocalPort())) {
                directBulk = bulk(direct);
            }

            SpliceRelayTest.Capture rr = new SpliceRelayTest.Capture();
            double relayedRoundTrip;
            try (Socket workload = relayed(relay, workloadSide, echo, rr)) {
                relayedRoundTrip = roundTrips(workload);
            }
            assertEquals((long) ROUND_TRIPS * MESSAGE_BYTES, rr.await().bytesAtoB());

            SpliceRelayTest.Capture stream = new SpliceRelayTest.Capture();
            double relayedBulk;
            try (Socket workload = relayed(relay, workloadSide, sink, stream)) {
                relayedBulk = bulk(workload);
            }
            assertEquals(new SpliceRelay.Outcome(BULK_BYTES, 16, Optional.empty()), stream.await());

            System.out.printf("splice relay sanity: %d-byte round trip direct %.1f us, relayed %.1f us (+%.1f us);"
                            + " bulk direct %.0f MiB/s, relayed %.0f MiB/s (%.0f %%)%n",
                    MESSAGE_BYTES, directRoundTrip, relayedRoundTrip, relayedRoundTrip - directRoundTrip,
                    directBulk, relayedBulk, 100 * relayedBulk / directBulk);
        }
    }

    private interface Connection {
        void handle(Socket socket) throws Exception;
    }

    private static Void serve(ServerSocket server, ExecutorService pool, Connection connection) throws IOException {
        while (!server.isClosed()) {
            Socket socket;
            try {
                socket = server.accept();
            } catch (IOException e) {
                return null;
            }
            pool.submit(() -> {
                try (socket) {
                    socket.setTcpNoDelay(true);
                    connection.handle(socket);
                }
                return null;
            });
        }
        return null;
    }

    private static void echo(Socket socket) throws IOException {
        InputStream in = socket.getInputStream();
        OutputStream out = socket.getOutputStream();
        byte[] buffer = new byte[MESSAGE_BYTES];
        int n;
        while ((n = in.read(buffer)) > 0) {
            out.write(buffer, 0, n);
        }
        socket.shutdownOutput();
    }

    /** Reads to end of stream, then answers with the count and CRC32C of what it read (cheap next to SHA-256). */
    private static void digest(Socket socket) throws IOException {
        CRC32C crc = new CRC32C();
        InputStream in = socket.getInputStream();
        byte[] buffer = new byte[256 * 1024];
        long count = 0;
        int n;
        while ((n = in.read(buffer)) > 0) {
            crc.update(buffer, 0, n);
            count += n;
        }
        socket.getOutputStream().write(ByteBuffer.allocate(16).putLong(count).putLong(crc.getValue()).array());
        socket.shutdownOutput();
    }

    /** The workload's socket of a new relayed connection to {@code upstream}. */
    private static Socket relayed(SpliceRelay relay, ServerSocket workloadSide, ServerSocket upstream,
                                  SpliceRelayTest.Capture done) throws IOException {
        SpliceRelayTest.Tcp a = SpliceRelayTest.connect(workloadSide);
        relay.add(a.near(), SpliceRelayTest.dial(upstream, 0), done);
        return a.far();
    }

    /** @return microseconds per round trip, after a warm-up */
    private static double roundTrips(Socket socket) throws IOException {
        socket.setTcpNoDelay(true);
        socket.setSoTimeout((int) SpliceRelayTest.WAIT.toMillis());
        byte[] message = SpliceRelayTest.random(MESSAGE_BYTES, 7);
        OutputStream out = socket.getOutputStream();
        InputStream in = socket.getInputStream();
        long start = 0;
        for (int i = 0; i < ROUND_TRIPS; i++) {
            if (i == ROUND_TRIPS / 4) {
                start = System.nanoTime();
            }
            message[0] = (byte) i;
            out.write(message);
            assertArrayEquals(message, in.readNBytes(MESSAGE_BYTES), "round trip " + i);
        }
        long elapsed = System.nanoTime() - start;
        socket.shutdownOutput();
        assertEquals(-1, in.read());
        return elapsed / 1000.0 / (ROUND_TRIPS - ROUND_TRIPS / 4);
    }

    /** @return MiB/s for {@link #BULK_BYTES} one way, checked by the far end's count and CRC */
    private static double bulk(Socket socket) throws IOException {
        socket.setSoTimeout((int) SpliceRelayTest.WAIT.toMillis());
        byte[] chunk = SpliceRelayTest.random(1 << 20, 11);
        CRC32C crc = new CRC32C();
        for (int sent = 0; sent < BULK_BYTES; sent += chunk.length) {
            crc.update(chunk);
        }
        byte[] expected = ByteBuffer.allocate(16).putLong(BULK_BYTES).putLong(crc.getValue()).array();
        OutputStream out = socket.getOutputStream();
        long start = System.nanoTime();
        for (int sent = 0; sent < BULK_BYTES; sent += chunk.length) {
            out.write(chunk);
        }
        socket.shutdownOutput();
        byte[] answer = socket.getInputStream().readAllBytes();
        long elapsed = System.nanoTime() - start;
        assertArrayEquals(expected, answer, "the far end read exactly what was sent");
        return BULK_BYTES / (1024.0 * 1024.0) / (elapsed / 1e9);
    }
}
