package openshell.protocol;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketAddress;
import java.net.StandardSocketOptions;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;

/**
 * A {@link Socket} view of a connected, blocking {@link SocketChannel} of any family. It
 * exists because the JDK's TLS and Helidon's socket layer take a {@code Socket}, and
 * {@code SocketChannel.socket()} is unsupported for Unix domain channels. Reads and writes
 * go straight to the channel (which locks them separately, so a blocked read never blocks a
 * write); every successful read stamps {@link #lastReadNanos()} for the keepalive watchdog.
 * A vsock transport plugs in here: any connected byte channel with the same behaviour.
 */
final class ChannelSocket extends Socket {
    private final SocketChannel channel;
    private final InputStream input;
    private final OutputStream output;
    private volatile long lastReadNanos = System.nanoTime();
    private volatile int soTimeout;

    ChannelSocket(SocketChannel channel) {
        this.channel = channel;
        this.input = new InputStream() {
            @Override
            public int read() throws IOException {
                byte[] one = new byte[1];
                int n = read(one, 0, 1);
                return n < 0 ? -1 : one[0] & 0xff;
            }

            @Override
            public int read(byte[] bytes, int offset, int length) throws IOException {
                if (length == 0) {
                    return 0;
                }
                int n = channel.read(ByteBuffer.wrap(bytes, offset, length));
                if (n > 0) {
                    lastReadNanos = System.nanoTime();
                }
                return n;
            }

            @Override
            public void close() throws IOException {
                ChannelSocket.this.close();
            }
        };
        this.output = new OutputStream() {
            @Override
            public void write(int b) throws IOException {
                write(new byte[] {(byte) b}, 0, 1);
            }

            @Override
            public void write(byte[] bytes, int offset, int length) throws IOException {
                ByteBuffer buffer = ByteBuffer.wrap(bytes, offset, length);
                while (buffer.hasRemaining()) {
                    channel.write(buffer);
                }
            }

            @Override
            public void close() throws IOException {
                ChannelSocket.this.close();
            }
        };
    }

    SocketChannel channel() {
        return channel;
    }

    long lastReadNanos() {
        return lastReadNanos;
    }

    /**
     * @param elsewhereNanos when the peer was last heard outside this socket (its descriptor lane)
     * @return the later of that and this socket's last read: when the peer was last heard at all
     */
    long lastHeardNanos(long elsewhereNanos) {
        long read = lastReadNanos;
        return elsewhereNanos - read > 0 ? elsewhereNanos : read;
    }

    boolean isUnix() {
        try {
            return channel.getRemoteAddress() instanceof UnixDomainSocketAddress;
        } catch (IOException e) {
            return false;
        }
    }

    @Override
    public InputStream getInputStream() {
        return input;
    }

    @Override
    public OutputStream getOutputStream() {
        return output;
    }

    @Override
    public boolean isConnected() {
        return channel.isConnected();
    }

    @Override
    public boolean isBound() {
        return true;
    }

    @Override
    public boolean isClosed() {
        return !channel.isOpen();
    }

    @Override
    public synchronized void close() throws IOException {
        channel.close();
    }

    @Override
    public void shutdownInput() throws IOException {
        channel.shutdownInput();
    }

    @Override
    public void shutdownOutput() throws IOException {
        channel.shutdownOutput();
    }

    @Override
    public boolean isInputShutdown() {
        return !channel.isOpen();
    }

    @Override
    public boolean isOutputShutdown() {
        return !channel.isOpen();
    }

    // Timeouts are enforced by closing the channel (handshake deadline, keepalive), not here.
    @Override
    public synchronized void setSoTimeout(int timeout) {
        this.soTimeout = timeout;
    }

    @Override
    public synchronized int getSoTimeout() {
        return soTimeout;
    }

    @Override
    public void setTcpNoDelay(boolean on) throws java.net.SocketException {
        if (!isUnix()) {
            try {
                channel.setOption(StandardSocketOptions.TCP_NODELAY, on);
            } catch (IOException e) {
                throw new java.net.SocketException(e.getMessage());
            }
        }
    }

    @Override
    public boolean getTcpNoDelay() {
        return true;
    }

    @Override
    public InetAddress getInetAddress() {
        return inet(remote()).getAddress();
    }

    @Override
    public InetAddress getLocalAddress() {
        return inet(local()).getAddress();
    }

    @Override
    public int getPort() {
        return inet(remote()).getPort();
    }

    @Override
    public int getLocalPort() {
        return inet(local()).getPort();
    }

    @Override
    public SocketAddress getRemoteSocketAddress() {
        return inet(remote());
    }

    @Override
    public SocketAddress getLocalSocketAddress() {
        return inet(local());
    }

    @Override
    public String toString() {
        return "ChannelSocket[" + remote() + "]";
    }

    private SocketAddress remote() {
        try {
            return channel.getRemoteAddress();
        } catch (IOException e) {
            return null;
        }
    }

    private SocketAddress local() {
        try {
            return channel.getLocalAddress();
        } catch (IOException e) {
            return null;
        }
    }

    // Helidon's peer info and the JDK's TLS want an IP endpoint; a Unix peer is shown as loopback:0.
    private static InetSocketAddress inet(SocketAddress address) {
        if (address instanceof InetSocketAddress inet) {
            return inet;
        }
        return new InetSocketAddress(InetAddress.getLoopbackAddress(), 0);
    }
}
