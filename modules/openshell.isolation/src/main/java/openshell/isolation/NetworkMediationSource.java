package openshell.isolation;

import java.time.Duration;
import java.util.Optional;

/**
 * The one way out of a boundary: every TCP open and DNS query of the workload arrives here and
 * waits for the supervisor's decision. Closing the source fails every pending and later request
 * closed (MEDIATION_UNAVAILABLE).
 */
public interface NetworkMediationSource extends AutoCloseable {
    /**
     * @param timeout how long to wait
     * @return the next pending TCP open, or empty on timeout
     * @throws BackendException TERMINATED once the boundary or source is closed
     */
    Optional<PendingTcpOpen> acceptTcp(Duration timeout);

    /**
     * @param timeout how long to wait
     * @return the next pending DNS query, or empty on timeout
     * @throws BackendException TERMINATED once the boundary or source is closed
     */
    Optional<PendingDnsQuery> acceptDns(Duration timeout);

    /** Stops mediation: pending and later requests are denied. Idempotent. */
    @Override
    void close();
}
