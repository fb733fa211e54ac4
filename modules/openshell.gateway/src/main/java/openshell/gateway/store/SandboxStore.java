package openshell.gateway.store;

import java.time.Instant;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import io.helidon.config.Config;
import io.helidon.config.ConfigSources;
import io.helidon.dbclient.DbClient;
import io.helidon.dbclient.DbClientException;
import io.helidon.dbclient.DbExecute;
import io.helidon.dbclient.DbRow;
import io.helidon.dbclient.DbTransaction;
import openshell.driver.DialDirection;
import openshell.driver.Provisioned;
import openshell.gateway.GatewayException;
import openshell.gateway.GatewayException.Reason;
import openshell.isolation.BackendKey;
import openshell.isolation.SandboxId;
import openshell.isolation.TopologyDescriptor;

/**
 * Sandbox records in the embedded database or PostgreSQL, through Helidon's DB client. Several
 * gateway replicas may share one database: every update is conditional on the row version it read,
 * and generations and the credential epoch can only grow, so a stale replica or an old token can
 * never roll a sandbox back.
 */
public final class SandboxStore implements AutoCloseable {
    /** Most sandbox records kept; create is refused beyond it. */
    public static final int MAX_SANDBOXES = 10_000;
    /** Connections in the pool: the gateway's storage work is small and serialized per sandbox. */
    static final int POOL_SIZE = 4;

    private static final String COLUMNS = "id, name, driver, backend_name, backend_version, descriptor, dial_direction, "
            + "driver_state, state, runtime_generation, credential_epoch, session_lineage, policy_generation, policy_document, "
            + "row_version, created_at, updated_at";

    private final DbClient db;
    private final int schemaVersion;
    private final Optional<EmbeddedOwner> owner;

    private SandboxStore(DbClient db, int schemaVersion, Optional<EmbeddedOwner> owner) {
        this.db = db;
        this.schemaVersion = schemaVersion;
        this.owner = owner;
    }

    /**
     * Opens the store and brings its schema up to date.
     *
     * @param config where the database is
     * @return the store
     * @throws GatewayException UNAVAILABLE if the database cannot be reached; INCOMPATIBLE if it
     *                          was written by a newer gateway; CONFLICT if it is the embedded one
     *                          and another gateway has it open (named in the message)
     */
    public static SandboxStore open(StoreConfig config) {
        Optional<EmbeddedOwner> owner = config.embedded() ? Optional.of(EmbeddedOwner.take(config.jdbcUrl()))
                : Optional.empty();
        try {
            return open(config, owner);
        } catch (RuntimeException e) {
            owner.ifPresent(EmbeddedOwner::close);
            throw e;
        }
    }

    private static SandboxStore open(StoreConfig config, Optional<EmbeddedOwner> owner) {
        Config dbConfig = Config.just(ConfigSources.create(Map.of(
                "source", "jdbc",
                "connection.url", config.jdbcUrl(),
                "connection.username", config.username(),
                "connection.password", config.password(),
                "connection.maximumPoolSize", Integer.toString(POOL_SIZE),
                "connection.poolName", "openshell-gateway-store")));
        DbClient db;
        try {
            db = DbClient.create(dbConfig);
        } catch (RuntimeException e) {
            throw new GatewayException(Reason.UNAVAILABLE, "cannot open the sandbox store at " + config.jdbcUrl()
                    + ": " + e.getMessage(), e);
        }
        try {
            return new SandboxStore(db, SchemaMigrator.migrate(db), owner);
        } catch (RuntimeException e) {
            db.close();
            throw e;
        }
    }

    /**
     * The providers kept in the same database.
     *
     * @param box seals and opens their values
     * @return the provider store
     */
    public ProviderStore providers(SecretBox box) {
        return new ProviderStore(db, box);
    }

    /** @return the replicas' ownership leases, kept in the same database */
    public LeaseStore leases() {
        return new LeaseStore(db);
    }

