package openshell.gateway.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import openshell.gateway.GatewayException;
import openshell.gateway.GatewayException.Reason;
import openshell.gateway.store.LeaseStore.Lease;
import openshell.gateway.store.LeaseStore.Replica;
import openshell.isolation.SandboxId;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** Ownership leases and replica rows against both databases; the races on a real PostgreSQL with two stores. */
class LeaseStoreTest {
    private static final Instant T0 = Instant.parse("2026-12-04T12:00:00Z");
    private static final Duration MS = Duration.ofMillis(1);

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void theEpochRisesEachTimeTheLeaseChangesHandsAndNeverOnARenewal(TestDatabases.Database db) throws Exception {
        try (SandboxStore store = SandboxStore.open(TestDatabases.fresh(db))) {
            LeaseStore leases = store.leases();
            SandboxId id = new SandboxId("sb-epochs");
            Lease first = leases.acquire(id, "r1", T0).orElseThrow();
            assertEquals(1, first.epoch());
            assertEquals(T0.plus(LeaseStore.LEASE_DURATION), first.expiresAt());
            assertTrue(leases.acquire(id, "r1", T0.plusSeconds(1)).isEmpty(), "a live lease is not taken again, not even by its holder");
            Lease renewed = leases.renew(id, "r1", 1, T0.plusSeconds(5)).orElseThrow();
            assertEquals(1, renewed.epoch(), "a renewal keeps the epoch");
            assertEquals(T0.plusSeconds(5).plus(LeaseStore.LEASE_DURATION), renewed.expiresAt());

            assertTrue(leases.release(id, "r1", 1));
            Lease second = leases.acquire(id, "r2", T0.plusSeconds(6)).orElseThrow();
            assertEquals(2, second.epoch(), "released: the next holder's epoch is higher");
            Lease third = leases.transfer(id, "r2", 2, "r1", T0.plusSeconds(7)).orElseThrow();
            assertEquals(3, third.epoch());
            assertEquals("r1", third.holder());
            assertEquals(Optional.of(third), leases.find(id));
            Lease fourth = leases.acquire(id, "r2", T0.plusSeconds(7).plus(LeaseStore.LEASE_DURATION)).orElseThrow();
            assertEquals(4, fourth.epoch(), "expired in the holder's hands: taken over with a higher epoch");
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void aLeaseIsExpiredAtItsExpiryInstantExactly(TestDatabases.Database db) throws Exception {
        try (SandboxStore store = SandboxStore.open(TestDatabases.fresh(db))) {
            LeaseStore leases = store.leases();
            SandboxId id = new SandboxId("sb-bound");
            Lease held = leases.acquire(id, "r1", T0).orElseThrow();
            Instant bound = held.expiresAt();
            assertTrue(leases.acquire(id, "r2", bound.minus(MS)).isEmpty(), "one millisecond before the bound it is live");
            assertTrue(leases.holds(id, "r1", 1, bound.minus(MS)));
            assertFalse(leases.holds(id, "r1", 1, bound), "at the bound the holder no longer holds it");
            assertTrue(leases.renew(id, "r1", 1, bound).isEmpty(), "at the bound it cannot be renewed");
            Lease taken = leases.acquire(id, "r2", bound).orElseThrow(() -> new AssertionError("at the bound it is free"));
            assertEquals(2, taken.epoch());
            assertTrue(leases.renew(id, "r1", 1, bound).isEmpty());
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void aStaleEpochIsRefusedEverywhere(TestDatabases.Database db) throws Exception {
        try (SandboxStore store = SandboxStore.open(TestDatabases.fresh(db))) {
            LeaseStore leases = store.leases();
            SandboxId id = new SandboxId("sb-stale");
            leases.acquire(id, "r1", T0).orElseThrow();
            Instant later = T0.plus(LeaseStore.LEASE_DURATION);
            Lease taken = leases.acquire(id, "r2", later).orElseThrow();
            // r1 comes back (it was partitioned) and tries to act under epoch 1.
            assertTrue(leases.renew(id, "r1", 1, later).isEmpty());
            assertFalse(leases.holds(id, "r1", 1, later));
            assertFalse(leases.release(id, "r1", 1));
            assertTrue(leases.transfer(id, "r1", 1, "r3", later).isEmpty());
            // Nor may the new holder use the old epoch.
            assertTrue(leases.renew(id, "r2", 1, later).isEmpty());
            assertFalse(leases.holds(id, "r2", 1, later));
            assertEquals(Optional.of(taken), leases.find(id), "nothing the stale holder did changed the lease");
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void unmanagedListsRecordedSandboxesWithoutALiveLeaseAndOrphansGoOnceExpired(TestDatabases.Database db) throws Exception {
        try (SandboxStore store = SandboxStore.open(TestDatabases.fresh(db))) {
            LeaseStore leases = store.leases();
            SandboxRecord a = store.create(SandboxStoreTest.record("sb-la", "lease-a"));
            SandboxRecord b = store.create(SandboxStoreTest.record("sb-lb", "lease-b"));
            leases.acquire(a.id(), "r1", T0).orElseThrow();
            assertEquals(List.of(b.id()), leases.unmanaged(T0.plusSeconds(1)));
            assertEquals(List.of(a.id(), b.id()), leases.unmanaged(T0.plus(LeaseStore.LEASE_DURATION)));

            SandboxId creating = new SandboxId("sb-creating");
            leases.acquire(creating, "r1", T0).orElseThrow();
            assertEquals(0, leases.removeOrphans(T0.plusSeconds(1)), "a create leases before it records: kept while live");
            assertEquals(1, leases.removeOrphans(T0.plus(LeaseStore.LEASE_DURATION)));
            assertTrue(leases.find(creating).isEmpty());
            assertTrue(leases.find(a.id()).isPresent(), "a recorded sandbox's lease is never an orphan");

            store.delete(a.id());
            assertTrue(leases.find(a.id()).isEmpty(), "the lease goes with the record");
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void aHandoverGoesOnlyToTheReplicaThatAsked(TestDatabases.Database db) throws Exception {
        try (SandboxStore store = SandboxStore.open(TestDatabases.fresh(db))) {
            LeaseStore leases = store.leases();
            SandboxId id = new SandboxId("sb-want");
            leases.acquire(id, "r1", T0).orElseThrow();
            assertFalse(leases.want(id, "r1"), "the holder does not ask for its own lease");
            assertTrue(leases.want(id, "r2"));
            assertEquals(Optional.of("r2"), leases.find(id).orElseThrow().wantedBy());
            Lease handed = leases.transfer(id, "r1", 1, "r2", T0.plusSeconds(1)).orElseThrow();
            assertEquals(Optional.empty(), handed.wantedBy());
            assertEquals(Optional.empty(), leases.find(id).orElseThrow().wantedBy());
            assertEquals(List.of(handed), leases.heldBy("r2"));
            assertEquals(List.of(), leases.heldBy("r1"));
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void aReplicaIdServesOneLiveProcessAndAStoppingOneGivesItsLeasesUp(TestDatabases.Database db) throws Exception {
        try (SandboxStore store = SandboxStore.open(TestDatabases.fresh(db))) {
            LeaseStore leases = store.leases();
            leases.register(new Replica("r1", "http://127.0.0.1:1", "inc-a", T0, T0));
            GatewayException twice = assertThrows(GatewayException.class,
                    () -> leases.register(new Replica("r1", "http://127.0.0.1:2", "inc-b", T0, T0.plusSeconds(1))));
            assertEquals(Reason.CONFLICT, twice.reason());
            assertTrue(twice.getMessage().contains("http://127.0.0.1:1"), twice.getMessage());
            assertTrue(leases.heartbeat("r1", "inc-a", T0.plusSeconds(2)));
            Instant gone = T0.plusSeconds(2).plus(LeaseStore.LEASE_DURATION);
            assertThrows(GatewayException.class, () -> leases.register(new Replica("r1", "http://127.0.0.1:2", "inc-b", gone,
                    gone.minus(MS))), "one millisecond before the old process's heartbeat lapses it is still alive");
            leases.register(new Replica("r1", "http://127.0.0.1:2", "inc-b", gone, gone));
            assertFalse(leases.heartbeat("r1", "inc-a", gone), "the old process learns that it was replaced");
            assertEquals("http://127.0.0.1:2", leases.replica("r1").orElseThrow().apiUrl());
            assertThrows(GatewayException.class, () -> leases.register(new Replica("r2", "http://" + "x".repeat(
                    LeaseStore.MAX_API_URL_CHARS), "inc", T0, T0)), "an address beyond the bound is refused");
            leases.register(new Replica("r2", "http://" + "x".repeat(LeaseStore.MAX_API_URL_CHARS - 7), "inc", T0, T0));

            SandboxId id = new SandboxId("sb-unreg");
            leases.acquire(id, "r1", gone).orElseThrow();
            leases.unregister("r1", "inc-a");
            assertTrue(leases.find(id).orElseThrow().liveAt(gone), "an old process's unregister changes nothing");
            leases.unregister("r1", "inc-b");
            assertTrue(leases.replica("r1").isEmpty());
            assertFalse(leases.find(id).orElseThrow().liveAt(gone), "a stopping replica's leases are free at once");
            assertEquals(2, leases.acquire(id, "r2", gone).orElseThrow().epoch());
        }
    }

    /** Two replicas (two stores, two connection pools) on one real PostgreSQL race for the same leases. */
    @Test
    void twoReplicasRacingForOneLeaseExactlyOneWins() throws Exception {
        StoreConfig config = TestDatabases.fresh(TestDatabases.Database.POSTGRESQL);
        int rounds = 40;
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try (SandboxStore one = SandboxStore.open(config); SandboxStore two = SandboxStore.open(config)) {
            List<LeaseStore> replicas = List.of(one.leases(), two.leases());
            for (int round = 0; round < rounds; round++) {
                SandboxId id = new SandboxId("sb-race-" + round);
                // Odd rounds race over an expired lease (the UPDATE path), even ones over no lease (the INSERT path).
                Instant at = T0;
                if (round % 2 == 1) {
                    replicas.get(0).acquire(id, "r0", T0).orElseThrow();
                    at = T0.plus(LeaseStore.LEASE_DURATION);
                }
                Instant when = at;
                CyclicBarrier start = new CyclicBarrier(2);
                List<Future<Optional<Lease>>> tries = new ArrayList<>();
                for (int r = 0; r < 2; r++) {
                    LeaseStore leases = replicas.get(r);
                    String name = "r" + (r + 1);
                    tries.add(pool.submit(() -> {
                        start.await(10, TimeUnit.SECONDS);
                        return leases.acquire(id, name, when);
                    }));
                }
                List<Lease> won = new ArrayList<>();
                for (Future<Optional<Lease>> t : tries) {
                    t.get(30, TimeUnit.SECONDS).ifPresent(won::add);
                }
                assertEquals(1, won.size(), "round " + round + ": exactly one winner, got " + won);
                Lease stored = replicas.get(1).find(id).orElseThrow();
                assertEquals(won.getFirst(), stored, "the winner's lease is the stored one");
                assertEquals(round % 2 == 1 ? 2 : 1, stored.epoch());
            }
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void aSecondOpenOfTheEmbeddedDatabaseIsRefusedNamingTheFirst() throws Exception {
        StoreConfig config = TestDatabases.fresh(TestDatabases.Database.H2);
        try (SandboxStore first = SandboxStore.open(config)) {
            GatewayException e = assertThrows(GatewayException.class, () -> SandboxStore.open(config));
            assertEquals(Reason.CONFLICT, e.reason());
            assertTrue(e.getMessage().contains("pid " + ProcessHandle.current().pid()), e.getMessage());
            assertTrue(e.getMessage().contains("jdbc:postgresql"), e.getMessage());
            assertTrue(first.list().isEmpty(), "the first is unaffected");
        }
        try (SandboxStore again = SandboxStore.open(config)) {
            assertTrue(again.list().isEmpty(), "closed: the next gateway opens it");
        }
    }
}
