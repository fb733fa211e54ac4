package openshell.supervisor;

import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * A pending connect whose workload socket the runtime can pass over the descriptor lane
 * ({@link HandoffListener}), so the supervisor relays it natively. Only the OpenShell runtime
 * backend's opens are; every other open is relayed through {@code PendingTcpOpen.allow()}.
 */
interface HandoffCapable {
    /** @return the token the runtime announced for this connection, if it can hand it off */
    Optional<byte[]> handoffToken();

    /**
     * Allows the connection with a handoff: the runtime passes the socket under the token and
     * ends the decision's stream. Decides, like {@code allow()}.
     *
     * @return completes when the runtime ended the stream, exceptionally when it failed it (the
     *         socket will then never come)
     * @throws openshell.isolation.BackendException as {@code allow()}
     */
    CompletableFuture<Void> allowHandoff();
}
