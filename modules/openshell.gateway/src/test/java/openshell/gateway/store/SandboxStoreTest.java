package openshell.gateway.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import openshell.driver.DialDirection;
import openshell.driver.Provisioned;
import openshell.gateway.GatewayException;
import openshell.gateway.GatewayException.Reason;
import openshell.isolation.BackendKey;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.TopologyDescriptor;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** The store against both databases it supports: embedded H2 and a real PostgreSQL server. */
class SandboxStoreTest {

    static SandboxRecord record(String id, String name) {
        Instant now = Instant.now().truncatedTo(ChronoUnit.MILLIS);
        return new SandboxRecord(new SandboxId(id), name, "process",
                Provisioned.of(TopologyDescriptor.of(new BackendKey("openshell-sandbox", 1),
                        new byte[] {0, 1, 2, (byte) 0xff}), DialDirection.RUNTIME_INITIATED, new byte[] {42, 0, 7}),
                SandboxState.PROVISIONING, 1, 1,
                SandboxSessionId.fresh().value(), 1, "version: 1\nnetwork_policies: {}\n", 1, now, now);
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void migratesOnceAndReopensIdempotently(TestDatabases.Database db) throws Exception {
        StoreConfig config = TestDatabases.fresh(db);
        try (SandboxStore store = SandboxStore.open(config)) {
            assertEquals(Migration.ALL.getLast().version(), store.schemaVersion());
        }
        try (SandboxStore store = SandboxStore.open(config)) {
            assertEquals(Migration.ALL.getLast().version(), store.schemaVersion());
            assertTrue(store.list().isEmpty());
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void concurrentAppendersKeepExactlyTheBound(TestDatabases.Database db) throws Exception {
        StoreConfig config = TestDatabases.fresh(db);
        SandboxRecord a = record("sb-c", "gamma");
        int keep = 20;
        try (SandboxStore store = SandboxStore.open(config)) {
            store.create(a);
            // The supervisor's batches and the gateway's own events arrive on different threads.
            java.util.List<Thread> appenders = new java.util.ArrayList<>();
            for (int t = 0; t < 4; t++) {
                int writer = t;
                appenders.add(Thread.ofPlatform().start(() -> {
                    for (int i = 0; i < 25; i++) {
                        store.appendLogs(a.id(), List.of(writer + "." + i + ".a", writer + "." + i + ".b"), keep);
                    }
                }));
            }
            for (Thread t : appenders) {
                t.join(60_000);
            }
            List<String> kept = store.logs(a.id());
            assertEquals(keep, kept.size(), "exactly the bound is kept: " + kept);
            assertEquals(keep, new java.util.HashSet<>(kept).size(), "no line twice");
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void logLinesSurviveARestartAreBoundedAndGoWithTheSandbox(TestDatabases.Database db) throws Exception {
        StoreConfig config = TestDatabases.fresh(db);
        SandboxRecord a = record("sb-a", "alpha");
        int keep = 5;
        try (SandboxStore store = SandboxStore.open(config)) {
            store.create(a);
            store.appendLogs(a.id(), List.of("one", "two"), keep);
            store.appendLogs(a.id(), List.of(), keep);
        }
        try (SandboxStore store = SandboxStore.open(config)) {
            assertEquals(List.of("one", "two"), store.logs(a.id()), "kept across a restart, oldest first");
            store.appendLogs(a.id(), List.of("3", "4", "5", "6"), keep);
            assertEquals(List.of("two", "3", "4", "5", "6"), store.logs(a.id()), "at the bound the oldest goes");
            store.delete(a.id());
            assertEquals(List.of(), store.logs(a.id()));
            store.appendLogs(a.id(), List.of("late"), keep);
            assertEquals(List.of(), store.logs(a.id()), "a line about a deleted sandbox is not kept");
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void recordsRoundTripAndSurviveARestart(TestDatabases.Database db) throws Exception {
        StoreConfig config = TestDatabases.fresh(db);
        SandboxRecord a = record("sb-a", "alpha");
        SandboxRecord b = record("sb-b", "beta");
        try (SandboxStore store = SandboxStore.open(config)) {
            store.create(a);
            store.create(b);
        }
        try (SandboxStore store = SandboxStore.open(config)) {
            assertEquals(a, store.find(a.id()).orElseThrow());
            assertEquals(b, store.findByName("beta").orElseThrow());
            assertEquals(List.of(a, b).stream().map(SandboxRecord::id).toList(),
                    store.list().stream().map(SandboxRecord::id).toList());
            assertTrue(store.find(new SandboxId("missing")).isEmpty());
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void duplicateIdOrNameIsRefusedAndChangesNothing(TestDatabases.Database db) throws Exception {
        try (SandboxStore store = SandboxStore.open(TestDatabases.fresh(db))) {
            SandboxRecord a = store.create(record("sb-a", "alpha"));
            assertEquals(Reason.CONFLICT, assertThrows(GatewayException.class,
                    () -> store.create(record("sb-a", "other"))).reason());
            assertEquals(Reason.CONFLICT, assertThrows(GatewayException.class,
                    () -> store.create(record("sb-other", "alpha"))).reason());
            assertEquals(List.of(a), store.list());
        }
    }

    /**
     * Stop and delete write the state alone: a session's epoch refresh between their read and
     * their write (right after Running, as the sandbox harness met it) must not make them fail.
     */
    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void stateAloneIsWrittenOverAConcurrentEpochRefresh(TestDatabases.Database db) throws Exception {
        try (SandboxStore store = SandboxStore.open(TestDatabases.fresh(db))) {
            SandboxRecord read = store.update(store.create(record("sb-a", "alpha")).withState(SandboxState.RUNNING));
            SandboxRecord refreshed = store.raiseEpoch(read.id(), read.runtimeGeneration(), 2);
            assertEquals(Reason.CONFLICT, assertThrows(GatewayException.class,
                    () -> store.update(read.withState(SandboxState.DELETING))).reason(), "the old way: a 409");
            SandboxRecord deleting = store.setState(read.id(), SandboxState.DELETING);
            assertEquals(SandboxState.DELETING, deleting.state());
            assertEquals(2, deleting.credentialEpoch(), "the refresh is kept");
            assertEquals(refreshed.version() + 1, deleting.version());
            assertEquals(deleting, store.find(read.id()).orElseThrow());
            // A writer holding the refreshed read now loses, as with any other change.
            assertEquals(Reason.CONFLICT, assertThrows(GatewayException.class,
                    () -> store.update(refreshed.withState(SandboxState.RUNNING))).reason());
            store.delete(read.id());
            assertEquals(Reason.NOT_FOUND, assertThrows(GatewayException.class,
                    () -> store.setState(read.id(), SandboxState.STOPPED)).reason());
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void updateIsConditionalOnTheVersionRead(TestDatabases.Database db) throws Exception {
        try (SandboxStore store = SandboxStore.open(TestDatabases.fresh(db))) {
            SandboxRecord v1 = store.create(record("sb-a", "alpha"));
            SandboxRecord v2 = store.update(v1.withState(SandboxState.RUNNING));
            assertEquals(2, v2.version());
            assertEquals(SandboxState.RUNNING, store.find(v1.id()).orElseThrow().state());
            GatewayException stale = assertThrows(GatewayException.class,
                    () -> store.update(v1.withState(SandboxState.STOPPED)));
            assertEquals(Reason.CONFLICT, stale.reason());
            assertEquals(SandboxState.RUNNING, store.find(v1.id()).orElseThrow().state());
            store.delete(v1.id());
            assertEquals(Reason.NOT_FOUND, assertThrows(GatewayException.class,
                    () -> store.update(v2.withState(SandboxState.STOPPED))).reason());
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void generationsAndEpochNeverGoBack(TestDatabases.Database db) throws Exception {
        try (SandboxStore store = SandboxStore.open(TestDatabases.fresh(db))) {
            SandboxRecord r = store.create(record("sb-a", "alpha"));
            r = store.advanceEpoch(r.id(), 1);
            r = store.advanceEpoch(r.id(), 2);
            assertEquals(3, r.credentialEpoch());
            SandboxRecord current = r;
            SandboxRecord lowerEpoch = new SandboxRecord(r.id(), r.name(), r.driver(), r.provisioned(),
                    r.state(), r.runtimeGeneration(), 2, r.sessionLineage(), r.policyGeneration(), r.policyDocument(),
                    r.version(), r.createdAt(), r.updatedAt());
            assertEquals(Reason.CONFLICT, assertThrows(GatewayException.class, () -> store.update(lowerEpoch)).reason());
            // A relaunch resets the epoch for the new lineage, which is allowed because the generation grew.
            SandboxRecord relaunched = store.update(current.relaunched(SandboxSessionId.fresh().value()));
            assertEquals(2, relaunched.runtimeGeneration());
            assertEquals(1, relaunched.credentialEpoch());
            SandboxRecord olderGeneration = new SandboxRecord(r.id(), r.name(), r.driver(), r.provisioned(),
                    r.state(), 1, 9, r.sessionLineage(), r.policyGeneration(), r.policyDocument(),
                    relaunched.version(), r.createdAt(), r.updatedAt());
            assertEquals(Reason.CONFLICT, assertThrows(GatewayException.class,
                    () -> store.update(olderGeneration)).reason());
            SandboxRecord withPolicy = store.update(relaunched.withPolicy(5, "version: 1\n"));
            SandboxRecord olderPolicy = new SandboxRecord(r.id(), r.name(), r.driver(), r.provisioned(),
                    r.state(), 2, 1, relaunched.sessionLineage(), 4, "version: 1\n", withPolicy.version(),
                    r.createdAt(), r.updatedAt());
            assertEquals(Reason.CONFLICT, assertThrows(GatewayException.class, () -> store.update(olderPolicy)).reason());
            assertEquals(5, store.find(r.id()).orElseThrow().policyGeneration());
        }
    }

    /** Replicas share PostgreSQL only: the embedded H2 store refuses a second gateway (LeaseStoreTest). */
    @Test
    void twoReplicasRacingForTheEpochWinOneStepEach() throws Exception {
        StoreConfig config = TestDatabases.fresh(TestDatabases.Database.POSTGRESQL);
        try (SandboxStore replicaA = SandboxStore.open(config); SandboxStore replicaB = SandboxStore.open(config)) {
            SandboxRecord r = replicaA.create(record("sb-a", "alpha"));
            int contenders = 8;
            ExecutorService pool = Executors.newFixedThreadPool(contenders);
            try {
                CountDownLatch go = new CountDownLatch(1);
                List<Future<Boolean>> results = new ArrayList<>();
                for (int i = 0; i < contenders; i++) {
                    SandboxStore store = i % 2 == 0 ? replicaA : replicaB;
                    results.add(pool.submit(() -> {
                        go.await();
                        try {
                            store.advanceEpoch(r.id(), 1);
                            return true;
                        } catch (GatewayException e) {
                            if (e.reason() != Reason.CONFLICT) {
                                throw e;
                            }
                            return false;
                        }
                    }));
                }
                go.countDown();
                int winners = 0;
                for (Future<Boolean> f : results) {
                    winners += f.get(60, TimeUnit.SECONDS) ? 1 : 0;
                }
                assertEquals(1, winners, "exactly one replica may move the epoch from 1");
                assertEquals(2, replicaB.find(r.id()).orElseThrow().credentialEpoch());
            } finally {
                pool.shutdownNow();
            }
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void aNewerSchemaIsRefusedNotWritten(TestDatabases.Database db) throws Exception {
        StoreConfig config = TestDatabases.fresh(db);
        SandboxStore.open(config).close();
        try (Connection c = DriverManager.getConnection(config.jdbcUrl(), config.username(), config.password())) {
            c.createStatement().execute("INSERT INTO openshell_schema (version, description, applied_at) "
                    + "VALUES (99, 'from the future', 0)");
        }
        GatewayException e = assertThrows(GatewayException.class, () -> SandboxStore.open(config));
        assertEquals(Reason.INCOMPATIBLE, e.reason());
        assertTrue(e.getMessage().contains("99"), e.getMessage());
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void createIsRefusedAtTheSandboxBound(TestDatabases.Database db) throws Exception {
        StoreConfig config = TestDatabases.fresh(db);
        try (SandboxStore store = SandboxStore.open(config)) {
            try (Connection c = DriverManager.getConnection(config.jdbcUrl(), config.username(), config.password())) {
                c.setAutoCommit(false);
                SandboxRecord t = record("template", "template");
                try (PreparedStatement ps = c.prepareStatement("INSERT INTO sandboxes (id, name, driver, backend_name, "
                        + "backend_version, descriptor, dial_direction, state, runtime_generation, credential_epoch, "
                        + "session_lineage, policy_generation, policy_document, row_version, created_at, updated_at, "
                        + "driver_state) VALUES (?, ?, 'process', 'openshell-sandbox', 1, '', 'RUNTIME_INITIATED', "
                        + "'STOPPED', 1, 1, ?, "
                        + "1, '', 1, 0, 0, '')")) {
                    for (int i = 0; i < SandboxStore.MAX_SANDBOXES - 1; i++) {
                        ps.setString(1, "bulk-" + i);
                        ps.setString(2, "bulk-" + i);
                        ps.setString(3, t.sessionLineage());
                        ps.addBatch();
                    }
                    ps.executeBatch();
                }
                c.commit();
            }
            store.create(record("last-one", "last-one"));
            GatewayException full = assertThrows(GatewayException.class,
                    () -> store.create(record("one-too-many", "one-too-many")));
            assertEquals(Reason.EXHAUSTED, full.reason());
            assertTrue(store.find(new SandboxId("one-too-many")).isEmpty());
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void policyDocumentAtTheBoundIsStored(TestDatabases.Database db) throws Exception {
        try (SandboxStore store = SandboxStore.open(TestDatabases.fresh(db))) {
            String atBound = "#".repeat(SandboxRecord.MAX_POLICY_BYTES);
            SandboxRecord r = store.create(record("sb-a", "alpha"));
            SandboxRecord stored = store.update(r.withPolicy(2, atBound));
            assertEquals(atBound, store.find(r.id()).orElseThrow().policyDocument());
            assertEquals(2, stored.policyGeneration());
        }
    }

    @Test
    void policyDocumentOverTheBoundIsRefusedAtTheRecord() {
        SandboxRecord r = record("sb-a", "alpha");
        String over = "é".repeat(SandboxRecord.MAX_POLICY_BYTES / 2) + "#";
        assertEquals(SandboxRecord.MAX_POLICY_BYTES + 1, over.getBytes(StandardCharsets.UTF_8).length);
        assertEquals(Reason.INVALID, assertThrows(GatewayException.class, () -> r.withPolicy(2, over)).reason());
    }

    @Test
    void unreachableDatabaseIsUnavailableAndThePasswordIsNeverShown() {
        StoreConfig config = new StoreConfig("jdbc:postgresql://127.0.0.1:1/none", "u", "s3cret-value");
        assertFalse(config.toString().contains("s3cret-value"));
        GatewayException e = assertThrows(GatewayException.class, () -> SandboxStore.open(config));
        assertEquals(Reason.UNAVAILABLE, e.reason());
        assertFalse(e.getMessage().contains("s3cret-value"));
    }

    @Test
    void onlyH2FilesAndPostgresqlAreAccepted() {
        assertEquals(Reason.INVALID, assertThrows(GatewayException.class,
                () -> new StoreConfig("jdbc:h2:mem:x", "u", "")).reason());
        assertEquals(Reason.INVALID, assertThrows(GatewayException.class,
                () -> new StoreConfig("jdbc:mysql://h/db", "u", "")).reason());
    }
}
