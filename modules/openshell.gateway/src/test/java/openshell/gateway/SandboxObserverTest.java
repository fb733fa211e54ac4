package openshell.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.time.temporal.ChronoUnit;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.function.Function;

import openshell.driver.ComputeDriver;
import openshell.driver.DialDirection;
import openshell.driver.DriverEnvironment;
import openshell.driver.DriverException;
import openshell.driver.DriverRegistry;
import openshell.driver.DriverStatus;
import openshell.driver.DriverStatus.Part;
import openshell.driver.DriverStatus.Phase;
import openshell.driver.LaunchPlan;
import openshell.driver.Provisioned;
import openshell.driver.spi.ComputeDriverProvider;
import openshell.gateway.store.SandboxFailure;
import openshell.gateway.store.SandboxRecord;
import openshell.gateway.store.SandboxState;
import openshell.gateway.store.SandboxStore;
import openshell.gateway.store.SecretBox;
import openshell.gateway.store.StoreConfig;
import openshell.isolation.BackendKey;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.TopologyDescriptor;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The observer, pass by pass, against a real store and a driver double whose answers the test
 * sets: when a record moves to FAILED, with what cause and time, and when it must not.
 */
class SandboxObserverTest {
    private static final Instant START = Instant.parse("2026-12-03T18:00:00Z");
    private static final DriverStatus SUPERVISOR_KILLED = status(Phase.DEGRADED, "supervisor is gone", false, true, true, true);
    /** The runtime ended the workload and then itself; the namespaces are left for the gateway's cleanup. */
    private static final DriverStatus WORKLOAD_TERMINATED = status(Phase.DEGRADED, "supervisor is gone (workload no process left)",
            false, true, false, false);
    /** The workload is gone and the runtime is still on its way out (it writes what it must at exit). */
    private static final DriverStatus RUNTIME_WINDING_DOWN = status(Phase.DEGRADED, "supervisor is gone (runtime alive; workload no process left)",
            false, true, true, false);
    private static final DriverStatus ALL_RUNNING = new DriverStatus(Phase.RUNNING, "alive");
    /** How often the scheduled test looks at the record while it waits for the observer. */
    private static final Duration AWAIT_POLL = Duration.ofMillis(20);

    @TempDir
    Path tmp;

    private StoreConfig config;
    private SandboxStore store;
    private SessionHub sessions;
    private SandboxLifecycle lifecycle;
    private SandboxObserver observer;
    private ScheduledExecutorService timers;
    private final ByteArrayOutputStream gatewayLog = new ByteArrayOutputStream();
    private final MovableClock clock = new MovableClock();
    /** The sandboxes whose stop the driver double fails. */
    private final List<String> failingStop = new java.util.concurrent.CopyOnWriteArrayList<>();
    /** The sandboxes the driver double was told to stop. */
    private final List<String> stopped = new java.util.concurrent.CopyOnWriteArrayList<>();
    /** What the driver double answers per sandbox id; absent means RUNNING. */
    private final Map<String, Function<SandboxId, DriverStatus>> answers = new ConcurrentHashMap<>();

    /** A clock the test moves. */
    static final class MovableClock extends Clock {
        volatile Instant now = START;

        @Override
        public ZoneId getZone() {
            return ZoneOffset.UTC;
        }

        @Override
        public Clock withZone(ZoneId zone) {
            return this;
        }

        @Override
        public Instant instant() {
            return now;
        }
    }

    private final class AnsweringDriver implements ComputeDriver {
        @Override
        public String name() {
            return "fake";
        }

        @Override
        public Provisioned create(LaunchPlan plan) {
            throw new UnsupportedOperationException();
        }

        @Override
        public Provisioned start(SandboxId id, byte[] state, LaunchPlan plan) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void stop(SandboxId id, byte[] state) {
            if (failingStop.contains(id.value())) {
                throw new DriverException(DriverException.Kind.FAILED, "processes survived SIGKILL");
            }
            stopped.add(id.value());
            answers.put(id.value(), i -> new DriverStatus(Phase.STOPPED, "nothing runs; state kept"));
        }

        @Override
        public void delete(SandboxId id, byte[] state) {
        }

        @Override
        public DriverStatus status(SandboxId id, byte[] state) {
            return answers.getOrDefault(id.value(), i -> ALL_RUNNING).apply(id);
        }
    }

