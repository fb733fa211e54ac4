package openshell.protocol;

import java.util.Objects;

/**
 * Decides whether a Unix socket peer may talk to this endpoint at all. The default admits
 * only the same user as this process; {@link #processTree(long)} narrows a user down to the
 * processes of one launch, composed in with {@link #and(UnixPeerPolicy)}.
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
     * Admits only peers running as the given uid, compared as a number: a user name would let
     * this host's passwd decide (uid 1000 is somebody's name on most hosts, and a container's
     * user need have none here). Needs the JVM options of {@link #processTree(long)}.
     *
     * @param uid the expected uid, as this process's user namespace numbers it
     * @return the policy
     * @throws ProtocolException {@link Refusal#PEER_REFUSED} when this JVM cannot read a peer's uid
     */
    static UnixPeerPolicy uid(long uid) {
        PeerCredentials.requireAvailable();
        return peer -> {
            long actual = peer.uid();
            if (actual != uid) {
                throw new ProtocolException(Refusal.PEER_REFUSED, "peer uid " + actual + " is not " + uid);
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
     * Admits only a peer that is the given process or one of its descendants (at most
     * {@link ProtocolLimits#MAX_PEER_ANCESTRY} generations below it), as {@code /proc} shows
     * them now; the root is pinned by its start time, so once it exits nobody is admitted. The
     * JVM must run with {@code --add-exports=java.base/sun.nio.ch=openshell.protocol
     * --enable-native-access=openshell.protocol} (the JDK gives a peer's user, not its pid).
     *
     * @param root the pid of the process the expected peer runs under (e.g. the one the driver started)
     * @return the policy
     * @throws ProtocolException {@link Refusal#PEER_REFUSED} when this JVM cannot read a peer's pid,
     *                           {@link Refusal#INVALID_ARGUMENT} when {@code root} is not a running process
     */
    static UnixPeerPolicy processTree(long root) {
        PeerCredentials.requireAvailable();
        return PeerAncestry.of(java.nio.file.Path.of("/proc"), root);
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