    /**
     * A cheap round trip to the database, for readiness probes.
     *
     * @throws GatewayException UNAVAILABLE if the database does not answer
     */
    public void ping() {
        guarded(() -> db.execute().get("SELECT COUNT(*) FROM openshell_schema").isPresent());
    }

    /** @return the schema version in force */
    public int schemaVersion() {
        return schemaVersion;
    }

    /**
     * Records a newly admitted sandbox.
     *
     * @param record the record, with version 1
     * @return the stored record
     * @throws GatewayException CONFLICT if the id or name is taken; EXHAUSTED at {@link #MAX_SANDBOXES}
     */
    public SandboxRecord create(SandboxRecord record) {
        if (record.version() != 1) {
            throw new GatewayException(Reason.INVALID, "a new record has version 1, not " + record.version());
        }
        return inTransaction(tx -> {
            long count = tx.get("SELECT COUNT(*) FROM sandboxes").map(r -> r.column(1).get(Long.class)).orElse(0L);
            if (count >= MAX_SANDBOXES) {
                throw new GatewayException(Reason.EXHAUSTED, "the gateway keeps at most " + MAX_SANDBOXES
                        + " sandboxes; delete some first");
            }
            boolean taken = tx.get("SELECT id FROM sandboxes WHERE id = ? OR name = ?",
                    record.id().value(), record.name()).isPresent();
            if (taken) {
                throw new GatewayException(Reason.CONFLICT, "a sandbox with id " + record.id() + " or name "
                        + record.name() + " already exists");
            }
            tx.insert("INSERT INTO sandboxes (" + COLUMNS + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    record.id().value(), record.name(), record.driver(), record.descriptor().backend().name(),
                    record.descriptor().backend().version(),
                    base64(record.descriptor().payload()), record.provisioned().direction().name(),
                    base64(record.provisioned().state()), record.state().name(), record.runtimeGeneration(), record.credentialEpoch(),
                    record.sessionLineage(), record.policyGeneration(), record.policyDocument(), 1L,
                    record.createdAt().toEpochMilli(), record.updatedAt().toEpochMilli());
            return record;
        });
    }

    /**
     * @param id the sandbox
     * @return its record
     */
    public Optional<SandboxRecord> find(SandboxId id) {
        return guarded(() -> db.execute().get("SELECT " + COLUMNS + " FROM sandboxes WHERE id = ?", id.value())
                .map(SandboxStore::read));
    }

    /**
     * @param name the sandbox's name
     * @return its record
     */
    public Optional<SandboxRecord> findByName(String name) {
        return guarded(() -> db.execute().get("SELECT " + COLUMNS + " FROM sandboxes WHERE name = ?", name)
                .map(SandboxStore::read));
    }

    /** @return every record, ordered by creation */
    public List<SandboxRecord> list() {
        return guarded(() -> {
            try (var rows = db.execute().query("SELECT " + COLUMNS + " FROM sandboxes ORDER BY created_at, id")) {
                return rows.map(SandboxStore::read).toList();
            }
        });
    }

