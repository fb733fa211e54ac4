package openshell.gateway.store;

import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;

import io.helidon.dbclient.DbClient;
import io.helidon.dbclient.DbClientException;
import io.helidon.dbclient.DbRow;
import openshell.gateway.GatewayException;
import openshell.gateway.GatewayException.Reason;
import openshell.isolation.SandboxId;

/**
 * Which gateway replica manages each sandbox, kept in the shared database so that replicas need
 * no coordinator but PostgreSQL's own transactions. A lease names its holder, an expiry and a
 * fencing epoch that only rises: it goes up by one each time the lease changes hands (acquired
 * when free or expired, handed over), never on a renewal, so whatever a replica did under an older
 * epoch can be told apart and refused. Every change is one conditional statement (compare and
 * set on holder, epoch and expiry): of two replicas racing for one lease exactly one wins.
 *
 * <p>Times are epoch milliseconds of the caller's clock: replicas' clocks must agree to well
 * within the holder's safety margin (NTP does), because a lease is judged expired by the clock of
 * whoever reads it, and a lease is expired at its expiry instant exactly.
 */
public final class LeaseStore {
    /** How long a lease lasts from its last acquisition or renewal. */
    public static final Duration LEASE_DURATION = Duration.ofSeconds(15);
    /** Longest API address a replica may record. */
    public static final int MAX_API_URL_CHARS = 512;

    private final DbClient db;

    LeaseStore(DbClient db) {
        this.db = db;
    }

    /**
     * One sandbox's lease as stored.
     *
     * @param sandbox   the sandbox
     * @param holder    the managing replica's id
     * @param epoch     the fencing epoch, 1 for the first grant
     * @param expiresAt when it lapses (it is expired at that instant)
     * @param wantedBy  a replica that holds the sandbox's supervisor session and asks for the lease
     */
    public record Lease(SandboxId sandbox, String holder, long epoch, Instant expiresAt, Optional<String> wantedBy) {
        /**
         * @param now the reader's time
         * @return whether the lease is still in force then
         */
        public boolean liveAt(Instant now) {
            return now.isBefore(expiresAt);
        }
    }

    /**
     * A replica as it last reported itself.
     *
     * @param id          its stable id
     * @param apiUrl      where its API listens, for forwarding
     * @param incarnation the random id of its current process
     * @param startedAt   when that process started
     * @param heartbeatAt when it last said it was alive
     */
    public record Replica(String id, String apiUrl, String incarnation, Instant startedAt, Instant heartbeatAt) {
        /**
         * @param now the reader's time
         * @return whether it reported itself alive within one lease duration
         */
        public boolean aliveAt(Instant now) {
            return now.isBefore(heartbeatAt.plus(LEASE_DURATION));
        }
    }

    /**
     * @param id the sandbox
     * @return its lease row, live or not
     */
    public Optional<Lease> find(SandboxId id) {
        return guarded(() -> db.execute().get("SELECT sandbox_id, holder, epoch, expires_at, wanted_by FROM sandbox_leases "
                + "WHERE sandbox_id = ?", id.value()).map(LeaseStore::lease));
    }

    /** @return every lease row */
    public List<Lease> all() {
        return guarded(() -> {
            try (var rows = db.execute().query("SELECT sandbox_id, holder, epoch, expires_at, wanted_by FROM sandbox_leases "
                    + "ORDER BY sandbox_id")) {
                return rows.map(LeaseStore::lease).toList();
            }
        });
    }

    /**
     * @param replica a replica's id
     * @return the leases it holds (live or not)
     */
    public List<Lease> heldBy(String replica) {
        return guarded(() -> {
            try (var rows = db.execute().query("SELECT sandbox_id, holder, epoch, expires_at, wanted_by FROM sandbox_leases "
                    + "WHERE holder = ? ORDER BY sandbox_id", replica)) {
                return rows.map(LeaseStore::lease).toList();
            }
        });
    }

