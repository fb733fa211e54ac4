import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;

/**
 * The quickstart's demo upstream, standing in for an API on the internet (this may run on a
 * machine without one). It listens on the host's loopback only, plain HTTP on one port and HTTPS
 * on another (a certificate for api.demo.test and other.demo.test from the quickstart's demo CA),
 * and answers every request with what it received, the Authorization header included, so a
 * request the policy denied visibly never arrives and a credential's real value visibly arrives
 * only where it is bound.
 *
 * <p>Run: {@code QUICKSTART_STOREPASS=... java examples/quickstart/Upstream.java HTTP_PORT HTTPS_PORT KEYSTORE.p12};
 * the keystore's password comes from the environment, never the command line.
 */
public final class Upstream {
    private Upstream() {
    }

    public static void main(String[] args) throws IOException, GeneralSecurityException {
        if (args.length != 3) {
            System.err.println("usage: QUICKSTART_STOREPASS=... java Upstream.java HTTP_PORT HTTPS_PORT KEYSTORE.p12");
            System.exit(2);
        }
        InetAddress loopback = InetAddress.getLoopbackAddress();
        HttpServer http = HttpServer.create(new InetSocketAddress(loopback, Integer.parseInt(args[0])), 16);
        http.createContext("/", echo("http"));
        HttpsServer https = HttpsServer.create(new InetSocketAddress(loopback, Integer.parseInt(args[1])), 16);
        https.setHttpsConfigurator(new HttpsConfigurator(tls(Path.of(args[2]), System.getenv("QUICKSTART_STOREPASS"))));
        https.createContext("/", echo("https"));
        http.start();
        https.start();
        System.out.println("ready http://" + loopback.getHostAddress() + ":" + args[0] + " https://"
                + loopback.getHostAddress() + ":" + args[1]);
        System.out.flush();
    }

    private static HttpHandler echo(String scheme) {
        return exchange -> {
            String auth = exchange.getRequestHeaders().getFirst("Authorization");
            String line = "upstream saw " + exchange.getRequestMethod() + " " + scheme + "://"
                    + exchange.getRequestHeaders().getFirst("Host") + exchange.getRequestURI()
                    + (auth == null ? "" : " with Authorization: " + auth);
            System.out.println(line);
            System.out.flush();
            answer(exchange, line + "\n");
        };
    }

    private static void answer(HttpExchange exchange, String text) throws IOException {
        try (InputStream in = exchange.getRequestBody()) {
            in.transferTo(OutputStream.nullOutputStream());
        }
        byte[] body = text.getBytes(StandardCharsets.UTF_8);
        exchange.sendResponseHeaders(200, body.length);
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(body);
        }
    }

    private static SSLContext tls(Path keystore, String password) throws IOException, GeneralSecurityException {
        if (password == null) {
            throw new IllegalArgumentException("QUICKSTART_STOREPASS is not set");
        }
        KeyStore store = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(keystore)) {
            store.load(in, password.toCharArray());
        }
        KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keys.init(store, password.toCharArray());
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(keys.getKeyManagers(), null, null);
        return context;
    }
}
