package openshell.protocol;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A TCP forwarder that can go silent: after {@link #freeze()} it stops moving bytes but
 * keeps every socket open, like a peer that hung or a network path that died without a
 * FIN or RST.
 */
final class BlackHole implements AutoCloseable {
    private final ServerSocket listener;
    private final InetSocketAddress target;
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();
    private volatile boolean frozen;

    BlackHole(InetSocketAddress target) throws IOException {
        this.target = target;
        this.listener = new ServerSocket(0, 8, InetAddress.getLoopbackAddress());
        Thread.ofVirtual().start(this::accept);
    }

    InetSocketAddress address() {
        return new InetSocketAddress(InetAddress.getLoopbackAddress(), listener.getLocalPort());
    }

    void freeze() {
        frozen = true;
    }

    private void accept() {
        try {
            while (true) {
                Socket in = listener.accept();
                Socket out = new Socket(target.getAddress(), target.getPort());
                in.setTcpNoDelay(true);
                out.setTcpNoDelay(true);
                sockets.add(in);
                sockets.add(out);
                Thread.ofVirtual().start(() -> pump(in, out));
                Thread.ofVirtual().start(() -> pump(out, in));
            }
        } catch (IOException closed) {
            // listener closed
        }
    }

    private void pump(Socket from, Socket to) {
        byte[] buffer = new byte[16384];
        try {
            while (true) {
                int n = from.getInputStream().read(buffer);
                if (n < 0) {
                    return;
                }
                if (frozen) {
                    // Swallow silently; never close.
                    continue;
                }
                to.getOutputStream().write(buffer, 0, n);
            }
        } catch (IOException ended) {
            // one side closed
        }
    }

    @Override
    public void close() throws IOException {
        listener.close();
        for (Socket socket : sockets) {
            socket.close();
        }
    }
}