    /**
     * @param now the caller's time
     * @return the recorded sandboxes that no replica manages: no lease, or an expired one
     */
    public List<SandboxId> unmanaged(Instant now) {
        return guarded(() -> {
            try (var rows = db.execute().query("SELECT s.id FROM sandboxes s LEFT JOIN sandbox_leases l ON l.sandbox_id = s.id "
                    + "WHERE l.sandbox_id IS NULL OR l.expires_at <= ? ORDER BY s.created_at, s.id", now.toEpochMilli())) {
                return rows.map(r -> new SandboxId(r.column(1).get(String.class))).toList();
            }
        });
    }

    /**
     * Takes the lease if nobody holds it (no row, or an expired one, whoever held it): the epoch
     * rises by one (1 for a new row). A live lease, even this replica's own, is left alone.
     *
     * @param id      the sandbox (its record need not exist yet: a create leases first)
     * @param replica the acquiring replica
     * @param now     the caller's time
     * @return the new lease, or empty if another replica's lease is live or another acquirer won
     */
    public Optional<Lease> acquire(SandboxId id, String replica, Instant now) {
        Instant expires = now.plus(LEASE_DURATION);
        Optional<Lease> current = find(id);
        if (current.isEmpty()) {
            try {
                long n = db.execute().insert("INSERT INTO sandbox_leases (sandbox_id, holder, epoch, expires_at) VALUES (?, ?, 1, ?)",
                        id.value(), replica, expires.toEpochMilli());
                return n == 1 ? Optional.of(new Lease(id, replica, 1, expires, Optional.empty())) : Optional.empty();
            } catch (DbClientException e) {
                // Another replica inserted first (its primary key won), or the database failed: either way not ours.
                if (find(id).isPresent()) {
                    return Optional.empty();
                }
                throw unavailable(e);
            }
        }
        Lease seen = current.get();
        if (seen.liveAt(now)) {
            return Optional.empty();
        }
        long n = guarded(() -> db.execute().update("UPDATE sandbox_leases SET holder = ?, epoch = epoch + 1, expires_at = ?, "
                        + "wanted_by = NULL WHERE sandbox_id = ? AND epoch = ? AND expires_at <= ?",
                replica, expires.toEpochMilli(), id.value(), seen.epoch(), now.toEpochMilli()));
        return n == 1 ? Optional.of(new Lease(id, replica, seen.epoch() + 1, expires, Optional.empty())) : Optional.empty();
    }

    /**
     * Extends a live lease its holder still holds at the epoch it was granted.
     *
     * @param id      the sandbox
     * @param replica the holder
     * @param epoch   the epoch it holds
     * @param now     the caller's time
     * @return the renewed lease (same epoch), or empty if it expired, changed hands or is gone
     */
    public Optional<Lease> renew(SandboxId id, String replica, long epoch, Instant now) {
        Instant expires = now.plus(LEASE_DURATION);
        long n = guarded(() -> db.execute().update("UPDATE sandbox_leases SET expires_at = ? "
                        + "WHERE sandbox_id = ? AND holder = ? AND epoch = ? AND expires_at > ?",
                expires.toEpochMilli(), id.value(), replica, epoch, now.toEpochMilli()));
        return n == 1 ? find(id).filter(l -> l.epoch() == epoch && l.holder().equals(replica)) : Optional.empty();
    }

    /**
     * Confirms in the database that the lease is still the caller's at this epoch and live: the
     * fencing check right before an action that must not run twice.
     *
     * @param id      the sandbox
     * @param replica the holder
     * @param epoch   the epoch it was granted
     * @param now     the caller's time
     * @return whether it still holds it
     */
    public boolean holds(SandboxId id, String replica, long epoch, Instant now) {
        return find(id).filter(l -> l.holder().equals(replica) && l.epoch() == epoch && l.liveAt(now)).isPresent();
    }

