package openshell.isolation;

/**
 * A DNS query the workload sent to its resolver, waiting for an answer. One-shot like
 * {@link PendingTcpOpen}.
 */
public interface PendingDnsQuery {
    /** Largest DNS message handled (TCP framing limit). */
    int MAX_MESSAGE_BYTES = 65535;

    /** @return the query message (a copy), wire format */
    byte[] query();

    /** @return which program asks, or why that is unknown */
    IdentityResolution identity();

    /**
     * @param response the response message, wire format, at most {@link #MAX_MESSAGE_BYTES}
     * @throws BackendException INVALID if already answered or too large
     */
    void answer(byte[] response);

    /**
     * Drops the query with the reason.
     *
     * @param reason why
     * @throws BackendException INVALID if already answered
     */
    void refuse(DenyReason reason);
}
