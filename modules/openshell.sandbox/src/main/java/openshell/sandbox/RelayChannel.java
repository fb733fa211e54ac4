package openshell.sandbox;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.Socket;
import java.util.concurrent.atomic.AtomicBoolean;
import openshell.isolation.ByteChannel;

/**
 * The runtime's end of one mediated connection: the accepted loopback socket whose peer is the
 * workload's own socket. Closing the output half-closes (the workload reads EOF); closing the
 * channel releases the relay slot.
 */
final class RelayChannel implements ByteChannel {
    private final Socket socket;
    private final Runnable onClose;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final OutputStream output;

    RelayChannel(Socket socket, Runnable onClose) throws IOException {
        this.socket = socket;
        this.onClose = onClose;
        OutputStream raw = socket.getOutputStream();
        this.output = new OutputStream() {
            @Override
            public void write(int b) throws IOException {
                raw.write(b);
            }

            @Override
            public void write(byte[] b, int off, int len) throws IOException {
                raw.write(b, off, len);
            }

            @Override
            public void close() throws IOException {
                if (!socket.isClosed() && !socket.isOutputShutdown()) {
                    socket.shutdownOutput();
                }
            }
        };
    }

    @Override
    public InputStream input() {
        try {
            return socket.getInputStream();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public OutputStream output() {
        return output;
    }

    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            try {
                socket.close();
            } catch (IOException e) {
                // Closing a socket only fails if it is already broken; the slot is released anyway.
            } finally {
                onClose.run();
            }
        }
    }
}
