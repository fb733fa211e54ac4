package openshell.gateway;

import java.io.PrintStream;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Collectors;

import openshell.driver.DriverStatus;
import openshell.driver.DriverStatus.Phase;
import openshell.gateway.store.SandboxFailure;
import openshell.gateway.store.SandboxRecord;
import openshell.gateway.store.SandboxState;
import openshell.gateway.store.SandboxStore;
import openshell.isolation.SandboxId;

/**
 * The gateway's reconciler: every {@link #POLL_INTERVAL} it asks the driver what runs of each
 * PROVISIONING or RUNNING sandbox and records FAILED, with the cause and the time, once nothing
 * of its workload runs any more: its supervisor was killed (the runtime terminates the workload
 * within its own 30 s bound), its runtime or namespaces died, or its agent exited. What is left
 * is stopped first (a workload nobody would end; a holder that would keep {@code sandbox start}
 * from launching it again). The record then says what is observed, the sandbox's log and the gateway's log say what happened, and a
 * session whose supervisor is gone is ended at once instead of waiting for HTTP/2 to notice.
 *
 * <p>It judges only what it saw while no create, stop, start or delete ran on the sandbox
 * ({@link Transitions}), only after {@link #CONFIRMATIONS} observations in a row of the same
 * record version, and writes conditionally on that version, so an operation of this or another
 * replica always wins. A store or driver error costs one pass, never the observer.
 *
 * <p>Among replicas it looks only at the sandboxes whose lease this replica holds or takes now
 * because nobody holds it ({@link Replicas}), and checks the grant right before each driver call
 * and before a failure is acted on: a replica that lost a lease stops observing that sandbox.
 */
final class SandboxObserver implements AutoCloseable {
    /** How often every sandbox is looked at. */
    static final Duration POLL_INTERVAL = Duration.ofSeconds(1);
    /** Longest wait for one driver status; a slower one counts as "cannot tell" and changes nothing. */
    static final Duration STATUS_TIMEOUT = Duration.ofSeconds(5);
    /** Most sandboxes asked about in one pass; the rest are taken in turn by the next passes. */
    static final int MAX_OBSERVED_PER_PASS = 256;
    /** Failed observations in a row (of one record version) before the record moves. */
    static final int CONFIRMATIONS = 2;
    /**
     * How long a sandbox may be seen DEGRADED with its workload running (or a driver that cannot
     * tell) before the gateway stops what is left and records it FAILED: the runtime's bound for
     * terminating a workload without its supervisor (30 s), plus a margin.
     */
    static final Duration WORKLOAD_TERMINATION_BOUND = Duration.ofSeconds(45);
    /** Longest wait for a pass in progress when the gateway stops. */
    static final Duration CLOSE_WAIT = Duration.ofSeconds(10);

    /**
     * What the driver last reported of a sandbox.
     *
     * @param status what it said
     * @param at     when
     */
    record Observation(DriverStatus status, Instant at) {
    }

    /** A sandbox seen not running as recorded: since when, what was seen first, failed passes in a row. */
    private record Abnormal(Instant since, String first, long version, int confirmations) {
    }

