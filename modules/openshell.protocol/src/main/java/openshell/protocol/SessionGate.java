package openshell.protocol;

/**
 * The reconnect rules of one runtime generation. The first attach pins the logical
 * supervisor; later attaches must come from the same supervisor with a strictly higher
 * credential epoch, and only then replace (and close) the previous link. A link of the same
 * epoch never preempts a live one. Control calls are served only on the attached link.
 */
final class SessionGate {
    private String pinnedSupervisor;
    private ServedLink live;
    private long liveEpoch;

    /** Attaches a link; returns whether it resumed an existing session. */
    boolean attach(String supervisorId, long epoch, ServedLink link) {
        if (supervisorId.isEmpty()) {
            throw new ProtocolException(Refusal.INVALID_ARGUMENT, "attach without a supervisor id");
        }
        ServedLink replaced;
        boolean resumed;
        synchronized (this) {
            if (pinnedSupervisor == null) {
                pinnedSupervisor = supervisorId;
                live = link;
                liveEpoch = epoch;
                return false;
            }
            if (!pinnedSupervisor.equals(supervisorId)) {
                throw new ProtocolException(Refusal.SUPERVISOR_MISMATCH, "generation is pinned to another supervisor");
            }
            if (live == link) {
                return true;
            }
            if (epoch <= liveEpoch) {
                if (live != null && live.isOpen()) {
                    throw new ProtocolException(Refusal.ATTACH_CONFLICT, "a live link holds epoch " + liveEpoch);
                }
                throw new ProtocolException(Refusal.TOKEN_STALE_EPOCH, "resume needs an epoch above " + liveEpoch);
            }
            replaced = live;
            live = link;
            liveEpoch = epoch;
            resumed = true;
        }
        if (replaced != null) {
            replaced.close(Refusal.ATTACH_CONFLICT);
        }
        return resumed;
    }

    synchronized boolean isLive(ServedLink link) {
        return live == link && link.isOpen();
    }
}