    /**
     * Writes a changed record if nobody else changed it since it was read, and only if no
     * generation or epoch goes backwards.
     *
     * @param changed the record as read (same version), with its changes
     * @return the stored record with the next version
     * @throws GatewayException CONFLICT if another writer won or a counter would go back;
     *                          NOT_FOUND if it was deleted
     */
    public SandboxRecord update(SandboxRecord changed) {
        Instant now = Instant.now();
        return inTransaction(tx -> {
            long n = tx.update("UPDATE sandboxes SET state = ?, runtime_generation = ?, credential_epoch = ?, "
                            + "session_lineage = ?, policy_generation = ?, policy_document = ?, dial_direction = ?, "
                            + "driver_state = ?, backend_name = ?, backend_version = ?, descriptor = ?, "
                            + "row_version = row_version + 1, updated_at = ? "
                            + "WHERE id = ? AND row_version = ? AND policy_generation <= ? "
                            + "AND (runtime_generation < ? OR (runtime_generation = ? AND credential_epoch <= ?))",
                    changed.state().name(), changed.runtimeGeneration(), changed.credentialEpoch(),
                    changed.sessionLineage(), changed.policyGeneration(), changed.policyDocument(),
                    changed.provisioned().direction().name(), base64(changed.provisioned().state()),
                    changed.descriptor().backend().name(), changed.descriptor().backend().version(),
                    base64(changed.descriptor().payload()), now.toEpochMilli(), changed.id().value(), changed.version(),
                    changed.policyGeneration(), changed.runtimeGeneration(), changed.runtimeGeneration(),
                    changed.credentialEpoch());
            if (n == 1) {
                return new SandboxRecord(changed.id(), changed.name(), changed.driver(), changed.provisioned(),
                        changed.state(), changed.runtimeGeneration(), changed.credentialEpoch(),
                        changed.sessionLineage(), changed.policyGeneration(), changed.policyDocument(),
                        changed.version() + 1, changed.createdAt(), Instant.ofEpochMilli(now.toEpochMilli()));
            }
            boolean exists = tx.get("SELECT id FROM sandboxes WHERE id = ?", changed.id().value()).isPresent();
            throw exists
                    ? new GatewayException(Reason.CONFLICT, "sandbox " + changed.id()
                            + " changed since version " + changed.version() + ", or the update would move a generation or epoch back")
                    : new GatewayException(Reason.NOT_FOUND, "no sandbox " + changed.id());
        });
    }

    /**
     * Moves the credential epoch from the expected value to the next one, atomically across
     * replicas: exactly one caller wins each step.
     *
     * @param id       the sandbox
     * @param expected the epoch the caller read
     * @return the record with the new epoch
     * @throws GatewayException CONFLICT if the epoch is no longer {@code expected}
     */
    public SandboxRecord advanceEpoch(SandboxId id, long expected) {
        return inTransaction(tx -> {
            long n = tx.update("UPDATE sandboxes SET credential_epoch = credential_epoch + 1, "
                            + "row_version = row_version + 1, updated_at = ? WHERE id = ? AND credential_epoch = ?",
                    Instant.now().toEpochMilli(), id.value(), expected);
            if (n != 1) {
                throw new GatewayException(Reason.CONFLICT, "credential epoch of " + id + " is no longer " + expected);
            }
            return tx.get("SELECT " + COLUMNS + " FROM sandboxes WHERE id = ?", id.value()).map(SandboxStore::read)
                    .orElseThrow();
        });
    }

    /**
     * Sets the state alone, whatever else changed since the caller read the record: the trusted
     * stop and delete paths, which must not fail (after the driver acted, or before) because a
     * session refreshed its credential epoch or a policy verdict was recorded meanwhile. Every
     * other column stays as stored; the version moves on, so a writer holding an older read gets
     * CONFLICT as usual.
     *
     * @param id    the sandbox
     * @param state its new state
     * @return the record as stored afterwards
     * @throws GatewayException NOT_FOUND if it was deleted
     */
    public SandboxRecord setState(SandboxId id, SandboxState state) {
        return inTransaction(tx -> {
            tx.update("UPDATE sandboxes SET state = ?, row_version = row_version + 1, updated_at = ? WHERE id = ?",
                    state.name(), Instant.now().toEpochMilli(), id.value());
            return tx.get("SELECT " + COLUMNS + " FROM sandboxes WHERE id = ?", id.value()).map(SandboxStore::read)
                    .orElseThrow(() -> new GatewayException(Reason.NOT_FOUND, "no sandbox " + id));
        });
    }

