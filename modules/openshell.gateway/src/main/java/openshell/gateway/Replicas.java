package openshell.gateway;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import java.util.function.Predicate;
import java.util.stream.Collectors;

import openshell.gateway.GatewayException.Reason;
import openshell.gateway.store.LeaseStore;
import openshell.gateway.store.LeaseStore.Lease;
import openshell.gateway.store.LeaseStore.Replica;
import openshell.isolation.SandboxId;

/**
 * This gateway's part among the replicas on one database: its stable replica id (kept in the
 * state directory), its row in {@code gateway_replicas}, and the ownership leases of the
 * sandboxes it manages ({@link LeaseStore}). Every {@link #RENEW_PERIOD} it says it is alive,
 * renews what it holds, hands over a lease another replica asks for when it has no supervisor
 * session of that sandbox, and takes the leases nobody holds (no lease, or an expired one).
 *
 * <p>Only a replica holding a sandbox's lease acts on it: observation, driver calls, cleanup,
 * token refresh, supervisor sessions. Each action checks its {@link Grant} right before it acts.
 * The holder judges its own lease lapsed {@link #SAFETY_MARGIN} before the database's expiry,
 * counting from the moment it sent the renewal (on its monotonic clock), so it has stopped before
 * any other replica can take the lease over; a replica that cannot reach the database therefore
 * stops acting within {@code LEASE_DURATION - SAFETY_MARGIN} and rejoins as a follower when the
 * database answers again. With the embedded H2 store there is one replica, which holds every lease.
 */
final class Replicas implements AutoCloseable {
    /** How often the replica renews its leases and takes free ones. */
    static final Duration RENEW_PERIOD = Duration.ofSeconds(5);
    /**
     * How much earlier than the stored expiry the holder stops acting on a lease it could not
     * renew: covers the time a renewal takes to commit and clock disagreement between replicas.
     */
    static final Duration SAFETY_MARGIN = Duration.ofSeconds(5);
    /** Most free leases one pass takes; the rest wait for the next pass (or another replica). */
    static final int MAX_ACQUIRED_PER_PASS = 256;
    /** The file in the state directory holding the replica id. */
    static final String ID_FILE = "replica-id";
    /** Longest takeover after the holder dies: its lease's last expiry plus one pass of another replica. */
    static final Duration TAKEOVER_BOUND = LeaseStore.LEASE_DURATION.plus(RENEW_PERIOD);

    /**
     * What this replica was granted: it may act on the sandbox under this epoch until the
     * monotonic deadline.
     *
     * @param sandbox        the sandbox
     * @param epoch          the lease's fencing epoch
     * @param validUntilNanos {@link System#nanoTime()} after which it stops acting
     */
    record Grant(SandboxId sandbox, long epoch, long validUntilNanos) {
    }

    /**
     * The replica that manages a sandbox when it is not this one.
     *
     * @param replica its id
     * @param apiUrl  where its API listens
     */
    record Manager(String replica, String apiUrl) {
    }