    @BeforeEach
    void setUp() {
        config = StoreConfig.embedded(tmp.resolve("db"));
        store = SandboxStore.open(config);
        timers = Executors.newSingleThreadScheduledExecutor();
        sessions = new SessionHub(store, SigningKey.loadOrCreate(tmp, Clock.systemUTC()), timers, Clock.systemUTC());
        ComputeDriverProvider provider = new ComputeDriverProvider() {
            @Override
            public String name() {
                return "fake";
            }

            @Override
            public ComputeDriver create(DriverEnvironment environment) {
                return new AnsweringDriver();
            }
        };
        lifecycle = new SandboxLifecycle(store, store.providers(SecretBox.loadOrCreate(tmp)), DriverRegistry.of(List.of(provider)),
                new DriverEnvironment(tmp.resolve("drivers"), Map.of()), "fake", (c, g, e, creds) -> {
                    throw new UnsupportedOperationException("no launches here");
                }, sessions);
        observer = new SandboxObserver(store, lifecycle, sessions, clock, new PrintStream(gatewayLog, true, StandardCharsets.UTF_8));
    }

    @AfterEach
    void tearDown() {
        observer.close();
        sessions.close();
        lifecycle.close();
        timers.shutdownNow();
        store.close();
    }

    private static DriverStatus status(Phase phase, String detail, boolean supervisor, boolean namespaces, boolean runtime,
                                       boolean workload) {
        return new DriverStatus(phase, detail, List.of(new Part(DriverStatus.SUPERVISOR, supervisor, supervisor ? "alive" : "ended"),
                new Part(DriverStatus.NAMESPACES, namespaces, ""), new Part(DriverStatus.RUNTIME, runtime, ""),
                new Part(DriverStatus.WORKLOAD, workload, workload ? "1 process(es) alive" : "no process left")));
    }

    private SandboxRecord recorded(String name, SandboxState state) {
        Instant now = Instant.now().truncatedTo(ChronoUnit.MILLIS);
        return store.create(new SandboxRecord(new SandboxId("sb-" + name), name, "fake",
                Provisioned.of(TopologyDescriptor.of(new BackendKey("openshell-sandbox", 1), new byte[] {1}),
                        DialDirection.RUNTIME_INITIATED, new byte[] {1}),
                state, 1, 1, SandboxSessionId.fresh().value(), 1, "version: 1\n", 1, now, now));
    }

    private SandboxState state(SandboxRecord r) {
        return store.find(r.id()).orElseThrow().state();
    }

    private String logs(SandboxRecord r) {
        return String.join("\n", store.logs(r.id()));
    }

    @Test
    void aRuntimeWindingDownOnItsOwnIsNotStoppedUntilItExitsOrOutstaysTheBound() {
        SandboxRecord r = recorded("winding", SandboxState.RUNNING);
        answers.put(r.id().value(), id -> RUNTIME_WINDING_DOWN);
        for (int i = 0; i < 5; i++) {
            observer.pass();
        }
        // Its exit is the sandbox's end: a stop now would kill it while it writes its AOT cache.
        assertEquals(SandboxState.RUNNING, state(r));
        answers.put(r.id().value(), id -> WORKLOAD_TERMINATED);
        observer.pass();
        observer.pass();
        assertEquals(SandboxState.FAILED, state(r), "once the runtime is gone");

        SandboxRecord stuck = recorded("lingering", SandboxState.RUNNING);
        answers.put(stuck.id().value(), id -> RUNTIME_WINDING_DOWN);
        observer.pass();
        observer.pass();
        assertEquals(SandboxState.RUNNING, state(stuck));
        clock.now = clock.now.plus(SandboxObserver.WORKLOAD_TERMINATION_BOUND);
        observer.pass();
        observer.pass();
        assertEquals(SandboxState.FAILED, state(stuck), "a runtime that outstays the bound is stopped");
    }

    @Test
    void aKilledSupervisorFailsTheSandboxOnlyOnceItsWorkloadIsTerminatedWithCauseAndTime() {
        SandboxRecord r = recorded("killed", SandboxState.RUNNING);
        observer.pass();
        assertEquals(SandboxState.RUNNING, state(r));

        answers.put(r.id().value(), id -> SUPERVISOR_KILLED);
        for (int i = 0; i < 5; i++) {
            observer.pass();
        }
        // Within the runtime's bound the workload still runs: recorded RUNNING, observed DEGRADED, said once.
        assertEquals(SandboxState.RUNNING, state(r));
        assertEquals(Phase.DEGRADED, observer.latest(r.id()).orElseThrow().status().phase());
        assertEquals(1, store.logs(r.id()).stream().filter(l -> l.contains("observed DEGRADED while recorded RUNNING")).count(),
                logs(r));

        answers.put(r.id().value(), id -> WORKLOAD_TERMINATED);
        clock.now = START.plusSeconds(31);
        observer.pass();
        assertEquals(SandboxState.RUNNING, state(r), "one observation is not yet a failure");
        observer.pass();
        SandboxRecord failed = store.find(r.id()).orElseThrow();
        assertEquals(SandboxState.FAILED, failed.state());
        SandboxFailure why = store.failure(failed).orElseThrow();
        assertEquals(START.plusSeconds(31), why.failedAt());
        assertEquals(1, why.runtimeGeneration());
        assertTrue(why.cause().contains("the workload was terminated") && why.cause().contains("supervisor is gone"), why.cause());
        assertTrue(logs(r).contains("FAILED at " + START.plusSeconds(31) + ": the workload was terminated"), logs(r));
        String gateway = gatewayLog.toString(StandardCharsets.UTF_8);
        assertTrue(gateway.contains("sandbox killed (" + r.id() + ") FAILED at"), gateway);

        // A FAILED record is left alone: no second event.
        observer.pass();
        assertEquals(1, store.logs(r.id()).stream().filter(l -> l.contains("FAILED at")).count(), logs(r));
    }

