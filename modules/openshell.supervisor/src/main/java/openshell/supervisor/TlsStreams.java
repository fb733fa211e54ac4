package openshell.supervisor;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;

import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLException;

/**
 * TLS on top of a pair of byte streams (a mediated connection is streams, not a socket): a
 * blocking {@link SSLEngine} driver with an input and an output stream of plaintext. Buffers grow
 * only to the engine's own packet and application sizes.
 */
final class TlsStreams {
    private static final ByteBuffer EMPTY = ByteBuffer.allocate(0);

    private final SSLEngine engine;
    private final InputStream netIn;
    private final OutputStream netOut;
    private ByteBuffer fromNet;
    private ByteBuffer plain;
    private ByteBuffer toNet;
    private boolean inboundDone;

    TlsStreams(SSLEngine engine, InputStream netIn, OutputStream netOut) {
        this.engine = engine;
        this.netIn = netIn;
        this.netOut = netOut;
        this.fromNet = ByteBuffer.allocate(engine.getSession().getPacketBufferSize());
        this.plain = ByteBuffer.allocate(engine.getSession().getApplicationBufferSize());
        this.toNet = ByteBuffer.allocate(engine.getSession().getPacketBufferSize());
    }

    /** Runs the handshake to completion. */
    synchronized void handshake() throws IOException {
        engine.beginHandshake();
        drive(engine.getHandshakeStatus());
    }

    private void drive(SSLEngineResult.HandshakeStatus hs) throws IOException {
        while (true) {
            switch (hs) {
                case NEED_TASK -> {
                    Runnable task;
                    while ((task = engine.getDelegatedTask()) != null) {
                        task.run();
                    }
                    hs = engine.getHandshakeStatus();
                }
                case NEED_WRAP -> hs = wrap(EMPTY).getHandshakeStatus();
                case NEED_UNWRAP, NEED_UNWRAP_AGAIN -> {
                    SSLEngineResult r = unwrap();
                    if (r == null) {
                        throw new EOFException("the peer closed during the TLS handshake");
                    }
                    hs = r.getHandshakeStatus();
                    if (r.getStatus() == SSLEngineResult.Status.CLOSED) {
                        throw new SSLException("the peer closed TLS during the handshake");
                    }
                }
                default -> {
                    return;
                }
            }
        }
    }

    /** @return the result, or null at the end of the network stream */
    private SSLEngineResult unwrap() throws IOException {
        while (true) {
            fromNet.flip();
            SSLEngineResult r;
            try {
                r = engine.unwrap(fromNet, plain);
            } finally {
                fromNet.compact();
            }
            switch (r.getStatus()) {
                case OK, CLOSED -> {
                    return r;
                }
                case BUFFER_OVERFLOW -> plain = grow(plain, engine.getSession().getApplicationBufferSize());
                case BUFFER_UNDERFLOW -> {
                    if (!fromNet.hasRemaining()) {
                        fromNet = grow(fromNet, engine.getSession().getPacketBufferSize());
                    }
                    int n = netIn.read(fromNet.array(), fromNet.position(), fromNet.remaining());
                    if (n < 0) {
                        return null;
                    }
                    fromNet.position(fromNet.position() + n);
                }
            }
        }
    }

    private SSLEngineResult wrap(ByteBuffer src) throws IOException {
        while (true) {
            toNet.clear();
            SSLEngineResult r = engine.wrap(src, toNet);
            if (r.getStatus() == SSLEngineResult.Status.BUFFER_OVERFLOW) {
                toNet = ByteBuffer.allocate(Math.max(toNet.capacity() * 2, engine.getSession().getPacketBufferSize()));
                continue;
            }
            if (toNet.position() > 0) {
                netOut.write(toNet.array(), 0, toNet.position());
                netOut.flush();
            }
            return r;
        }
    }

    private static ByteBuffer grow(ByteBuffer b, int atLeast) {
        ByteBuffer bigger = ByteBuffer.allocate(Math.max(b.capacity() * 2, atLeast));
        b.flip();
        bigger.put(b);
        return bigger;
    }

    private synchronized int read(byte[] b, int off, int len) throws IOException {
        while (plain.position() == 0) {
            if (inboundDone) {
                return -1;
            }
            SSLEngineResult r = unwrap();
            if (r == null || r.getStatus() == SSLEngineResult.Status.CLOSED) {
                inboundDone = true;
                if (r != null) {
                    drive(r.getHandshakeStatus());
                }
                continue;
            }
            drive(r.getHandshakeStatus());
        }
        plain.flip();
        int n = Math.min(len, plain.remaining());
        plain.get(b, off, n);
        plain.compact();
        return n;
    }

    private synchronized void write(byte[] b, int off, int len) throws IOException {
        ByteBuffer src = ByteBuffer.wrap(b, off, len);
        while (src.hasRemaining()) {
            SSLEngineResult r = wrap(src);
            if (r.getStatus() == SSLEngineResult.Status.CLOSED) {
                throw new SSLException("TLS is closed");
            }
            drive(r.getHandshakeStatus());
        }
    }

    /** Sends close_notify (best effort). */
    synchronized void closeOutbound() {
        engine.closeOutbound();
        try {
            while (!engine.isOutboundDone()) {
                wrap(EMPTY);
            }
        } catch (IOException e) {
            // The peer is gone; the relay closes the transport anyway.
        }
    }

    InputStream input() {
        return new InputStream() {
            @Override
            public int read() throws IOException {
                byte[] one = new byte[1];
                int n = TlsStreams.this.read(one, 0, 1);
                return n < 0 ? -1 : one[0] & 0xff;
            }

            @Override
            public int read(byte[] b, int off, int len) throws IOException {
                if (len == 0) {
                    return 0;
                }
                return TlsStreams.this.read(b, off, len);
            }
        };
    }

    OutputStream output() {
        return new OutputStream() {
            @Override
            public void write(int b) throws IOException {
                TlsStreams.this.write(new byte[] {(byte) b}, 0, 1);
            }

            @Override
            public void write(byte[] b, int off, int len) throws IOException {
                TlsStreams.this.write(b, off, len);
            }

            @Override
            public void flush() throws IOException {
                netOut.flush();
            }

            @Override
            public void close() {
                closeOutbound();
            }
        };
    }
}
