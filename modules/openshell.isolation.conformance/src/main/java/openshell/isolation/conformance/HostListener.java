package openshell.isolation.conformance;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.util.concurrent.atomic.AtomicInteger;

import openshell.isolation.TcpDestination;

/**
 * A TCP listener of the kit on a non-loopback host address: the ground truth for egress. If a
 * workload program reaches it without a pending open having been allowed, egress bypassed
 * mediation, whatever the program reports.
 */
final class HostListener implements AutoCloseable {
    private final ServerSocket server;
    private final TcpDestination destination;
    private final AtomicInteger accepted = new AtomicInteger();

    private HostListener(ServerSocket server, TcpDestination destination) {
        this.server = server;
        this.destination = destination;
    }

    static HostListener open() {
        InetAddress host = hostAddress();
        try {
            ServerSocket server = new ServerSocket();
            server.bind(new InetSocketAddress(host, 0), IsolationConformance.LISTEN_BACKLOG);
            HostListener listener = new HostListener(server, new TcpDestination(host, server.getLocalPort()));
            Thread.ofVirtual().name("conformance-host-listener").start(listener::acceptLoop);
            return listener;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot listen on " + host, e);
        }
    }

    /** The first non-loopback IPv4 address of an interface that is up. */
    private static InetAddress hostAddress() {
        try {
            return NetworkInterface.networkInterfaces()
                    .filter(HostListener::up)
                    .flatMap(NetworkInterface::inetAddresses)
                    .filter(a -> a instanceof Inet4Address && !a.isLoopbackAddress() && !a.isLinkLocalAddress())
                    .findFirst()
                    .orElseGet(() -> fail("this host has no non-loopback IPv4 address, so egress cannot be probed"));
        } catch (SocketException e) {
            return fail("cannot list network interfaces: " + e);
        }
    }

    private static boolean up(NetworkInterface nif) {
        try {
            return nif.isUp();
        } catch (SocketException e) {
            return false;
        }
    }

    private void acceptLoop() {
        while (!server.isClosed()) {
            try (Socket _ = server.accept()) {
                accepted.incrementAndGet();
            } catch (IOException e) {
                return;
            }
        }
    }

    TcpDestination destination() {
        return destination;
    }

    int accepted() {
        return accepted.get();
    }

    @Override
    public void close() {
        try {
            server.close();
        } catch (IOException ignored) {
            // Closing a listener the check is done with.
        }
    }
}
