package openshell.tests.sandbox;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicInteger;
import javax.net.ssl.SSLContext;

/**
 * An upstream on the host's loopback that answers one request per connection and closes right
 * after its response, as HTTP/1.0 servers and {@code Connection: close} do: the case in which a
 * relay that cuts the workload's side at the upstream's end loses the response's tail.
 *
 * <p>Paths: {@code /len/N} (Content-Length), {@code /eof/N} (no length: the body ends with the
 * connection; HTTP/1.0 only) and {@code /chunked/N} (HTTP/1.1 only); the body is
 * {@link #body(int)}. Anything else is a 404.
 */
final class ClosingHttpServer implements AutoCloseable {
    /** Longest request head read (bytes): the clients' heads are far smaller. */
    private static final int MAX_HEAD_BYTES = 16 * 1024;

    private final ServerSocket listener;
    private final boolean http10;
    private final AtomicInteger answered = new AtomicInteger();
    private final Thread acceptor;

    private ClosingHttpServer(ServerSocket listener, boolean http10) {
        this.listener = listener;
        this.http10 = http10;
        this.acceptor = Thread.ofPlatform().daemon().name("closing-http").start(this::accept);
    }

    /** A server on 127.0.0.1 answering as HTTP/1.0 ({@code http10}) or HTTP/1.1 with {@code Connection: close}; TLS if {@code tls} is given. */
    static ClosingHttpServer start(boolean http10, SSLContext tls) throws IOException {
        InetAddress loopback = InetAddress.getLoopbackAddress();
        ServerSocket listener = tls == null ? new ServerSocket(0, 64, loopback)
                : tls.getServerSocketFactory().createServerSocket(0, 64, loopback);
        return new ClosingHttpServer(listener, http10);
    }

    int port() {
        return listener.getLocalPort();
    }

    /** @return responses written whole (a 200 with its body) */
    int answered() {
        return answered.get();
    }

    /** The body of {@code /len/N} and its siblings: printable, position-dependent, so a lost or reordered chunk shows. */
    static byte[] body(int length) {
        byte[] b = new byte[length];
        for (int i = 0; i < length; i++) {
            b[i] = (byte) (i % 64 == 63 ? '\n' : 'a' + (i / 64 + i) % 26);
        }
        return b;
    }

    private void accept() {
        while (!listener.isClosed()) {
            Socket s;
            try {
                s = listener.accept();
            } catch (IOException e) {
                return;
            }
            Thread.ofVirtual().name("closing-http-conn").start(() -> serve(s));
        }
    }

    private void serve(Socket s) {
        try (s) {
            s.setTcpNoDelay(true);
            String head = readHead(s.getInputStream());
            if (head == null) {
                return;
            }
            String[] start = head.substring(0, head.indexOf('\r')).split(" ");
            String[] path = start.length > 1 ? start[1].split("/") : new String[0];
            OutputStream out = s.getOutputStream();
            String version = http10 ? "HTTP/1.0" : "HTTP/1.1";
            String close = http10 ? "" : "Connection: close\r\n";
            if (path.length != 3 || !path[2].matches("[0-9]{1,9}")) {
                out.write((version + " 404 Not Found\r\nContent-Length: 0\r\n" + close + "\r\n").getBytes(StandardCharsets.US_ASCII));
                return;
            }
            byte[] body = body(Integer.parseInt(path[2]));
            switch (path[1]) {
            case "len" -> {
                out.write((version + " 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + body.length + "\r\n" + close
                        + "\r\n").getBytes(StandardCharsets.US_ASCII));
                out.write(body);
            }
            case "eof" -> {
                out.write((version + " 200 OK\r\nContent-Type: text/plain\r\n" + close + "\r\n").getBytes(StandardCharsets.US_ASCII));
                out.write(body);
            }
            case "chunked" -> {
                out.write((version + " 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n" + close + "\r\n")
                        .getBytes(StandardCharsets.US_ASCII));
                for (int at = 0; at < body.length; at += 7000) {
                    int n = Math.min(7000, body.length - at);
                    out.write((Integer.toHexString(n) + "\r\n").getBytes(StandardCharsets.US_ASCII));
                    out.write(body, at, n);
                    out.write("\r\n".getBytes(StandardCharsets.US_ASCII));
                }
                out.write("0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            }
            default -> {
                out.write((version + " 404 Not Found\r\nContent-Length: 0\r\n" + close + "\r\n").getBytes(StandardCharsets.US_ASCII));
                return;
            }
            }
            out.flush();
            answered.incrementAndGet();
            // Closed here at once, right after the response: the relay must still deliver all of it.
        } catch (IOException e) {
            // A client that went away: nothing was answered.
        }
    }

    private static String readHead(InputStream in) throws IOException {
        ByteArrayOutputStream head = new ByteArrayOutputStream();
        int matched = 0;
        while (head.size() < MAX_HEAD_BYTES) {
            int b = in.read();
            if (b < 0) {
                return null;
            }
            head.write(b);
            if (b == '\r') {
                matched = matched == 2 ? 3 : 1;
            } else {
                matched = b == '\n' && (matched == 1 || matched == 3) ? matched + 1 : 0;
            }
            if (matched == 4) {
                return head.toString(StandardCharsets.ISO_8859_1);
            }
        }
        return null;
    }

    @Override
    public void close() throws IOException {
        listener.close();
        try {
            acceptor.join(5_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
