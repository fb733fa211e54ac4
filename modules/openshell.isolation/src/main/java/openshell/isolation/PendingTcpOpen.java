package openshell.isolation;

/**
 * A workload thread blocked in {@code connect()}, waiting for a decision. The decision is one-shot:
 * the first {@link #allow()} or {@link #deny} wins and every later one is refused.
 */
public interface PendingTcpOpen {
    /** @return where it wants to go */
    TcpDestination destination();

    /** @return which program asks, or why that is unknown */
    IdentityResolution identity();

    /** @return the socket the request came from */
    SocketIdentity socket();

    /**
     * Admits the connection: the workload's socket is connected to the returned channel.
     *
     * @return the channel to the workload's socket
     * @throws BackendException DENIED if the identity is unresolved (the request is then denied);
     *                          INVALID if already decided; TERMINATED if the caller went away
     */
    ByteChannel allow();

    /**
     * Refuses the connection with the errno for the reason.
     *
     * @param reason why
     * @throws BackendException INVALID if already decided
     */
    void deny(DenyReason reason);
}
