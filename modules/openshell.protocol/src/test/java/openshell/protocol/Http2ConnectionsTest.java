package openshell.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.io.DataInputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import io.helidon.common.socket.PlainSocket;
import org.junit.jupiter.api.Test;

/** The HTTP/2 client put over a socket we opened: it speaks over that socket and brings no TLS of its own. */
class Http2ConnectionsTest {
    /** HTTP/2's client preface (RFC 9113, 3.4). */
    private static final byte[] PREFACE = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII);

    @Test
    void theClientOverAGivenSocketHasNoTlsOfItsOwn() throws Exception {
        try (ServerSocket listener = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             Socket client = new Socket(InetAddress.getLoopbackAddress(), listener.getLocalPort());
             Socket peer = listener.accept();
             ExecutorService executor = Executors.newVirtualThreadPerTaskExecutor()) {
            Http2Connections.Opened opened = Http2Connections.open(PlainSocket.client(client, "h2-test"), "h2-test",
                    executor, () -> { });
            byte[] preface = new byte[PREFACE.length];
            new DataInputStream(peer.getInputStream()).readFully(preface);
            assertArrayEquals(PREFACE, preface, "the client speaks over the socket it was given");
            // Helidon's default client TLS would load and parse the JDK's whole cacerts at every
            // supervisor's start, for a client that never dials.
            assertFalse(opened.client().prototype().tls().enabled(), "the client's own TLS");
        }
    }
}
