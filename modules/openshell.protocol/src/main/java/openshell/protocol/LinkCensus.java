package openshell.protocol;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Optional;

/**
 * Counts the links of one runtime endpoint. Pre-authentication links live in a bounded
 * queue: a new link always gets a slot, evicting the oldest unauthenticated one, so a flood
 * of idle connections can delay an honest caller by at most one handshake, never lock it
 * out. Authenticated links count against a separate bound that pre-auth links never touch.
 */
final class LinkCensus {
    private final int maxPreAuth;
    private final int maxControl;
    private final Deque<ServedLink> preAuth = new ArrayDeque<>();
    private int control;

    LinkCensus(int maxPreAuth, int maxControl) {
        this.maxPreAuth = maxPreAuth;
        this.maxControl = maxControl;
    }

    /** Admits a new link; returns the link evicted to make room, if any. */
    synchronized Optional<ServedLink> admit(ServedLink link) {
        ServedLink evicted = null;
        if (preAuth.size() >= maxPreAuth) {
            evicted = preAuth.pollFirst();
        }
        preAuth.addLast(link);
        return Optional.ofNullable(evicted);
    }

    /** Moves a link from pre-auth to control; false when control links are at their bound. */
    synchronized boolean promote(ServedLink link) {
        if (!preAuth.remove(link)) {
            return false;
        }
        if (control >= maxControl) {
            return false;
        }
        control++;
        return true;
    }

    synchronized void release(ServedLink link, boolean promoted) {
        if (!preAuth.remove(link) && promoted) {
            control--;
        }
    }

    synchronized int preAuthCount() {
        return preAuth.size();
    }

    synchronized int controlCount() {
        return control;
    }
}
