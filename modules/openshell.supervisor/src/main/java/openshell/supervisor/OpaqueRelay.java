package openshell.supervisor;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.util.function.LongConsumer;

import openshell.isolation.ByteChannel;

/**
 * Relays the bytes of a {@code tcp} endpoint both ways as they are. Each direction has one bounded
 * buffer; an end of stream half-closes the other side, so protocols that shut down one direction
 * keep working; an error closes both.
 */
final class OpaqueRelay {
    private OpaqueRelay() {
    }

    static void run(LiveRelay relay, ByteChannel workload, Socket upstream, MediationMetrics metrics, int bufferBytes) {
        Thread out = Thread.ofVirtual().name("relay-out").start(() -> {
            try {
                copy(workload.input(), upstream.getOutputStream(), bufferBytes, metrics::bytesOut);
                upstream.shutdownOutput();
            } catch (IOException | RuntimeException e) {
                relay.close();
            }
        });
        try {
            copy(upstream.getInputStream(), workload.output(), bufferBytes, metrics::bytesIn);
            workload.output().close();
        } catch (IOException | RuntimeException e) {
            relay.close();
        }
        try {
            out.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            relay.close();
        }
    }

    static void copy(InputStream in, OutputStream out, int bufferBytes, LongConsumer counter) throws IOException {
        byte[] buf = new byte[bufferBytes];
        int n;
        while ((n = in.read(buf)) >= 0) {
            if (n > 0) {
                out.write(buf, 0, n);
                out.flush();
                counter.accept(n);
            }
        }
    }
}