    private final LeaseStore leases;
    private final String id;
    /** This process: its host, so that a successor on the same host knows its predecessor, and a random part. */
    private final String incarnation = host() + "/" + UUID.randomUUID().toString().substring(0, 18);
    private volatile java.nio.channels.FileChannel stateLock;
    private final Clock clock;
    private final LongSupplier nanos;
    private final PrintStream log;
    private final Map<String, Grant> held = new ConcurrentHashMap<>();
    private final ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().name("openshell-replica-leases").daemon(true).factory());
    private volatile Predicate<SandboxId> hasSession = s -> false;
    private volatile Consumer<SandboxId> lost = s -> { };
    private volatile boolean replaced;
    private volatile boolean registered;
    private String lastError = "";

    Replicas(LeaseStore leases, String id, Clock clock, LongSupplier nanos, PrintStream log) {
        this.leases = leases;
        this.id = id;
        this.clock = clock;
        this.nanos = nanos;
        this.log = log;
    }

    /**
     * This gateway's replica: its id from the state directory, and an exclusive lock on
     * {@code <state>/replica.lock} for the process's life (the operating system drops it with the
     * process), so that while it is held no other process on this host runs this replica, and a
     * registered process of the same id on this host is a dead predecessor, replaced at once.
     *
     * @param leases the store's leases
     * @param state  the state directory
     * @return the replica, not started
     * @throws GatewayException CONFLICT when another gateway process runs on this state directory
     */
    static Replicas open(LeaseStore leases, Path state) {
        String id = loadOrCreateId(state);
        Path file = state.resolve("replica.lock");
        java.nio.channels.FileChannel channel;
        try {
            channel = java.nio.channels.FileChannel.open(file, java.nio.file.StandardOpenOption.CREATE,
                    java.nio.file.StandardOpenOption.WRITE);
            java.nio.channels.FileLock lock;
            try {
                lock = channel.tryLock();
            } catch (java.nio.channels.OverlappingFileLockException sameProcess) {
                lock = null;
            }
            if (lock == null) {
                channel.close();
                throw new GatewayException(Reason.CONFLICT, "another gateway process runs on the state directory " + state
                        + " (replica " + id + "); each replica needs its own state directory");
            }
        } catch (IOException e) {
            throw new GatewayException(Reason.UNAVAILABLE, "cannot lock " + file + ": " + e.getMessage(), e);
        }
        Replicas r = new Replicas(leases, id, Clock.systemUTC(), System::nanoTime, System.out);
        r.stateLock = channel;
        return r;
    }

    /** Drops the state directory's lock as the death of this process would; for tests. */
    void releaseStateLockForTest() throws IOException {
        stateLock.close();
    }

    private static String host() {
        try {
            String name = java.net.InetAddress.getLocalHost().getHostName();
            return name.length() > 40 ? name.substring(0, 40) : name;
        } catch (IOException e) {
            return "unknown-host";
        }
    }

    /**
     * The one replica of a gateway whose parts are made on their own (tests of the code around
     * them): it takes every lease on demand and runs no passes.
     *
     * @param leases the store's leases
     * @return the replica, id {@code solo}
     */
    static Replicas solo(LeaseStore leases) {
        return new Replicas(leases, "solo", Clock.systemUTC(), System::nanoTime, System.out);
    }

    /**
     * The replica id of a state directory, made at its first start (0600): stable across restarts,
     * distinct per state directory.
     *
     * @param state the gateway's state directory
     * @return the id
     */
    static String loadOrCreateId(Path state) {
        Path file = state.resolve(ID_FILE);
        try {
            if (!Files.exists(file)) {
                String fresh = "r-" + UUID.randomUUID().toString().substring(0, 13).replace("-", "");
                try {
                    Path tmp = Files.createTempFile(state, ".replica", ".id",
                            PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
                    Files.writeString(tmp, fresh + "\n");
                    Files.move(tmp, file);
                } catch (FileAlreadyExistsException raced) {
                    // Another start made it first; its id stands.
                }
            }
            String value = Files.readString(file).strip();
            if (!value.matches("[a-z0-9-]{1,63}")) {
                throw new GatewayException(Reason.INVALID, file + " must hold a replica id of 1..63 characters a-z, 0-9, '-'");
            }
            return value;
        } catch (IOException e) {
            throw new GatewayException(Reason.UNAVAILABLE, "cannot read or create " + file + ": " + e.getMessage(), e);
        }
    }

    /** @return this replica's id */
    String id() {
        return id;
    }

    /**
     * Registers this process (refused while another live process has the same replica id) and
     * starts the passes, the first at once.
     *
     * @param apiUrl     where this replica's API listens, for the others' forwarding
     * @param hasSession whether this replica holds a supervisor session of a sandbox
     * @param lost       told of each lease this replica stops holding (its session must end)
     */
    void start(String apiUrl, Predicate<SandboxId> hasSession, Consumer<SandboxId> lost) {
        register(apiUrl, hasSession, lost);
        scheduler.scheduleWithFixedDelay(this::guardedPass, 0, RENEW_PERIOD.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** Registers without the scheduled passes: tests drive {@link #pass()} themselves. */
    void register(String apiUrl, Predicate<SandboxId> hasSession, Consumer<SandboxId> lost) {
        this.hasSession = hasSession;
        this.lost = lost;
        Instant now = clock.instant();
        // Holding the state directory's lock, a process of this id registered from this host is dead.
        String here = incarnation.substring(0, incarnation.indexOf('/') + 1);
        boolean predecessorDead = stateLock != null && leases.replica(id).map(r -> r.incarnation().startsWith(here))
                .orElse(false);
        leases.register(new Replica(id, apiUrl, incarnation, now, now), predecessorDead);
        registered = true;
    }

    private void guardedPass() {
        try {
            pass();
            lastError = "";
        } catch (RuntimeException e) {
            if (!String.valueOf(e.getMessage()).equals(lastError)) {
                lastError = String.valueOf(e.getMessage());
                log.println("openshell gateway: replica " + id + " could not renew its leases (retried every " + RENEW_PERIOD
                        + "; each lapses " + SAFETY_MARGIN + " before its expiry): " + e.getMessage());
            }
        } finally {
            dropLapsed();
        }
    }

    /** One pass: heartbeat, renew, hand over, adopt, take free leases, remove orphans. Package-private for tests. */
    void pass() {
        if (replaced) {
            return;
        }
        long started = nanos.getAsLong();
        Instant now = clock.instant();
        if (!leases.heartbeat(id, incarnation, now)) {
            replaced = true;
            log.println("openshell gateway: another process registered replica " + id + "; this one stops managing sandboxes");
            held.forEach((k, g) -> drop(k, g, "another process registered this replica id"));
            return;
        }
        // Only the grants made before the leases were read: a create's lease taken meanwhile is not in that read.
        Map<String, Grant> before = Map.copyOf(held);
        Map<String, Lease> mine = leases.heldBy(id).stream().collect(Collectors.toMap(l -> l.sandbox().value(), l -> l));
        for (Map.Entry<String, Grant> e : before.entrySet()) {
            String sandbox = e.getKey();
            Grant grant = e.getValue();
            Lease stored = mine.get(sandbox);
            if (stored == null || stored.epoch() != grant.epoch()) {
                drop(sandbox, grant, "its lease changed hands");
                continue;
            }
            Optional<String> wanted = stored.wantedBy().filter(w -> !w.equals(id));
            if (wanted.isPresent() && !hasSession.test(grant.sandbox())) {
                // The supervisor talks to the other replica: the lease follows the session.
                held.remove(sandbox, grant);
                if (leases.transfer(grant.sandbox(), id, grant.epoch(), wanted.get(), now).isPresent()) {
                    log.println("openshell gateway: replica " + id + " handed sandbox " + sandbox + " to replica "
                            + wanted.get() + ", which holds its supervisor's session");
                }
                lost.accept(grant.sandbox());
                continue;
            }
            renew(grant.sandbox(), grant.epoch(), started, now);
        }
        // Handed over to this replica by another: adopt by renewing under the epoch the handover set.
        for (Lease l : mine.values()) {
            if (!before.containsKey(l.sandbox().value()) && !held.containsKey(l.sandbox().value()) && l.liveAt(now)) {
                renew(l.sandbox(), l.epoch(), started, now);
            }
        }
        int taken = 0;
        for (SandboxId free : leases.unmanaged(now)) {
            if (taken >= MAX_ACQUIRED_PER_PASS) {
                break;
            }
            Optional<Lease> got = leases.acquire(free, id, now);
            if (got.isPresent()) {
                taken++;
                held.put(free.value(), new Grant(free, got.get().epoch(), deadline(started)));
            }
        }
        if (taken > 0) {
            log.println("openshell gateway: replica " + id + " took over the management of " + taken + " sandbox(es)");
        }
        leases.removeOrphans(now);
    }

    private void renew(SandboxId sandbox, long epoch, long started, Instant now) {
        if (leases.renew(sandbox, id, epoch, now).isPresent()) {
            Grant renewed = new Grant(sandbox, epoch, deadline(started));
            // Never back to an earlier deadline than a renewal that finished first.
            held.merge(sandbox.value(), renewed, (old, next) -> old.epoch() == next.epoch()
                    && old.validUntilNanos() - next.validUntilNanos() > 0 ? old : next);
        } else {
            Grant old = held.get(sandbox.value());
            if (old != null && old.epoch() == epoch) {
                drop(sandbox.value(), old, "its lease could not be renewed");
            }
        }
    }

    private long deadline(long started) {
        return started + LeaseStore.LEASE_DURATION.minus(SAFETY_MARGIN).toNanos();
    }

    private void dropLapsed() {
        long now = nanos.getAsLong();
        held.forEach((k, g) -> {
            if (now - g.validUntilNanos() >= 0) {
                drop(k, g, "its lease lapsed unrenewed");
            }
        });
    }

    /** Drops a grant if it is still the one held (a newer grant of the sandbox stays). */
    private void drop(String sandbox, Grant grant, String why) {
        if (held.remove(sandbox, grant)) {
            log.println("openshell gateway: replica " + id + " no longer manages sandbox " + sandbox + ": " + why);
            lost.accept(grant.sandbox());
        }
    }

    /**
     * @param sandbox a sandbox
     * @return this replica's grant, if it holds the lease and has not judged it lapsed
     */
    Optional<Grant> grant(SandboxId sandbox) {
        Grant g = held.get(sandbox.value());
        return g != null && nanos.getAsLong() - g.validUntilNanos() < 0 && !replaced ? Optional.of(g) : Optional.empty();
    }

    /**
     * The fencing check right before an action: the grant is still this replica's, at the same
     * epoch, and not lapsed.
     *
     * @param grant what the action was begun under
     * @throws GatewayException UNAVAILABLE when the lease was lost (nothing is done then)
     */
    void check(Grant grant) {
        Optional<Grant> now = grant(grant.sandbox());
        if (now.isEmpty() || now.get().epoch() != grant.epoch()) {
            throw new GatewayException(Reason.UNAVAILABLE, "replica " + id + " no longer manages sandbox " + grant.sandbox()
                    + " (its lease of epoch " + grant.epoch() + " lapsed or changed hands); nothing was done, retry");
        }
    }

    /**
     * The fencing check against the database, for actions that must never run twice (stop,
     * start, delete): the lease is still this replica's at the grant's epoch and live there too.
     */
    void confirm(Grant grant) {
        check(grant);
        if (!leases.holds(grant.sandbox(), id, grant.epoch(), clock.instant())) {
            held.remove(grant.sandbox().value(), grant);
            throw new GatewayException(Reason.UNAVAILABLE, "replica " + id + " no longer holds the lease of sandbox "
                    + grant.sandbox() + " at epoch " + grant.epoch() + "; nothing was done, retry");
        }
    }

    /**
     * The grant to act on a sandbox: this replica's own, or the lease taken now if nobody holds it.
     *
     * @param sandbox the sandbox (a new one: its lease is taken before it is created)
     * @return the grant, or the replica that manages it when another live one does
     */
    Optional<Grant> manage(SandboxId sandbox) {
        Optional<Grant> mine = grant(sandbox);
        if (mine.isPresent() || replaced) {
            return mine;
        }
        long started = nanos.getAsLong();
        Instant now = clock.instant();
        Optional<Lease> stored = leases.find(sandbox);
        if (stored.isPresent() && stored.get().holder().equals(id) && stored.get().liveAt(now)) {
            // Handed over to this replica since the last pass.
            renew(sandbox, stored.get().epoch(), started, now);
            return grant(sandbox);
        }
        Optional<Lease> got = leases.acquire(sandbox, id, now);
        got.ifPresent(l -> held.put(sandbox.value(), new Grant(sandbox, l.epoch(), deadline(started))));
        return got.isPresent() ? grant(sandbox) : Optional.empty();
    }

    /**
     * The sandboxes among these that this replica manages, taking at once the leases nobody holds
     * (one read of every lease, then one statement per lease taken), at most
     * {@link #MAX_ACQUIRED_PER_PASS} taken per call.
     *
     * @param sandboxes recorded sandboxes
     * @return the ids of those this replica holds now
     */
    Set<String> claim(List<SandboxId> sandboxes) {
        if (replaced) {
            return Set.of();
        }
        long started = nanos.getAsLong();
        Instant now = clock.instant();
        Map<String, Lease> stored = leases.all().stream().collect(Collectors.toMap(l -> l.sandbox().value(), l -> l));
        Set<String> mine = new java.util.HashSet<>();
        int taken = 0;
        for (SandboxId s : sandboxes) {
            Lease l = stored.get(s.value());
            Optional<Grant> g = grant(s);
            if (g.isPresent() && l != null && l.epoch() == g.get().epoch() && l.holder().equals(id)) {
                mine.add(s.value());
            } else if (l != null && l.holder().equals(id) && l.liveAt(now)) {
                renew(s, l.epoch(), started, now);
                grant(s).ifPresent(x -> mine.add(s.value()));
            } else if ((l == null || !l.liveAt(now)) && taken < MAX_ACQUIRED_PER_PASS) {
                Optional<Lease> got = leases.acquire(s, id, now);
                if (got.isPresent()) {
                    taken++;
                    held.put(s.value(), new Grant(s, got.get().epoch(), deadline(started)));
                    mine.add(s.value());
                }
            } else if (g.isPresent() && l != null && !l.holder().equals(id)) {
                drop(s.value(), g.get(), "its lease changed hands");
            }
        }
        if (taken > 0) {
            log.println("openshell gateway: replica " + id + " took over the management of " + taken + " sandbox(es)");
        }
        return mine;
    }

    /**
     * @param sandbox a sandbox this replica does not manage
     * @return the live replica that does, if any
     */
    Optional<Manager> manager(SandboxId sandbox) {
        Instant now = clock.instant();
        return leases.find(sandbox).filter(l -> l.liveAt(now) && !l.holder().equals(id))
                .flatMap(l -> leases.replica(l.holder()).filter(r -> r.aliveAt(now)))
                .map(r -> new Manager(r.id(), r.apiUrl()));
    }

    /**
     * Asks the managing replica to hand the lease over (this replica has the supervisor's session).
     *
     * @param sandbox the sandbox
     */
    void want(SandboxId sandbox) {
        leases.want(sandbox, id);
    }

    /** Gives up the lease of a sandbox whose create failed before it was recorded. */
    void abandon(SandboxId sandbox) {
        held.remove(sandbox.value());
        leases.delete(sandbox);
    }

    /** Forgets a deleted sandbox's grant (its lease row went with its record). */
    void forget(SandboxId sandbox) {
        held.remove(sandbox.value());
    }

    /** @return the sandboxes this replica manages now */
    List<SandboxId> managed() {
        return held.values().stream().map(Grant::sandbox).filter(s -> grant(s).isPresent()).toList();
    }

    /** Stops the passes and gives every lease up, so the other replicas take them at once. */
    @Override
    public void close() {
        scheduler.shutdownNow();
        try {
            scheduler.awaitTermination(SandboxObserver.CLOSE_WAIT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        held.clear();
        if (registered && !replaced) {
            try {
                leases.unregister(id, incarnation);
            } catch (RuntimeException e) {
                log.println("openshell gateway: replica " + id + " could not give its leases up (they lapse within "
                        + LeaseStore.LEASE_DURATION + "): " + e.getMessage());
            }
        }
        java.nio.channels.FileChannel lock = stateLock;
        if (lock != null) {
            try {
                lock.close();
            } catch (IOException ignored) {
                // Closing drops the lock in any case.
            }
        }
    }
}
