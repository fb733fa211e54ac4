package openshell.isolation.conformance;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.concurrent.atomic.AtomicInteger;

import openshell.isolation.TcpDestination;

/**
 * A TCP listener of the kit on {@link LoopbackOnly#GROUND_TRUTH}: the ground truth for egress. The
 * address is not loopback to a workload, so its connects are mediated; it exists only on the
 * loopback of the suite's own network namespace, so a workload program reaches it only around
 * its boundary, and a check never sends a byte off this machine. If a workload program reaches it
 * without a pending open having been allowed, egress bypassed mediation, whatever the program
 * reports.
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
        LoopbackOnly.assertInForce();
        InetAddress host = LoopbackOnly.GROUND_TRUTH;
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
