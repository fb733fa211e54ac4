package openshell.protocol;

import java.nio.channels.SocketChannel;
import java.util.Objects;

/**
 * The other end of a Unix socket as the kernel reports it ({@code SO_PEERCRED}), checked
 * before any TLS byte is exchanged.
 *
 * @param user    the peer's user (name, or the numeric uid when it has no name)
 * @param group   the peer's group
 * @param channel the connected channel, for verifiers that need more (e.g. {@link #pid()})
 */
public record UnixPeer(String user, String group, SocketChannel channel) {
    /**
     * Canonical constructor.
     *
     * @param user    user
     * @param group   group
     * @param channel channel
     */
    public UnixPeer {
        Objects.requireNonNull(user);
        Objects.requireNonNull(group);
        Objects.requireNonNull(channel);
    }

    /**
     * The pid of the peer process as the kernel recorded it at connect ({@code SO_PEERCRED}),
     * numbered in this process's pid namespace: 0 when the peer is in a pid namespace this
     * process cannot see. Needs the JVM options of {@code UnixPeerPolicy.processTree}.
     *
     * @return the pid
     * @throws ProtocolException {@link Refusal#PEER_REFUSED} when this JVM cannot read it
     */
    public long pid() {
        return PeerCredentials.pid(channel);
    }

    /**
     * The peer's uid as a number ({@code SO_PEERCRED}), in this process's user namespace. Needs the
     * JVM options of {@code UnixPeerPolicy.processTree}.
     *
     * @return the uid
     * @throws ProtocolException {@link Refusal#PEER_REFUSED} when this JVM cannot read it
     */
    public long uid() {
        return PeerCredentials.uid(channel);
    }
}