    /**
     * Gives a lease up so any replica may take it at once; the epoch stays, so the next holder's is higher.
     *
     * @return whether it was the caller's at that epoch
     */
    public boolean release(SandboxId id, String replica, long epoch) {
        return guarded(() -> db.execute().update("UPDATE sandbox_leases SET expires_at = 0, wanted_by = NULL "
                + "WHERE sandbox_id = ? AND holder = ? AND epoch = ?", id.value(), replica, epoch)) == 1;
    }

    /**
     * Hands a live lease to another replica: the epoch rises, the expiry starts again.
     *
     * @return the new holder's lease, or empty if the caller no longer held it at that epoch
     */
    public Optional<Lease> transfer(SandboxId id, String replica, long epoch, String to, Instant now) {
        Instant expires = now.plus(LEASE_DURATION);
        long n = guarded(() -> db.execute().update("UPDATE sandbox_leases SET holder = ?, epoch = epoch + 1, expires_at = ?, "
                        + "wanted_by = NULL WHERE sandbox_id = ? AND holder = ? AND epoch = ? AND expires_at > ?",
                to, expires.toEpochMilli(), id.value(), replica, epoch, now.toEpochMilli()));
        return n == 1 ? Optional.of(new Lease(id, to, epoch + 1, expires, Optional.empty())) : Optional.empty();
    }

    /**
     * Asks for a lease another replica holds (this one has the sandbox's supervisor session).
     *
     * @return whether a lease row of another holder was marked
     */
    public boolean want(SandboxId id, String replica) {
        return guarded(() -> db.execute().update("UPDATE sandbox_leases SET wanted_by = ? WHERE sandbox_id = ? AND holder <> ?",
                replica, id.value(), replica)) == 1;
    }

    /**
     * Removes a deleted sandbox's lease, whoever holds it.
     *
     * @param id the sandbox
     */
    public void delete(SandboxId id) {
        guarded(() -> db.execute().delete("DELETE FROM sandbox_leases WHERE sandbox_id = ?", id.value()));
    }

    /**
     * Removes expired leases of sandboxes that have no record (a create that failed halfway, a
     * delete whose holder died before it removed its lease). A live one is left: a create leases
     * before it records.
     *
     * @param now the caller's time
     * @return how many went
     */
    public long removeOrphans(Instant now) {
        return guarded(() -> db.execute().delete("DELETE FROM sandbox_leases WHERE expires_at <= ? "
                + "AND sandbox_id NOT IN (SELECT id FROM sandboxes)", now.toEpochMilli()));
    }

    /**
     * Records a replica's process at start. Refused while another process with the same replica
     * id reported itself alive within one lease duration: two processes must never hold one
     * replica's leases.
     *
     * @param replica the replica as it starts
     * @throws GatewayException CONFLICT naming the live process's address
     */
    public void register(Replica replica) {
        register(replica, false);
    }

