package openshell.protocol;

import java.util.Objects;

/**
 * Decides whether a Unix socket peer may talk to this endpoint at all. The default admits
 * only the same user as this process; a process-tree check (peer pid under the expected
 * ancestor) is composed in with {@link #and(UnixPeerPolicy)} by a module that can read the
 * peer pid (the JDK exposes only user and group).
 */
@FunctionalInterface
public interface UnixPeerPolicy {
    /**
     * Checks a peer.
     *
     * @param peer the peer
     * @throws ProtocolException {@link Refusal#PEER_REFUSED} to refuse
     */
    void check(UnixPeer peer);

    /**
     * Admits only peers running as the given user.
     *
     * @param user the expected user name
     * @return the policy
     */
    static UnixPeerPolicy user(String user) {
        Objects.requireNonNull(user);
        return peer -> {
            if (!user.equals(peer.user())) {
                throw new ProtocolException(Refusal.PEER_REFUSED, "peer user '" + peer.user() + "' is not '" + user + "'");
            }
        };
    }

    /**
     * Admits only peers running as the same user as this process.
     *
     * @return the policy
     */
    static UnixPeerPolicy sameUser() {
        return user(System.getProperty("user.name"));
    }

    /**
     * Both policies must admit.
     *
     * @param next the second check
     * @return the combined policy
     */
    default UnixPeerPolicy and(UnixPeerPolicy next) {
        Objects.requireNonNull(next);
        return peer -> {
            check(peer);
            next.check(peer);
        };
    }
}
