package openshell.protocol;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.StandardSocketOptions;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Objects;

/**
 * Where the one protocol connection runs. Unix sockets serve process, Docker and Podman
 * topologies, TCP serves Kubernetes. Everything above this type works on a connected
 * channel, so vsock (VM topologies) is one more permitted record with its own
 * {@code dial}/{@code listen}; nothing else changes.
 */
public sealed interface Transport permits Transport.Unix, Transport.Tcp {
    /**
     * A Unix domain socket file.
     *
     * @param socketFile the socket's path
     * @return the transport
     */
    static Transport unix(Path socketFile) {
        return new Unix(socketFile);
    }

    /**
     * A TCP endpoint.
     *
     * @param address host and port (port 0 when listening picks a free port)
     * @return the transport
     */
    static Transport tcp(InetSocketAddress address) {
        return new Tcp(address);
    }

    /**
     * Connects to the listening side.
     *
     * @return a connected, blocking channel
     * @throws IOException when the peer is not there
     */
    SocketChannel dial() throws IOException;

    /**
     * Opens the listening side.
     *
     * @return a bound server channel
     * @throws IOException when the address is taken
     */
    ServerSocketChannel listen() throws IOException;

    /**
     * A Unix domain socket.
     *
     * @param socketFile path of the socket file
     */
    record Unix(Path socketFile) implements Transport {
        /**
         * Canonical constructor.
         *
         * @param socketFile path
         */
        public Unix {
            Objects.requireNonNull(socketFile);
            int bytes = socketFile.toString().getBytes(StandardCharsets.UTF_8).length;
            if (bytes > ProtocolLimits.MAX_UNIX_SOCKET_PATH_BYTES) {
                throw new ProtocolException(Refusal.INVALID_ARGUMENT, "Unix socket path is " + bytes
                        + " bytes, over the " + ProtocolLimits.MAX_UNIX_SOCKET_PATH_BYTES
                        + " a socket address can hold (choose a shorter run directory): " + socketFile);
            }
        }

        @Override
        public SocketChannel dial() throws IOException {
            return SocketChannel.open(UnixDomainSocketAddress.of(socketFile));
        }

        @Override
        public ServerSocketChannel listen() throws IOException {
            Files.deleteIfExists(socketFile);
            ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
            server.bind(UnixDomainSocketAddress.of(socketFile), ProtocolLimits.MAX_PRE_AUTH_CONNECTIONS);
            return server;
        }
    }

    /**
     * A TCP endpoint. TCP_NODELAY is always on: without it a unary call waits ~40 ms on
     * delayed ACKs.
     *
     * @param address host and port
     */
    record Tcp(InetSocketAddress address) implements Transport {
        /**
         * Canonical constructor.
         *
         * @param address address
         */
        public Tcp {
            Objects.requireNonNull(address);
        }

        @Override
        public SocketChannel dial() throws IOException {
            SocketChannel channel = SocketChannel.open();
            try {
                channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
                channel.connect(address);
                return channel;
            } catch (IOException e) {
                channel.close();
                throw e;
            }
        }

        @Override
        public ServerSocketChannel listen() throws IOException {
            ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.INET);
            server.bind(address, ProtocolLimits.MAX_PRE_AUTH_CONNECTIONS);
            return server;
        }
    }
}
