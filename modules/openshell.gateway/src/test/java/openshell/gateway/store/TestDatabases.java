package openshell.gateway.store;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;

/**
 * The two databases every store test runs against: a fresh embedded H2 file and a fresh database
 * on one real PostgreSQL server, started on first use and stopped when the test JVM exits.
 */
public final class TestDatabases {
    /** The databases the store supports. */
    public enum Database { H2, POSTGRESQL }

    private static final AtomicInteger COUNTER = new AtomicInteger();
    private static PostgresServer postgres;
    private static Path scratch;

    private TestDatabases() {
    }

    public static Stream<Database> all() {
        return Stream.of(Database.values());
    }

    public static synchronized StoreConfig fresh(Database db) throws Exception {
        int n = COUNTER.incrementAndGet();
        return switch (db) {
            case H2 -> StoreConfig.embedded(Files.createDirectories(scratch().resolve("h2-" + n)));
            case POSTGRESQL -> postgres().freshDatabase("openshell_test_" + n);
        };
    }

    static synchronized Path scratch() throws Exception {
        if (scratch == null) {
            scratch = Files.createTempDirectory("openshell-store-test-");
        }
        return scratch;
    }

    private static PostgresServer postgres() throws Exception {
        if (postgres == null) {
            PostgresServer started = PostgresServer.start();
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                try {
                    started.close();
                } catch (java.io.IOException ignored) {
                    // The JVM is exiting; the temporary directory goes with the machine.
                }
            }, "postgres-test-server-stop"));
            postgres = started;
        }
        return postgres;
    }
}
