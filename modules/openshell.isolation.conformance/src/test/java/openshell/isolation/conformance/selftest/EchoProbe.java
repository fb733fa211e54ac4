package openshell.isolation.conformance.selftest;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;

/** A probe program: a loopback echo service for one connection. Runs in a child JVM. */
final class EchoProbe {
    private EchoProbe() {
    }

    static void main(String[] args) throws IOException {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            System.out.println("listening " + server.getLocalPort());
            System.out.flush();
            try (Socket peer = server.accept(); InputStream in = peer.getInputStream(); OutputStream out = peer.getOutputStream()) {
                in.transferTo(out);
                peer.shutdownOutput();
            }
        }
    }
}