    @Test
    void nothingLeftRunningFailsAProvisioningSandboxButNeverAStoppedOne() {
        SandboxRecord provisioning = recorded("provisioning", SandboxState.PROVISIONING);
        SandboxRecord stopped = recorded("stopped", SandboxState.STOPPED);
        DriverStatus gone = status(Phase.STOPPED, "nothing runs; state kept", false, false, false, false);
        answers.put(provisioning.id().value(), id -> gone);
        answers.put(stopped.id().value(), id -> gone);
        observer.pass();
        observer.pass();
        assertEquals(SandboxState.FAILED, state(provisioning));
        assertTrue(store.failure(store.find(provisioning.id()).orElseThrow()).orElseThrow().cause()
                .contains("nothing of the workload runs"));
        assertEquals(SandboxState.STOPPED, state(stopped));
        assertTrue(store.logs(stopped.id()).isEmpty(), logs(stopped));
    }

    @Test
    void aSandboxBeingChangedByALifecycleOperationIsNeverJudged() {
        SandboxRecord r = recorded("busy", SandboxState.RUNNING);
        answers.put(r.id().value(), id -> WORKLOAD_TERMINATED);
        Runnable done = lifecycle.transitions().begin(r.id());
        for (int i = 0; i < 4; i++) {
            observer.pass();
        }
        assertEquals(SandboxState.RUNNING, state(r), "a stop killing its processes is not a failure");
        done.run();

        // An operation that begins while the driver is being asked (after the mark) wins too.
        answers.put(r.id().value(), id -> {
            lifecycle.transitions().begin(id).run();
            return WORKLOAD_TERMINATED;
        });
        for (int i = 0; i < 4; i++) {
            observer.pass();
        }
        assertEquals(SandboxState.RUNNING, state(r));

        answers.put(r.id().value(), id -> WORKLOAD_TERMINATED);
        observer.pass();
        observer.pass();
        assertEquals(SandboxState.FAILED, state(r));
    }

    @Test
    void aRecordChangedBetweenObservationsNeedsItsOwnConfirmations() {
        SandboxRecord r = recorded("changed", SandboxState.RUNNING);
        answers.put(r.id().value(), id -> WORKLOAD_TERMINATED);
        observer.pass();
        // Another writer (a replica's epoch refresh, a policy set) moved the row version.
        store.raiseEpoch(r.id(), 1, 2);
        observer.pass();
        assertEquals(SandboxState.RUNNING, state(r));
        observer.pass();
        assertEquals(SandboxState.FAILED, state(r));
        // The write itself is conditional on the version read: a stale one writes nothing.
        SandboxRecord other = recorded("stale", SandboxState.RUNNING);
        store.raiseEpoch(other.id(), 1, 2);
        assertTrue(store.fail(other, new SandboxFailure(1, "stale", START)).isEmpty());
        assertEquals(SandboxState.RUNNING, state(other));
    }

    @Test
    void driverAndStoreErrorsCostAPassNeverTheObserver() throws Exception {
        SandboxRecord broken = recorded("broken", SandboxState.RUNNING);
        SandboxRecord dead = recorded("dead", SandboxState.RUNNING);
        answers.put(broken.id().value(), id -> {
            throw new DriverException(DriverException.Kind.FAILED, "the driver's API is down");
        });
        answers.put(dead.id().value(), id -> WORKLOAD_TERMINATED);
        observer.pass();
        try (Connection holder = DriverManager.getConnection(config.jdbcUrl(), config.username(), config.password())) {
            holder.setAutoCommit(false);
            try (PreparedStatement s = holder.prepareStatement("SELECT id FROM sandboxes WHERE id = ? FOR UPDATE")) {
                s.setString(1, dead.id().value());
                assertTrue(s.executeQuery().next());
            }
            // The row is held: the write fails; the pass goes on and the next one tries again.
            observer.pass();
            holder.rollback();
        }
        assertEquals(SandboxState.RUNNING, state(dead));
        String gateway = gatewayLog.toString(StandardCharsets.UTF_8);
        assertTrue(gateway.contains("observing sandbox dead") && gateway.contains("observing sandbox broken"), gateway);
        observer.pass();
        assertEquals(SandboxState.FAILED, state(dead));
        assertEquals(SandboxState.RUNNING, state(broken), "a driver that cannot tell changes nothing");
    }

