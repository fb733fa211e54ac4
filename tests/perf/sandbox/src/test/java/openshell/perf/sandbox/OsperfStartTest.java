package openshell.perf.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.DataInputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The real osperf's start file in its connect and stream modes: a sandbox's agent must not
 * connect (not even for its warm-up) until the harness has seen the sandbox settle and created
 * the file, and must run as usual once it exists; and stream's timed transfers, as many as the
 * harness expects.
 */
class OsperfStartTest {
    private static final Path OSPERF = Path.of("target", "osperf");
    private static final Duration RUN = Duration.ofSeconds(60);
    /** How long the test watches for a connection that must not come. */
    private static final int HELD_MS = 1_500;

    @TempDir
    Path dir;

    @Test
    void connectWaitsForItsStartFileBeforeItsWarmUp() throws Exception {
        try (ServerSocket server = new ServerSocket(0, 64, InetAddress.getLoopbackAddress())) {
            Path start = dir.resolve("connect.start");
            ClientRun client = ClientRun.host(List.of(osperf(), "connect", "127.0.0.1", Integer.toString(server.getLocalPort()),
                    "1", "1", "1", start.toString()), RUN);
            try {
                server.setSoTimeout(HELD_MS);
                assertThrows(SocketTimeoutException.class, server::accept, "connected before the start file existed");
                Files.writeString(start, "go");
                server.setSoTimeout((int) RUN.toMillis());
                // The warm-up connect, then the timed one: each echoes one byte.
                for (int i = 0; i < 2; i++) {
                    try (Socket s = server.accept()) {
                        s.getOutputStream().write(s.getInputStream().read());
                    }
                }
                client.await("ready");
                Map<String, Object> result = client.await("result");
                client.awaitExit();
                assertEquals(1L, ((Number) result.get("ops")).longValue(), result.toString());
                assertEquals(0L, ((Number) result.get("errors")).longValue(), result.toString());
            } finally {
                client.close();
            }
        }
    }

    @Test
    void streamWaitsForItsStartFileBeforeItsWarmUp() throws Exception {
        try (ServerSocket server = new ServerSocket(0, 64, InetAddress.getLoopbackAddress())) {
            Path start = dir.resolve("stream.start");
            long bytes = 4096;
            ClientRun client = ClientRun.host(List.of(osperf(), "stream", "127.0.0.1", Integer.toString(server.getLocalPort()),
                    Long.toString(bytes), "1", start.toString()), RUN);
            try {
                server.setSoTimeout(HELD_MS);
                assertThrows(SocketTimeoutException.class, server::accept, "connected before the start file existed");
                Files.writeString(start, "go");
                server.setSoTimeout((int) RUN.toMillis());
                // The warm-up transfer, then the timed ones: an 8-byte length, the bytes, one byte of acknowledgement.
                for (int i = 0; i <= SandboxBenchmark.OSPERF_STREAM_TIMED; i++) {
                    try (Socket s = server.accept()) {
                        DataInputStream in = new DataInputStream(s.getInputStream());
                        long announced = in.readLong();
                        in.readFully(new byte[(int) announced]);
                        s.getOutputStream().write(1);
                        if (i > 0) {
                            assertEquals(bytes, announced);
                        }
                    }
                }
                client.await("ready");
                Map<String, Object> result = client.await("result");
                client.awaitExit();
                assertEquals((double) bytes * SandboxBenchmark.OSPERF_STREAM_TIMED, ((Number) result.get("bytes")).doubleValue(),
                        result.toString());
                assertEquals((long) SandboxBenchmark.OSPERF_STREAM_TIMED, ((Number) result.get("ops")).longValue(), result.toString());
            } finally {
                client.close();
            }
        }
    }

    private static String osperf() {
        assertTrue(Files.isExecutable(OSPERF), "no " + OSPERF.toAbsolutePath() + ": the compile phase builds it with gcc");
        return OSPERF.toString();
    }
}