    /**
     * Records a launch FAILED if it is still as the caller observed it: the same row version (so
     * no stop, start, delete, epoch refresh or policy change by this or another replica happened
     * in between), and still PROVISIONING or RUNNING. The cause is kept beside the record.
     *
     * @param observed the record as read before the observation
     * @param failure  why, for its runtime generation
     * @return the record as stored afterwards, or empty if it had changed (nothing written then)
     */
    public Optional<SandboxRecord> fail(SandboxRecord observed, SandboxFailure failure) {
        if (failure.runtimeGeneration() != observed.runtimeGeneration()) {
            throw new GatewayException(Reason.INVALID, "the failure names runtime generation "
                    + failure.runtimeGeneration() + ", the record " + observed.runtimeGeneration());
        }
        return inTransaction(tx -> {
            long n = tx.update("UPDATE sandboxes SET state = ?, row_version = row_version + 1, updated_at = ? "
                            + "WHERE id = ? AND row_version = ? AND runtime_generation = ? AND state IN (?, ?)",
                    SandboxState.FAILED.name(), failure.failedAt().toEpochMilli(), observed.id().value(),
                    observed.version(), observed.runtimeGeneration(), SandboxState.PROVISIONING.name(),
                    SandboxState.RUNNING.name());
            if (n != 1) {
                return Optional.<SandboxRecord>empty();
            }
            tx.delete("DELETE FROM sandbox_failures WHERE sandbox_id = ?", observed.id().value());
            tx.insert("INSERT INTO sandbox_failures (sandbox_id, runtime_generation, cause, failed_at) VALUES (?, ?, ?, ?)",
                    observed.id().value(), failure.runtimeGeneration(), failure.cause(), failure.failedAt().toEpochMilli());
            return tx.get("SELECT " + COLUMNS + " FROM sandboxes WHERE id = ?", observed.id().value())
                    .map(SandboxStore::read);
        });
    }

    /**
     * @param record a sandbox
     * @return why it is FAILED, if it is and the gateway recorded why for its current launch
     */
    public Optional<SandboxFailure> failure(SandboxRecord record) {
        if (record.state() != SandboxState.FAILED) {
            return Optional.empty();
        }
        return guarded(() -> db.execute().get("SELECT runtime_generation, cause, failed_at FROM sandbox_failures "
                        + "WHERE sandbox_id = ?", record.id().value()).map(SandboxStore::readFailure))
                .filter(f -> f.runtimeGeneration() == record.runtimeGeneration());
    }

    /** @return every recorded failure by sandbox id (of any launch: the caller matches the generation) */
    public Map<String, SandboxFailure> failures() {
        return guarded(() -> {
            try (var rows = db.execute().query("SELECT sandbox_id, runtime_generation, cause, failed_at FROM sandbox_failures")) {
                Map<String, SandboxFailure> out = new java.util.HashMap<>();
                rows.forEach(r -> out.put(r.column(1).get(String.class), new SandboxFailure(r.column(2).get(Long.class),
                        r.column(3).get(String.class), Instant.ofEpochMilli(r.column(4).get(Long.class)))));
                return out;
            }
        });
    }

    private static SandboxFailure readFailure(DbRow row) {
        return new SandboxFailure(row.column(1).get(Long.class), row.column(2).get(String.class),
                Instant.ofEpochMilli(row.column(3).get(Long.class)));
    }

    /**
     * Raises the credential epoch to {@code epoch} if it is higher than the stored one and the
     * runtime generation still matches: a supervisor showed a valid token of a later epoch (minted
     * and delivered before a crash could record it). Never lowers it.
     *
     * @param id         the sandbox
     * @param generation the runtime generation the token is bound to
     * @param epoch      the epoch seen
     * @return the record as stored afterwards
     * @throws GatewayException NOT_FOUND if it was deleted
     */
    public SandboxRecord raiseEpoch(SandboxId id, long generation, long epoch) {
        return inTransaction(tx -> {
            tx.update("UPDATE sandboxes SET credential_epoch = ?, row_version = row_version + 1, updated_at = ? "
                            + "WHERE id = ? AND runtime_generation = ? AND credential_epoch < ?",
                    epoch, Instant.now().toEpochMilli(), id.value(), generation, epoch);
            return tx.get("SELECT " + COLUMNS + " FROM sandboxes WHERE id = ?", id.value()).map(SandboxStore::read)
                    .orElseThrow(() -> new GatewayException(Reason.NOT_FOUND, "no sandbox " + id));
        });
    }