    @Test
    void aDriverThatCannotTellWhetherTheWorkloadRunsIsGivenTheRuntimesBound() {
        SandboxRecord r = recorded("opaque", SandboxState.RUNNING);
        answers.put(r.id().value(), id -> new DriverStatus(Phase.DEGRADED, "supervisor container exited"));
        observer.pass();
        clock.now = START.plus(SandboxObserver.WORKLOAD_TERMINATION_BOUND).minusSeconds(1);
        observer.pass();
        observer.pass();
        assertEquals(SandboxState.RUNNING, state(r));
        clock.now = START.plus(SandboxObserver.WORKLOAD_TERMINATION_BOUND);
        observer.pass();
        assertEquals(SandboxState.RUNNING, state(r), "confirmed by the next pass");
        observer.pass();
        assertEquals(SandboxState.FAILED, state(r));
        String cause = store.failure(store.find(r.id()).orElseThrow()).orElseThrow().cause();
        assertTrue(cause.contains("degraded for more than") && cause.contains("the gateway stopped what was left"), cause);
        assertTrue(stopped.contains(r.id().value()), "past the bound the gateway ends what is left itself");
    }

    @Test
    void aWorkloadLeftWithNeitherSupervisorNorRuntimeIsStoppedByTheGatewayAtOnce() {
        SandboxRecord r = recorded("orphan", SandboxState.RUNNING);
        SandboxRecord waiting = recorded("waiting", SandboxState.RUNNING);
        answers.put(r.id().value(), id -> status(Phase.DEGRADED, "supervisor is gone", false, true, false, true));
        answers.put(waiting.id().value(), id -> SUPERVISOR_KILLED);
        observer.pass();
        observer.pass();
        assertEquals(SandboxState.FAILED, state(r));
        String cause = store.failure(store.find(r.id()).orElseThrow()).orElseThrow().cause();
        assertTrue(cause.contains("outlived its supervisor and runtime") && cause.contains("trusted cleanup"), cause);
        assertEquals(List.of(r.id().value()), stopped, "its runtime still runs and ends the other one's workload itself");
        assertEquals(SandboxState.RUNNING, state(waiting));
    }

    @Test
    void whatIsLeftOfAFailedSandboxIsStoppedAndAStopThatFailsIsInTheCause() {
        SandboxRecord r = recorded("leftover", SandboxState.RUNNING);
        answers.put(r.id().value(), id -> WORKLOAD_TERMINATED);
        observer.pass();
        observer.pass();
        assertEquals(List.of(r.id().value()), stopped, "its holder would keep a start from launching it again");
        String cause = store.failure(store.find(r.id()).orElseThrow()).orElseThrow().cause();
        assertFalse(cause.contains("trusted cleanup"), "nothing of the workload was left to end: " + cause);

        SandboxRecord stuck = recorded("stuck", SandboxState.RUNNING);
        answers.put(stuck.id().value(), id -> WORKLOAD_TERMINATED);
        failingStop.add(stuck.id().value());
        observer.pass();
        observer.pass();
        assertEquals(SandboxState.FAILED, state(stuck), "the record moves all the same");
        cause = store.failure(store.find(stuck.id()).orElseThrow()).orElseThrow().cause();
        assertTrue(cause.contains("the gateway could not stop what is left (processes survived"), cause);
    }

    @Test
    void theScheduledPassesFindAFailureWithinTheirBoundAndStopWithTheGateway() throws Exception {
        SandboxRecord r = recorded("scheduled", SandboxState.RUNNING);
        answers.put(r.id().value(), id -> WORKLOAD_TERMINATED);
        observer.start();
        Duration bound = SandboxObserver.POLL_INTERVAL.multipliedBy(SandboxObserver.CONFIRMATIONS + 2);
        long deadline = System.nanoTime() + bound.toNanos();
        while (state(r) != SandboxState.FAILED && System.nanoTime() < deadline) {
            Thread.sleep(AWAIT_POLL.toMillis());
        }
        assertEquals(SandboxState.FAILED, state(r), "within " + bound);
        observer.close();
        assertFalse(Thread.getAllStackTraces().keySet().stream()
                .anyMatch(t -> t.getName().equals("openshell-sandbox-observer") && t.isAlive()), "its thread ended");
    }
}
