package openshell.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import openshell.gateway.store.LeaseStore;
import openshell.gateway.store.SandboxStore;
import openshell.gateway.store.StoreConfig;
import openshell.gateway.store.TestDatabases;
import openshell.isolation.SandboxId;
import org.junit.jupiter.api.Test;

/**
 * Two replicas on one real PostgreSQL, each with its own store (connection pool), on one test
 * time: the wall clock the leases are stored in and the monotonic clock the holder judges its own
 * lease by move together.
 */
class ReplicasTest {
    private static final SandboxId ID = new SandboxId("sb-managed");

    /** One shared test time: wall milliseconds and monotonic nanoseconds. */
    private static final class Time extends Clock {
        private final AtomicLong nanos = new AtomicLong(1_000_000_000L);
        private final Instant origin = Instant.parse("2026-12-04T12:00:00Z");

        void advance(Duration d) {
            nanos.addAndGet(d.toNanos());
        }

        long nanos() {
            return nanos.get();
        }

        @Override
        public Instant instant() {
            return origin.plusNanos(nanos.get() - 1_000_000_000L);
        }

        @Override
        public java.time.ZoneId getZone() {
            return ZoneOffset.UTC;
        }

        @Override
        public Clock withZone(java.time.ZoneId zone) {
            return this;
        }
    }

    private record Replica(Replicas replicas, SandboxStore store, Set<String> lost, ByteArrayOutputStream log)
            implements AutoCloseable {
        static Replica start(StoreConfig config, String id, Time time, Set<String> sessions) {
            SandboxStore store = SandboxStore.open(config);
            ByteArrayOutputStream log = new ByteArrayOutputStream();
            Set<String> lost = ConcurrentHashMap.newKeySet();
            Replicas r = new Replicas(store.leases(), id, time, time::nanos, new PrintStream(log, true, StandardCharsets.UTF_8));
            // The passes are driven by the test (pass()), none on a schedule.
            r.register("http://127.0.0.1:1/" + id, s -> sessions.contains(id + ":" + s.value()), s -> lost.add(s.value()));
            return new Replica(r, store, lost, log);
        }

        @Override
        public void close() {
            replicas.close();
            store.close();
        }
    }

    @Test
    void theHolderStopsActingBeforeAnyOtherReplicaCanTakeItsLeaseOver() throws Exception {
        StoreConfig config = TestDatabases.fresh(TestDatabases.Database.POSTGRESQL);
        Time time = new Time();
        Set<String> sessions = ConcurrentHashMap.newKeySet();
        try (Replica a = Replica.start(config, "ra", time, sessions); Replica b = Replica.start(config, "rb", time, sessions)) {
            a.store().create(openshell.gateway.store.SandboxRecordFixture.record(ID.value(), "managed"));
            Replicas.Grant grant = a.replicas().manage(ID).orElseThrow();
            assertEquals(1, grant.epoch());
            assertEquals(Optional.empty(), b.replicas().manage(ID), "a live lease is another replica's");
            assertEquals("ra", b.replicas().manager(ID).orElseThrow().replica());
            assertEquals(Set.of(), b.replicas().claim(List.of(ID)));

            // ra renews on its passes; rb never gets it meanwhile.
            for (int i = 0; i < 4; i++) {
                time.advance(Replicas.RENEW_PERIOD);
                a.replicas().pass();
                b.replicas().pass();
                a.replicas().check(grant);
            }
            assertEquals(Optional.empty(), b.replicas().manage(ID));

            // ra stops renewing (it lost the database, or it was SIGSTOPped): it judges the lease lapsed
            // at LEASE_DURATION - SAFETY_MARGIN after its last renewal was sent...
            Duration holderBound = LeaseStore.LEASE_DURATION.minus(Replicas.SAFETY_MARGIN);
            time.advance(holderBound.minusMillis(1));
            a.replicas().check(grant);
            assertEquals(Optional.empty(), b.replicas().manage(ID), "the stored lease is still live");
            time.advance(Duration.ofMillis(1));
            GatewayException stale = assertThrows(GatewayException.class, () -> a.replicas().check(grant));
            assertTrue(stale.getMessage().contains("epoch 1"), stale.getMessage());
            // ...while the others can take it only at the stored expiry, SAFETY_MARGIN later.
            time.advance(Replicas.SAFETY_MARGIN.minusMillis(1));
            assertEquals(Optional.empty(), b.replicas().manage(ID));
            time.advance(Duration.ofMillis(1));
            b.replicas().pass();
            Replicas.Grant taken = b.replicas().grant(ID).orElseThrow(() -> new AssertionError("rb takes it at the expiry"));
            assertEquals(2, taken.epoch());

            // ra comes back: its pass finds the lease gone, tells its session to end, and it follows.
            a.replicas().pass();
            assertTrue(a.lost().contains(ID.value()), "ra ends what it had of the sandbox");
            assertThrows(GatewayException.class, () -> a.replicas().confirm(grant));
            assertEquals("rb", a.replicas().manager(ID).orElseThrow().replica());
            assertEquals(Optional.empty(), a.replicas().manage(ID));
            b.replicas().confirm(taken);
        }
    }

