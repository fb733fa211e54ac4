package openshell.protocol;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Objects;
import java.util.Optional;

/**
 * The supervisor's end of the protocol. With {@link Initiator#SUPERVISOR} it dials the
 * runtime; with {@link Initiator#RUNTIME} it listens and takes the runtime's connection.
 * Either way the resulting {@link SupervisorLink} is the TLS client and bearer caller.
 */
public final class SupervisorEndpoint implements AutoCloseable {
    private final Transport transport;
    private final Initiator initiator;
    private final TlsPin pin;
    private final TokenSlot tokens;
    private final UnixPeerPolicy peerPolicy;
    private volatile ServerSocketChannel server;

    private SupervisorEndpoint(Builder builder) {
        this.transport = Objects.requireNonNull(builder.transport, "transport");
        this.initiator = Objects.requireNonNull(builder.initiator, "initiator");
        this.pin = Objects.requireNonNull(builder.pin, "pin");
        this.tokens = Objects.requireNonNull(builder.tokens, "tokens");
        this.peerPolicy = builder.peerPolicy;
    }

    /**
     * A builder.
     *
     * @return a builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * For runtime-initiated links, opens the listening socket before the runtime dials.
     *
     * @return where the runtime must dial (the real port when TCP port 0 was asked)
     */
    public Transport listen() {
        if (initiator != Initiator.RUNTIME) {
            throw new ProtocolException(Refusal.INVALID_ARGUMENT, "the supervisor listens only for runtime-initiated links");
        }
        try {
            synchronized (this) {
                if (server == null) {
                    server = transport.listen();
                }
            }
            if (transport instanceof Transport.Tcp) {
                return Transport.tcp((InetSocketAddress) server.getLocalAddress());
            }
            return transport;
        } catch (IOException e) {
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "cannot listen on " + transport + ": " + e.getMessage(), e);
        }
    }

    /**
     * Opens one link: dials the runtime, or takes the next runtime connection (opening the
     * listener first if needed). Blocks until TLS is up and the runtime's HTTP/2 SETTINGS arrived,
     * at most {@link ProtocolLimits#HANDSHAKE_TIMEOUT} for the latter, so a link it returns is one
     * the runtime serves.
     *
     * @return the link
     */
    public SupervisorLink connect() {
        SocketChannel channel;
        try {
            if (initiator == Initiator.SUPERVISOR) {
                channel = transport.dial();
            } else {
                listen();
                channel = server.accept();
                if (transport instanceof Transport.Tcp) {
                    channel.setOption(java.net.StandardSocketOptions.TCP_NODELAY, true);
                }
            }
        } catch (IOException e) {
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "cannot reach the runtime over " + transport, e);
        }
        return SupervisorLink.open(new ChannelSocket(channel), pin, tokens, peerPolicy);
    }

    /**
     * The listening socket's transport, once {@link #listen()} ran.
     *
     * @return the listening transport
     */
    public Optional<Transport> listening() {
        return Optional.ofNullable(server).map(ignored -> listen());
    }

    @Override
    public void close() {
        ServerSocketChannel listening = server;
        if (listening != null) {
            try {
                listening.close();
            } catch (IOException ignored) {
                // closing
            }
        }
    }

    /** Builder of {@link SupervisorEndpoint}. */
    public static final class Builder {
        private Transport transport;
        private Initiator initiator;
        private TlsPin pin;
        private TokenSlot tokens;
        private UnixPeerPolicy peerPolicy = UnixPeerPolicy.sameUser();

        private Builder() {
        }

        /**
         * Where to dial or listen.
         *
         * @param transport transport
         * @return this
         */
        public Builder transport(Transport transport) {
            this.transport = transport;
            return this;
        }

        /**
         * Who opens the socket.
         *
         * @param initiator initiator
         * @return this
         */
        public Builder initiator(Initiator initiator) {
            this.initiator = initiator;
            return this;
        }

        /**
         * The launch CA pin.
         *
         * @param pin pin
         * @return this
         */
        public Builder pin(TlsPin pin) {
            this.pin = pin;
            return this;
        }

        /**
         * The token slot every call draws its bearer token from.
         *
         * @param tokens slot
         * @return this
         */
        public Builder tokens(TokenSlot tokens) {
            this.tokens = tokens;
            return this;
        }

        /**
         * Which Unix peers count as the runtime (default: the same user).
         *
         * @param peerPolicy policy
         * @return this
         */
        public Builder peerPolicy(UnixPeerPolicy peerPolicy) {
            this.peerPolicy = Objects.requireNonNull(peerPolicy);
            return this;
        }

        /**
         * Builds the endpoint.
         *
         * @return the endpoint
         */
        public SupervisorEndpoint build() {
            return new SupervisorEndpoint(this);
        }
    }
}
