import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;

/**
 * The quickstart's demo upstream, standing in for an API on the internet (this may run on a
 * machine without one): answers every request with what it saw, so a request the policy denied
 * visibly never arrives. Run: {@code java examples/quickstart/Upstream.java 127.0.0.1 18080}.
 */
public final class Upstream {
    private Upstream() {
    }

    public static void main(String[] args) throws IOException {
        InetAddress address = InetAddress.getByName(args.length > 0 ? args[0] : "127.0.0.1");
        int port = args.length > 1 ? Integer.parseInt(args[1]) : 18080;
        HttpServer server = HttpServer.create(new InetSocketAddress(address, port), 16);
        server.createContext("/", exchange -> {
            byte[] body = ("upstream saw " + exchange.getRequestMethod() + " " + exchange.getRequestURI() + "\n")
                    .getBytes(StandardCharsets.UTF_8);
            System.out.print(new String(body, StandardCharsets.UTF_8));
            System.out.flush();
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        });
        server.start();
        System.out.println("ready " + address.getHostAddress() + ":" + port);
        System.out.flush();
    }
}
