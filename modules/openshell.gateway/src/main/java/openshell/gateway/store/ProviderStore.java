package openshell.gateway.store;

import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;

import io.helidon.dbclient.DbClient;
import io.helidon.dbclient.DbClientException;
import io.helidon.dbclient.DbRow;
import openshell.gateway.GatewayException;
import openshell.gateway.GatewayException.Reason;

/**
 * Providers in the gateway's database, their values sealed by a {@link SecretBox}. Listing never
 * opens a value; only {@link #secret(String)} does, for delivery to a supervisor.
 */
public final class ProviderStore {
    /** Most providers kept. */
    public static final int MAX_PROVIDERS = 1024;

    private final DbClient db;
    private final SecretBox box;

    ProviderStore(DbClient db, SecretBox box) {
        this.db = db;
        this.box = box;
    }

    /**
     * @param record the provider
     * @param secret its value (not kept by this method; the caller should clear it)
     * @return the stored record
     * @throws GatewayException CONFLICT if the name is taken; INVALID for an empty, too large or
     *                          non-printable value; EXHAUSTED at {@link #MAX_PROVIDERS}
     */
    public ProviderRecord create(ProviderRecord record, byte[] secret) {
        if (secret.length == 0 || secret.length > ProviderRecord.MAX_SECRET_BYTES) {
            throw new GatewayException(Reason.INVALID, "a provider value has 1.." + ProviderRecord.MAX_SECRET_BYTES
                    + " bytes");
        }
        for (byte b : secret) {
            if (b < 0x20 || b == 0x7f) {
                // The supervisor puts the value into HTTP headers: printable ASCII only. Never echo it.
                throw new GatewayException(Reason.INVALID, "a provider value must be printable ASCII");
            }
        }
        String sealed = box.seal(record.name(), secret);
        try {
            var tx = db.transaction();
            boolean done = false;
            try {
                long count = tx.get("SELECT COUNT(*) FROM providers").map(r -> r.column(1).get(Long.class)).orElse(0L);
                if (count >= MAX_PROVIDERS) {
                    throw new GatewayException(Reason.EXHAUSTED, "at most " + MAX_PROVIDERS + " providers");
                }
                if (tx.get("SELECT name FROM providers WHERE name = ?", record.name()).isPresent()) {
                    throw new GatewayException(Reason.CONFLICT, "a provider named " + record.name() + " exists");
                }
                tx.insert("INSERT INTO providers (name, env_var, hosts, sealed, created_at) VALUES (?, ?, ?, ?, ?)",
                        record.name(), record.envVar(), String.join(",", record.hosts()), sealed,
                        record.createdAt().toEpochMilli());
                tx.commit();
                done = true;
                return record;
            } finally {
                if (!done) {
                    tx.rollback();
                }
            }
        } catch (DbClientException e) {
            throw new GatewayException(Reason.UNAVAILABLE, "provider store failed: " + e.getMessage(), e);
        }
    }

    /** @return every provider, by name, without values */
    public List<ProviderRecord> list() {
        try (var rows = db.execute().query("SELECT name, env_var, hosts, created_at FROM providers ORDER BY name")) {
            return rows.map(ProviderStore::read).toList();
        } catch (DbClientException e) {
            throw new GatewayException(Reason.UNAVAILABLE, "provider store failed: " + e.getMessage(), e);
        }
    }

    /**
     * @param name the provider
     * @return it, without its value
     */
    public Optional<ProviderRecord> find(String name) {
        try {
            return db.execute().get("SELECT name, env_var, hosts, created_at FROM providers WHERE name = ?", name)
                    .map(ProviderStore::read);
        } catch (DbClientException e) {
            throw new GatewayException(Reason.UNAVAILABLE, "provider store failed: " + e.getMessage(), e);
        }
    }

    /**
     * The value, for delivery to a supervisor only.
     *
     * @param name the provider
     * @return its opened value
     * @throws GatewayException NOT_FOUND if there is no such provider
     */
    public byte[] secret(String name) {
        String sealed;
        try {
            sealed = db.execute().get("SELECT sealed FROM providers WHERE name = ?", name)
                    .map(r -> r.column(1).get(String.class))
                    .orElseThrow(() -> new GatewayException(Reason.NOT_FOUND, "no provider named " + name));
        } catch (DbClientException e) {
            throw new GatewayException(Reason.UNAVAILABLE, "provider store failed: " + e.getMessage(), e);
        }
        return box.open(name, sealed);
    }

    /**
     * @param name the provider
     * @return whether it existed
     */
    public boolean delete(String name) {
        try {
            return db.execute().delete("DELETE FROM providers WHERE name = ?", name) == 1;
        } catch (DbClientException e) {
            throw new GatewayException(Reason.UNAVAILABLE, "provider store failed: " + e.getMessage(), e);
        }
    }

    private static ProviderRecord read(DbRow row) {
        return new ProviderRecord(row.column(1).get(String.class), row.column(2).get(String.class),
                Arrays.asList(row.column(3).get(String.class).split(",")),
                Instant.ofEpochMilli(row.column(4).get(Long.class)));
    }
}