    /**
     * Records a replica's process at start, as {@link #register(Replica)}.
     *
     * @param replica         the replica as it starts
     * @param predecessorDead whether the caller knows the registered process of this id is gone
     *                        (it holds the state directory's lock on the same host): then it is
     *                        replaced at once, its leases stay this replica's
     */
    public void register(Replica replica, boolean predecessorDead) {
        if (replica.apiUrl().length() > MAX_API_URL_CHARS) {
            throw new GatewayException(Reason.INVALID, "the API address is limited to " + MAX_API_URL_CHARS + " characters");
        }
        Optional<Replica> before = replica(replica.id());
        if (before.isPresent() && !predecessorDead && !before.get().incarnation().equals(replica.incarnation())
                && before.get().aliveAt(replica.heartbeatAt())) {
            throw new GatewayException(Reason.CONFLICT, "replica " + replica.id() + " is already running at "
                    + before.get().apiUrl() + " (alive " + before.get().heartbeatAt() + "); each replica needs its own "
                    + "state directory, or wait " + LEASE_DURATION + " after the old process is gone");
        }
        guarded(() -> {
            if (before.isEmpty()) {
                try {
                    return db.execute().insert("INSERT INTO gateway_replicas (replica_id, api_url, incarnation, started_at, "
                                    + "heartbeat_at) VALUES (?, ?, ?, ?, ?)", replica.id(), replica.apiUrl(),
                            replica.incarnation(), replica.startedAt().toEpochMilli(), replica.heartbeatAt().toEpochMilli());
                } catch (DbClientException e) {
                    throw new GatewayException(Reason.CONFLICT, "replica " + replica.id() + " started twice at once", e);
                }
            }
            long n = db.execute().update("UPDATE gateway_replicas SET api_url = ?, incarnation = ?, started_at = ?, "
                            + "heartbeat_at = ? WHERE replica_id = ? AND incarnation = ?", replica.apiUrl(),
                    replica.incarnation(), replica.startedAt().toEpochMilli(), replica.heartbeatAt().toEpochMilli(),
                    replica.id(), before.get().incarnation());
            if (n != 1) {
                throw new GatewayException(Reason.CONFLICT, "replica " + replica.id() + " started twice at once");
            }
            return n;
        });
    }

    /**
     * Says the replica's process is alive.
     *
     * @return false if another process has registered the same replica id since (this one must stop acting)
     */
    public boolean heartbeat(String replica, String incarnation, Instant now) {
        return guarded(() -> db.execute().update("UPDATE gateway_replicas SET heartbeat_at = ? WHERE replica_id = ? "
                + "AND incarnation = ?", now.toEpochMilli(), replica, incarnation)) == 1;
    }

    /**
     * Removes a stopping replica's row and gives up its leases, so others take them at once.
     *
     * @param replica     its id
     * @param incarnation its process's id (a newer process of the same id is left alone)
     */
    public void unregister(String replica, String incarnation) {
        guarded(() -> {
            long n = db.execute().delete("DELETE FROM gateway_replicas WHERE replica_id = ? AND incarnation = ?",
                    replica, incarnation);
            if (n == 1) {
                db.execute().update("UPDATE sandbox_leases SET expires_at = 0, wanted_by = NULL WHERE holder = ?", replica);
            }
            return n;
        });
    }

    /**
     * @param id a replica's id
     * @return how it last reported itself
     */
    public Optional<Replica> replica(String id) {
        return guarded(() -> db.execute().get("SELECT replica_id, api_url, incarnation, started_at, heartbeat_at "
                + "FROM gateway_replicas WHERE replica_id = ?", id).map(LeaseStore::replica));
    }

    /** @return every replica row, live or not */
    public List<Replica> replicas() {
        return guarded(() -> {
            try (var rows = db.execute().query("SELECT replica_id, api_url, incarnation, started_at, heartbeat_at "
                    + "FROM gateway_replicas ORDER BY replica_id")) {
                return rows.map(LeaseStore::replica).toList();
            }
        });
    }

    private static Lease lease(DbRow r) {
        return new Lease(new SandboxId(r.column(1).get(String.class)), r.column(2).get(String.class),
                r.column(3).get(Long.class), Instant.ofEpochMilli(r.column(4).get(Long.class)),
                Optional.ofNullable(r.column(5).get(String.class)));
    }

    private static Replica replica(DbRow r) {
        return new Replica(r.column(1).get(String.class), r.column(2).get(String.class), r.column(3).get(String.class),
                Instant.ofEpochMilli(r.column(4).get(Long.class)), Instant.ofEpochMilli(r.column(5).get(Long.class)));
    }

    private static <T> T guarded(java.util.function.Supplier<T> work) {
        try {
            return work.get();
        } catch (DbClientException e) {
            throw unavailable(e);
        }
    }

    private static GatewayException unavailable(DbClientException e) {
        return new GatewayException(Reason.UNAVAILABLE, "lease store failed: " + e.getMessage(), e);
    }
}
