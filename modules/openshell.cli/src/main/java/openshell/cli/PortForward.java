package openshell.cli;

import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Deque;
import java.util.Optional;
import java.util.concurrent.Semaphore;

import jakarta.json.Json;

/**
 * {@code sandbox forward NAME [LOCAL:]PORT}: a listener on the host's loopback whose every
 * connection is relayed through the gateway and the sandbox's supervisor to {@code PORT} on the
 * sandbox's own loopback (nothing else inside or outside the sandbox is reachable this way). The
 * listener binds loopback only, so the forward never exposes the sandbox's service to the network.
 * Each connection is its own credit-controlled relay (the exec stream with a port instead of a
 * command), so a slow reader on either side slows the other down instead of filling memory; the
 * local client's half-close reaches the service, which may still answer. At most
 * {@link #MAX_CONNECTIONS} connections are relayed at once; a further one is closed at once, with a
 * line on stderr.
 */
final class PortForward {
    /** Connections relayed at once; the gateway's session bounds execs and forwards together at 64. */
    static final int MAX_CONNECTIONS = 32;

    private final GatewayClient gateway;
    private final String sandbox;
    private final int port;
    private final PrintStream err;
    private final Semaphore slots = new Semaphore(MAX_CONNECTIONS);

    private PortForward(GatewayClient gateway, String sandbox, int port, PrintStream err) {
        this.gateway = gateway;
        this.sandbox = sandbox;
        this.port = port;
        this.err = err;
    }

    /** Parses {@code [LOCAL:]PORT}, binds, prints where it listens and relays until the CLI is stopped. */
    static int run(Main main, Deque<String> in) {
        String name = Main.value(in, "sandbox forward NAME [LOCAL:]PORT");
        int[] ports = ports(Main.value(in, "sandbox forward NAME [LOCAL:]PORT"));
        if (!in.isEmpty()) {
            throw Main.usage("unexpected " + in.peek() + "; usage: sandbox forward NAME [LOCAL:]PORT");
        }
        GatewayClient gateway = GatewayClient.connect(main.state());
        // Fails early, with the usual NOT_FOUND exit, for a sandbox that does not exist.
        Main.ok(gateway.call("GET", "/v1/sandboxes/" + name));
        ServerSocket listener;
        try {
            listener = new ServerSocket();
            listener.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), ports[0]), MAX_CONNECTIONS);
        } catch (IOException e) {
            throw new CliException(CliException.FAILED, "cannot listen on 127.0.0.1:" + ports[0] + ": " + e.getMessage()
                    + "; pick another local port (LOCAL:" + ports[1] + ", or 0 for any)");
        }
        int local = listener.getLocalPort();
        main.print(Json.createObjectBuilder().add("sandbox", name).add("local", "127.0.0.1:" + local)
                .add("port", ports[1]).build(), () -> main.out().println("forwarding 127.0.0.1:" + local + " -> "
                + name + " port " + ports[1] + " (Ctrl-C to stop)"));
        main.out().flush();
        new PortForward(gateway, name, ports[1], main.err()).serve(listener);
        return 0;
    }

    /**
     * @param spec {@code PORT} or {@code LOCAL:PORT}; LOCAL may be 0 (any free port)
     * @return local and sandbox port
     */
    static int[] ports(String spec) {
        int colon = spec.indexOf(':');
        int remote = port(colon < 0 ? spec : spec.substring(colon + 1), 1);
        int local = colon < 0 ? remote : port(spec.substring(0, colon), 0);
        return new int[] {local, remote};
    }

    private static int port(String text, int lowest) {
        try {
            int p = Integer.parseInt(text);
            if (p >= lowest && p <= 65535) {
                return p;
            }
        } catch (NumberFormatException e) {
            // Reported below.
        }
        throw Main.usage("not a port (" + lowest + "..65535): " + text);
    }

    private void serve(ServerSocket listener) {
        try (listener) {
            while (true) {
                Socket connection = listener.accept();
                if (!slots.tryAcquire()) {
                    err.println("openshell: already forwarding " + MAX_CONNECTIONS + " connections; closed a new one from "
                            + connection.getRemoteSocketAddress());
                    close(connection);
                    continue;
                }
                Thread.ofVirtual().name("forward-" + connection.getPort()).start(() -> {
                    try {
                        relay(connection);
                    } finally {
                        slots.release();
                    }
                });
            }
        } catch (IOException e) {
            throw new CliException(CliException.FAILED, "the forward's listener failed: " + e.getMessage());
        }
    }

    private void relay(Socket connection) {
        try (connection) {
            ExecStream stream;
            try {
                stream = gateway.forward(sandbox, port, connection.getOutputStream());
            } catch (CliException e) {
                err.println("openshell: forward to " + sandbox + " port " + port + " refused: " + e.getMessage());
                return;
            }
            Thread pump = Thread.ofVirtual().name("forward-in").start(() -> {
                try {
                    stream.pumpStdin(connection.getInputStream());
                } catch (IOException e) {
                    stream.cancel();
                }
            });
            ExecStream.Outcome outcome = stream.await();
            Optional<String> error = outcome.error();
            error.ifPresent(e -> err.println("openshell: forwarded connection to " + sandbox + " port " + port
                    + " ended: " + e));
            // Closing the socket ends a pump still blocked on the local client.
            connection.close();
            pump.join();
        } catch (IOException e) {
            err.println("openshell: forwarded connection failed: " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void close(Socket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // Nothing was relayed on it.
        }
    }
}