    /**
     * Keeps what relaunching the sandbox needs beside its record.
     *
     * @param id   the sandbox, already recorded
     * @param spec the launch specification (JSON, no secrets), at most {@link SandboxRecord#MAX_POLICY_BYTES}
     */
    public void saveLaunchSpec(SandboxId id, String spec) {
        if (spec.getBytes(java.nio.charset.StandardCharsets.UTF_8).length > SandboxRecord.MAX_POLICY_BYTES) {
            throw new GatewayException(Reason.INVALID, "launch specification exceeds " + SandboxRecord.MAX_POLICY_BYTES
                    + " bytes");
        }
        inTransaction(tx -> {
            tx.delete("DELETE FROM sandbox_launches WHERE sandbox_id = ?", id.value());
            tx.insert("INSERT INTO sandbox_launches (sandbox_id, launch_spec) VALUES (?, ?)", id.value(), spec);
            return null;
        });
    }

    /**
     * @param id the sandbox
     * @return its launch specification
     */
    public Optional<String> launchSpec(SandboxId id) {
        return guarded(() -> db.execute().get("SELECT launch_spec FROM sandbox_launches WHERE sandbox_id = ?", id.value())
                .map(r -> r.column(1).get(String.class)));
    }

    /**
     * Appends log lines of a sandbox, dropping its oldest beyond {@code keep}.
     *
     * @param id    the sandbox
     * @param lines the lines, each already cut to the column's 4096 characters
     * @param keep  how many lines the sandbox keeps
     */
    public void appendLogs(SandboxId id, List<String> lines, int keep) {
        appendLogs(id, lines, keep, Instant.now());
    }

    /**
     * Appends log lines of a sandbox kept at one time, dropping its oldest beyond {@code keep}.
     *
     * @param id    the sandbox
     * @param lines the lines, each already cut to the column's 4096 characters
     * @param keep  how many lines the sandbox keeps
     * @param at    when the gateway kept them
     */
    public synchronized void appendLogs(SandboxId id, List<String> lines, int keep, Instant at) {
        if (lines.isEmpty()) {
            return;
        }
        inTransaction(tx -> {
            // A late line about a deleted sandbox (its stream failing after delete) must not outlive it.
            // FOR UPDATE: appenders of one sandbox (the supervisor's lines, the gateway's own events,
            // other replicas on PostgreSQL) take turns, or two would number their lines alike and
            // trim by their own count, keeping more than `keep`.
            if (tx.get("SELECT id FROM sandboxes WHERE id = ? FOR UPDATE", id.value()).isEmpty()) {
                return null;
            }
            long last = tx.get("SELECT MAX(seq) FROM sandbox_logs WHERE sandbox_id = ?", id.value())
                    .flatMap(r -> Optional.ofNullable(r.column(1).get(Long.class))).orElse(0L);
            for (String line : lines) {
                tx.insert("INSERT INTO sandbox_logs (sandbox_id, seq, line, logged_at) VALUES (?, ?, ?, ?)", id.value(),
                        ++last, line, at.toEpochMilli());
            }
            tx.delete("DELETE FROM sandbox_logs WHERE sandbox_id = ? AND seq <= ?", id.value(), last - keep);
            return null;
        });
    }

    /**
     * A kept log line and when the gateway kept it.
     *
     * @param line           the line
     * @param loggedAtMillis epoch milliseconds, or 0 for a line kept before the gateway recorded times
     */
    public record LogLine(String line, long loggedAtMillis) {
        /** @return when it was kept, if that is known */
        public Optional<Instant> loggedAt() {
            return loggedAtMillis == 0 ? Optional.empty() : Optional.of(Instant.ofEpochMilli(loggedAtMillis));
        }
    }

