package openshell.isolation.conformance.selftest;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;

/** A probe program: one TCP connect, exit 0 if it connected, 1 if not. Runs in a child JVM. */
final class ConnectProbe {
    private static final int CONNECT_TIMEOUT_MILLIS = 10_000;

    private ConnectProbe() {
    }

    static void main(String[] args) {
        try (Socket socket = new Socket()) {
            socket.connect(new InetSocketAddress(args[0], Integer.parseInt(args[1])), CONNECT_TIMEOUT_MILLIS);
        } catch (IOException e) {
            System.err.println("connect failed: " + e.getMessage());
            System.exit(1);
        }
        System.exit(0);
    }
}
