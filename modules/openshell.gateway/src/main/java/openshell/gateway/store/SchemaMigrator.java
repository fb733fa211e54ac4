package openshell.gateway.store;

import java.time.Instant;

import io.helidon.dbclient.DbClient;
import io.helidon.dbclient.DbClientException;
import io.helidon.dbclient.DbTransaction;
import openshell.gateway.GatewayException;
import openshell.gateway.GatewayException.Reason;

/**
 * Applies {@link Migration#ALL} in order, each in its own transaction together with its row in
 * {@code openshell_schema}. Two replicas migrating at once collide on that row's primary key: one
 * wins, the other rolls back and finds the work done. A database newer than this gateway is
 * refused, never written.
 */
final class SchemaMigrator {
    private SchemaMigrator() {
    }

    static int migrate(DbClient db) {
        try {
            db.execute().dml("CREATE TABLE IF NOT EXISTS openshell_schema (version INTEGER NOT NULL PRIMARY KEY, "
                    + "description VARCHAR(200) NOT NULL, applied_at BIGINT NOT NULL)");
            int newest = Migration.ALL.getLast().version();
            int current = current(db);
            if (current > newest) {
                throw new GatewayException(Reason.INCOMPATIBLE, "the database schema is version " + current
                        + " but this gateway knows only up to " + newest + "; upgrade the gateway");
            }
            for (Migration m : Migration.ALL) {
                if (m.version() > current(db)) {
                    apply(db, m);
                }
            }
            return current(db);
        } catch (DbClientException e) {
            throw new GatewayException(Reason.UNAVAILABLE, "schema migration failed: " + e.getMessage(), e);
        }
    }

    private static int current(DbClient db) {
        return db.execute().get("SELECT MAX(version) FROM openshell_schema")
                .map(r -> r.column(1).get(Integer.class)).orElse(0);
    }

    private static void apply(DbClient db, Migration m) {
        DbTransaction tx = db.transaction();
        boolean committed = false;
        try {
            for (String statement : m.statements()) {
                tx.dml(statement);
            }
            tx.insert("INSERT INTO openshell_schema (version, description, applied_at) VALUES (?, ?, ?)",
                    m.version(), m.description(), Instant.now().toEpochMilli());
            tx.commit();
            committed = true;
        } catch (DbClientException e) {
            if (current(db) < m.version()) {
                throw e;
            }
            // Another replica applied it concurrently; its result stands.
        } finally {
            if (!committed) {
                try {
                    tx.rollback();
                } catch (RuntimeException ignored) {
                    // Nothing to undo beyond what the failure already undid.
                }
            }
        }
    }
}