    /**
     * @param id the sandbox
     * @return its kept log lines with their times, oldest first
     */
    public List<LogLine> logLines(SandboxId id) {
        return guarded(() -> {
            try (var rows = db.execute().query("SELECT line, logged_at FROM sandbox_logs WHERE sandbox_id = ? ORDER BY seq",
                    id.value())) {
                return rows.map(r -> new LogLine(r.column(1).get(String.class),
                        Optional.ofNullable(r.column(2).get(Long.class)).orElse(0L))).toList();
            }
        });
    }

    /**
     * @param id the sandbox
     * @return its kept log lines, oldest first
     */
    public List<String> logs(SandboxId id) {
        return guarded(() -> {
            try (var rows = db.execute().query("SELECT line FROM sandbox_logs WHERE sandbox_id = ? ORDER BY seq",
                    id.value())) {
                return rows.map(r -> r.column(1).get(String.class)).toList();
            }
        });
    }

    /**
     * @param id the sandbox
     * @return whether a record was removed (its launch specification, logs and lease go with it)
     */
    public boolean delete(SandboxId id) {
        return inTransaction(tx -> {
            tx.delete("DELETE FROM sandbox_logs WHERE sandbox_id = ?", id.value());
            tx.delete("DELETE FROM sandbox_launches WHERE sandbox_id = ?", id.value());
            tx.delete("DELETE FROM sandbox_failures WHERE sandbox_id = ?", id.value());
            tx.delete("DELETE FROM sandbox_leases WHERE sandbox_id = ?", id.value());
            return tx.delete("DELETE FROM sandboxes WHERE id = ?", id.value()) == 1;
        });
    }

    @Override
    public void close() {
        db.close();
        owner.ifPresent(EmbeddedOwner::close);
    }

    private static SandboxRecord read(DbRow row) {
        // Columns by position: H2 reports names in upper case, PostgreSQL in lower case.
        return new SandboxRecord(
                new SandboxId(row.column(1).get(String.class)),
                row.column(2).get(String.class),
                row.column(3).get(String.class),
                Provisioned.of(TopologyDescriptor.of(new BackendKey(row.column(4).get(String.class),
                                row.column(5).get(Integer.class)), Base64.getDecoder().decode(row.column(6).get(String.class))),
                        DialDirection.valueOf(row.column(7).get(String.class)),
                        Base64.getDecoder().decode(row.column(8).get(String.class))),
                SandboxState.valueOf(row.column(9).get(String.class)),
                row.column(10).get(Long.class),
                row.column(11).get(Long.class),
                row.column(12).get(String.class),
                row.column(13).get(Long.class),
                row.column(14).get(String.class),
                row.column(15).get(Long.class),
                Instant.ofEpochMilli(row.column(16).get(Long.class)),
                Instant.ofEpochMilli(row.column(17).get(Long.class)));
    }

    private static String base64(byte[] bytes) {
        return Base64.getEncoder().encodeToString(bytes);
    }

    private <T> T inTransaction(java.util.function.Function<DbExecute, T> work) {
        DbTransaction tx;
        try {
            tx = db.transaction();
        } catch (DbClientException e) {
            throw unavailable(e);
        }
        boolean committed = false;
        try {
            T result = work.apply(tx);
            tx.commit();
            committed = true;
            return result;
        } catch (DbClientException e) {
            throw unavailable(e);
        } finally {
            if (!committed) {
                try {
                    tx.rollback();
                } catch (RuntimeException ignored) {
                    // The original failure is what the caller needs; the rollback's is noise.
                }
            }
        }
    }

    private static <T> T guarded(java.util.function.Supplier<T> work) {
        try {
            return work.get();
        } catch (DbClientException e) {
            throw unavailable(e);
        }
    }

    private static GatewayException unavailable(DbClientException e) {
        return new GatewayException(Reason.UNAVAILABLE, "sandbox store failed: " + e.getMessage(), e);
    }
}