    private final SandboxStore store;
    private final SandboxLifecycle lifecycle;
    private final SessionHub sessions;
    private final Replicas replicas;
    private final Clock clock;
    private final PrintStream log;
    private final Map<String, Observation> latest = new ConcurrentHashMap<>();
    private final Map<String, Abnormal> abnormal = new ConcurrentHashMap<>();
    private final Map<String, CompletableFuture<DriverStatus>> asking = new ConcurrentHashMap<>();
    private final Map<String, String> errors = new ConcurrentHashMap<>();
    private final ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().name("openshell-sandbox-observer").daemon(true).factory());
    private int cursor;
    private String lastError = "";

    SandboxObserver(SandboxStore store, SandboxLifecycle lifecycle, SessionHub sessions, Clock clock, PrintStream log) {
        this(store, lifecycle, sessions, lifecycle.replicas(), clock, log);
    }

    SandboxObserver(SandboxStore store, SandboxLifecycle lifecycle, SessionHub sessions, Replicas replicas, Clock clock,
                    PrintStream log) {
        this.store = store;
        this.lifecycle = lifecycle;
        this.sessions = sessions;
        this.replicas = replicas;
        this.clock = clock;
        this.log = log;
    }

    /** Starts the passes, the first one at once (a restarted gateway finds what died meanwhile). */
    void start() {
        scheduler.scheduleWithFixedDelay(this::guardedPass, 0, POLL_INTERVAL.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** @return what the driver last reported of the sandbox, if it was looked at */
    Optional<Observation> latest(SandboxId id) {
        return Optional.ofNullable(latest.get(id.value()));
    }

    /**
     * Asks the driver now (for {@code sandbox get}) and ends the session if its supervisor is gone.
     *
     * @return what it said
     */
    DriverStatus observeNow(SandboxRecord record) {
        if (replicas.manage(record.id()).isEmpty()) {
            // Another replica manages it (the API forwards to it when it answers): no driver call from here.
            return latest(record.id()).map(Observation::status).orElseGet(() -> new DriverStatus(Phase.DEGRADED,
                    "managed by another replica, which observes it"));
        }
        DriverStatus status = lifecycle.observe(record);
        seen(record, status);
        return status;
    }

    private void guardedPass() {
        try {
            pass();
            lastError = "";
        } catch (RuntimeException e) {
            // Said once per kind of failure, not every second while the database is down.
            if (!String.valueOf(e.getMessage()).equals(lastError)) {
                lastError = String.valueOf(e.getMessage());
                log.println("openshell gateway: the sandbox observer's pass failed (retried every " + POLL_INTERVAL
                        + "): " + e.getMessage());
            }
        }
    }

    /** One pass over the sandboxes; package-private so tests drive it without the schedule. */
    void pass() {
        List<SandboxRecord> records = store.list();
        Set<String> ids = records.stream().map(r -> r.id().value()).collect(Collectors.toSet());
        lifecycle.transitions().retainOnly(ids);
        latest.keySet().retainAll(ids);
        abnormal.keySet().retainAll(ids);
        errors.keySet().retainAll(ids);
        List<SandboxRecord> live = new ArrayList<>();
        Set<String> managed = replicas.claim(records.stream().map(SandboxRecord::id).toList());
        for (SandboxRecord r : records) {
            if (!managed.contains(r.id().value())) {
                // Another replica manages it: what this one saw of it is old news.
                abnormal.remove(r.id().value());
                latest.remove(r.id().value());
            } else if (r.state() == SandboxState.RUNNING || r.state() == SandboxState.PROVISIONING) {
                live.add(r);
            } else {
                abnormal.remove(r.id().value());
            }
        }
        int n = Math.min(live.size(), MAX_OBSERVED_PER_PASS);
        int start = live.isEmpty() ? 0 : Math.floorMod(cursor, live.size());
        cursor = start + n;
        for (int i = 0; i < n; i++) {
            SandboxRecord r = live.get((start + i) % live.size());
            try {
                observe(r);
                errors.remove(r.id().value());
            } catch (RuntimeException e) {
                // One sandbox's error (its store row, its driver) never holds up the others; said once, not every pass.
                String message = String.valueOf(e.getMessage());
                if (!message.equals(errors.put(r.id().value(), message))) {
                    log.println("openshell gateway: observing sandbox " + r.name() + " (" + r.id() + ") failed (retried every "
                            + POLL_INTERVAL + "): " + message);
                }
            }
        }
    }

    private void observe(SandboxRecord r) {
        OptionalLong mark = lifecycle.transitions().quiet(r.id());
        if (mark.isEmpty()) {
            // Being created, stopped, started or deleted: what runs now says nothing about failure.
            abnormal.remove(r.id().value());
            return;
        }
        Optional<Replicas.Grant> grant = replicas.grant(r.id());
        if (grant.isEmpty()) {
            abnormal.remove(r.id().value());
            return;
        }
        replicas.check(grant.get());
        Optional<DriverStatus> answer = ask(r);
        if (answer.isEmpty()) {
            return;
        }
        DriverStatus status = answer.get();
        seen(r, status);
        Instant now = clock.instant().truncatedTo(ChronoUnit.MILLIS);
        if (status.phase() == Phase.RUNNING) {
            if (abnormal.remove(r.id().value()) != null) {
                sessions.note(r.id(), "observed running again: " + status.detail());
            }
            return;
        }
        Abnormal before = abnormal.get(r.id().value());
        if (before == null) {
            sessions.note(r.id(), "observed " + status.phase() + " while recorded " + r.state() + ": " + status.detail());
            log.println("openshell gateway: sandbox " + r.name() + " (" + r.id() + ") observed " + status.phase()
                    + " while recorded " + r.state() + ": " + status.detail());
        }
        Instant since = before == null ? now : before.since();
        String first = before == null ? status.detail() : before.first();
        Optional<Judgement> judged = judge(status, since, first, now);
        // Only failed observations in a row of one record version count; one of another version starts again.
        int confirmations = judged.isEmpty() ? 0
                : before != null && before.version() == r.version() ? before.confirmations() + 1 : 1;
        abnormal.put(r.id().value(), new Abnormal(since, first, r.version(), confirmations));
        if (judged.isEmpty() || confirmations < CONFIRMATIONS) {
            return;
        }
        Optional<SandboxRecord> failed = fail(r, mark.getAsLong(), judged.get(), now, grant.get());
        failed.ifPresent(f -> {
            String cause = store.failure(f).map(SandboxFailure::cause).orElse(judged.get().cause());
            abnormal.remove(r.id().value());
            sessions.disconnect(r.id(), "the sandbox FAILED");
            sessions.note(r.id(), "FAILED at " + now + ": " + cause);
            log.println("openshell gateway: sandbox " + r.name() + " (" + r.id() + ") FAILED at " + now + ": " + cause);
        });
    }

    /**
     * Stops what is left (the trusted cleanup path: a workload nobody else will end, or only the
     * namespaces and state, so that {@code sandbox start} can launch it again) as a lifecycle
     * operation of its own, so no other judgement runs meanwhile; then records FAILED, if nothing
     * else changed the record. A stop that fails is said in the cause; the record moves all the same.
     */
    private Optional<SandboxRecord> fail(SandboxRecord r, long mark, Judgement judged, Instant now, Replicas.Grant grant) {
        Optional<Runnable> claim = lifecycle.transitions().ifQuietSince(r.id(), mark,
                () -> Optional.of(lifecycle.transitions().begin(r.id())));
        if (claim.isEmpty()) {
            return Optional.empty();
        }
        try {
            String cause = judged.cause();
            // The fencing check: a replica that lost the lease meanwhile neither stops nor records anything.
            replicas.confirm(grant);
            try {
                lifecycle.terminate(r);
                if (judged.terminate()) {
                    cause += "; the gateway stopped what was left (trusted cleanup)";
                }
            } catch (RuntimeException e) {
                cause += "; the gateway could not stop what is left (" + e.getMessage() + "; sandbox delete cleans up)";
            }
            return store.fail(r, new SandboxFailure(r.runtimeGeneration(), cause, now));
        } finally {
            claim.get().run();
        }
    }

    /**
     * What the observation means, once nothing of the workload runs or nothing will end it.
     *
     * @param cause     why the sandbox failed
     * @param terminate whether the gateway must end what is left (the runtime cannot any more)
     */
    record Judgement(String cause, boolean terminate) {
    }

    /**
     * Judges one observation: empty while the workload may still run and be ended by its runtime
     * (its supervisor gone, the runtime's bound not yet reached).
     */
    static Optional<Judgement> judge(DriverStatus status, Instant since, String first, Instant now) {
        String what = first.equals(status.detail()) ? status.detail() : first + "; then: " + status.detail();
        String seen = " (observed since " + since + "): " + what;
        boolean pastBound = Duration.between(since, now).compareTo(WORKLOAD_TERMINATION_BOUND) >= 0;
        return switch (status.phase()) {
            case RUNNING -> Optional.empty();
            case STOPPED, GONE -> Optional.of(new Judgement("nothing of the workload runs" + seen, false));
            case DEGRADED -> {
                Optional<DriverStatus.Part> workload = status.part(DriverStatus.WORKLOAD);
                boolean supervisor = status.part(DriverStatus.SUPERVISOR).map(DriverStatus.Part::alive).orElse(false);
                boolean runtime = status.part(DriverStatus.RUNTIME).map(DriverStatus.Part::alive).orElse(false);
                if (workload.isPresent() && !workload.get().alive()) {
                    // A runtime still alive is winding down on its own (its exit writes what it must, an
                    // AOT cache among it): the sandbox's end is its exit, unless it outstays the bound.
                    yield runtime && !pastBound ? Optional.empty()
                            : Optional.of(new Judgement("the workload was terminated" + seen, false));
                }
                if (workload.isPresent() && !supervisor && !runtime) {
                    yield Optional.of(new Judgement("the workload outlived its supervisor and runtime, so nothing"
                            + " would end it" + seen, true));
                }
                yield pastBound ? Optional.of(new Judgement("degraded for more than " + WORKLOAD_TERMINATION_BOUND
                        + ", past the runtime's bound for terminating a workload without its supervisor" + seen, true))
                        : Optional.empty();
            }
        };
    }

    /** Remembers the observation and ends the session of a supervisor the driver sees gone. */
    private void seen(SandboxRecord r, DriverStatus status) {
        latest.put(r.id().value(), new Observation(status, clock.instant().truncatedTo(ChronoUnit.MILLIS)));
        boolean supervisorGone = status.part(DriverStatus.SUPERVISOR).map(p -> !p.alive())
                .orElse(status.phase() == Phase.STOPPED || status.phase() == Phase.GONE);
        if (supervisorGone && sessions.connected(r.id()) && !lifecycle.transitions().busy(r.id())) {
            sessions.disconnect(r.id(), "the driver observes its supervisor gone: " + status.detail());
        }
    }

    /**
     * The driver's answer within {@link #STATUS_TIMEOUT}, asked on a virtual thread; at most one
     * question per sandbox is outstanding, so a hung driver costs one thread per sandbox, not one per pass.
     */
    private Optional<DriverStatus> ask(SandboxRecord r) {
        String key = r.id().value();
        // A question that was answered after its pass gave up is old news: ask again.
        asking.computeIfPresent(key, (k, f) -> f.isDone() ? null : f);
        CompletableFuture<DriverStatus> question = asking.computeIfAbsent(key, k -> {
            CompletableFuture<DriverStatus> f = new CompletableFuture<>();
            Thread.ofVirtual().name("openshell-observe-" + k).start(() -> {
                try {
                    f.complete(lifecycle.driverStatus(r));
                } catch (RuntimeException e) {
                    f.completeExceptionally(e);
                }
            });
            return f;
        });
        try {
            DriverStatus answer = question.get(STATUS_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            asking.remove(key, question);
            return Optional.of(answer);
        } catch (TimeoutException e) {
            latest.put(r.id().value(), new Observation(new DriverStatus(Phase.DEGRADED, "the driver did not answer within "
                    + STATUS_TIMEOUT), clock.instant().truncatedTo(ChronoUnit.MILLIS)));
            return Optional.empty();
        } catch (ExecutionException e) {
            asking.remove(key, question);
            throw new GatewayException(GatewayException.Reason.UNAVAILABLE, "the driver's status failed: "
                    + e.getCause().getMessage(), e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Optional.empty();
        }
    }

    /** Stops the passes (with the gateway); a pass in progress gets {@link #CLOSE_WAIT} to end. */
    @Override
    public void close() {
        scheduler.shutdownNow();
        try {
            if (!scheduler.awaitTermination(CLOSE_WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
                log.println("openshell gateway: the sandbox observer's pass did not end within " + CLOSE_WAIT);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