    @Test
    void theLeaseFollowsTheSupervisorsSessionAndNeverWhileTheHolderHasOne() throws Exception {
        StoreConfig config = TestDatabases.fresh(TestDatabases.Database.POSTGRESQL);
        Time time = new Time();
        Set<String> sessions = ConcurrentHashMap.newKeySet();
        try (Replica a = Replica.start(config, "ra", time, sessions); Replica b = Replica.start(config, "rb", time, sessions)) {
            a.store().create(openshell.gateway.store.SandboxRecordFixture.record(ID.value(), "managed"));
            Replicas.Grant first = a.replicas().manage(ID).orElseThrow();
            sessions.add("ra:" + ID.value());
            b.replicas().want(ID);
            time.advance(Replicas.RENEW_PERIOD);
            a.replicas().pass();
            assertEquals(first, a.replicas().grant(ID).map(g -> new Replicas.Grant(g.sandbox(), g.epoch(), first.validUntilNanos()))
                    .orElseThrow(), "the holder keeps a lease whose session it has");
            sessions.remove("ra:" + ID.value());
            time.advance(Replicas.RENEW_PERIOD);
            a.replicas().pass();
            assertTrue(a.replicas().grant(ID).isEmpty(), "without a session of its own it hands the lease over");
            assertTrue(a.lost().contains(ID.value()));
            Replicas.Grant handed = b.replicas().manage(ID).orElseThrow(() -> new AssertionError("rb adopts what it was handed"));
            assertEquals(2, handed.epoch());
        }
    }

    @Test
    void aStateDirectoryServesOneProcessAndItsSuccessorReplacesAKilledPredecessorAtOnce() throws Exception {
        StoreConfig config = TestDatabases.fresh(TestDatabases.Database.POSTGRESQL);
        java.nio.file.Path state = java.nio.file.Files.createTempDirectory("openshell-replica-state-");
        try (SandboxStore store = SandboxStore.open(config)) {
            Replicas first = Replicas.open(store.leases(), state);
            first.register("http://127.0.0.1:1", s -> false, s -> { });
            store.create(openshell.gateway.store.SandboxRecordFixture.record(ID.value(), "managed"));
            Replicas.Grant grant = first.manage(ID).orElseThrow();
            GatewayException twice = assertThrows(GatewayException.class, () -> Replicas.open(store.leases(), state));
            assertEquals(GatewayException.Reason.CONFLICT, twice.reason());
            assertTrue(twice.getMessage().contains(state.toString()), twice.getMessage());
            // The first process dies without unregistering (SIGKILL): only its state lock goes with it.
            first.releaseStateLockForTest();
            Replicas next = Replicas.open(store.leases(), state);
            try {
                next.register("http://127.0.0.1:2", s -> false, s -> { });
                assertEquals(first.id(), next.id(), "the same replica id, from the state directory");
                next.pass();
                assertEquals(grant.epoch(), next.grant(ID).orElseThrow(() -> new AssertionError("its leases stay the replica's"))
                        .epoch());
                assertEquals("http://127.0.0.1:2", store.leases().replica(next.id()).orElseThrow().apiUrl());
            } finally {
                next.close();
            }
        }
    }

    @Test
    void aStoppingReplicaGivesItsLeasesUpAtOnce() throws Exception {
        StoreConfig config = TestDatabases.fresh(TestDatabases.Database.POSTGRESQL);
        Time time = new Time();
        Set<String> sessions = ConcurrentHashMap.newKeySet();
        try (Replica b = Replica.start(config, "rb", time, sessions)) {
            Replica a = Replica.start(config, "ra", time, sessions);
            a.store().create(openshell.gateway.store.SandboxRecordFixture.record(ID.value(), "managed"));
            a.replicas().manage(ID).orElseThrow();
            a.close();
            assertEquals(Set.of(ID.value()), b.replicas().claim(List.of(ID)));
            assertEquals(2, b.replicas().grant(ID).orElseThrow().epoch());
        }
    }
}
