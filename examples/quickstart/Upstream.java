import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.nio.charset.StandardCharsets;

/**
 * The quickstart's demo upstream, standing in for an API on the internet (this may run on a
 * machine without one): answers every request with what it saw, so a request the policy denied
 * visibly never arrives. Run: {@code java examples/quickstart/Upstream.java auto 18080}; {@code auto}
 * listens on the host's first non-loopback IPv4 address (a policy never lets a sandbox reach the
 * host's loopback), and the first line printed says where.
 */
public final class Upstream {
    private Upstream() {
    }

    public static void main(String[] args) throws IOException {
        String where = args.length > 0 ? args[0] : "auto";
        InetAddress address = where.equals("auto") ? firstNonLoopbackIpv4() : InetAddress.getByName(where);
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

    private static InetAddress firstNonLoopbackIpv4() throws IOException {
        for (NetworkInterface nic : NetworkInterface.networkInterfaces().toList()) {
            if (!nic.isUp() || nic.isLoopback()) {
                continue;
            }
            for (InetAddress a : nic.inetAddresses().toList()) {
                if (a instanceof Inet4Address && !a.isLoopbackAddress() && !a.isLinkLocalAddress()) {
                    return a;
                }
            }
        }
        throw new IOException("no non-loopback IPv4 address on this host: give one, e.g. 'Upstream.java 10.0.0.5 18080'");
    }
}
