package openshell.gateway.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.time.Instant;
import java.util.List;

import openshell.gateway.GatewayException;
import openshell.gateway.GatewayException.Reason;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** Providers on both databases: values sealed at rest, never listed, bound to the right key and name. */
class ProviderStoreTest {
    private static final byte[] SECRET = "ghp_reallySecretValue123".getBytes(StandardCharsets.UTF_8);

    @TempDir
    static Path state;

    static ProviderRecord github() {
        return new ProviderRecord("github", "GITHUB_TOKEN", List.of("api.github.com", "raw.githubusercontent.com"),
                Instant.ofEpochMilli(1_700_000_000_000L));
    }

    static SecretBox box(String dir) throws Exception {
        Path d = Files.createDirectories(state.resolve(dir));
        return SecretBox.loadOrCreate(d);
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void valuesAreSealedAtRestAndOnlySecretOpensThem(TestDatabases.Database db) throws Exception {
        StoreConfig config = TestDatabases.fresh(db);
        try (SandboxStore store = SandboxStore.open(config)) {
            assertEquals(Migration.ALL.getLast().version(), store.schemaVersion());
            ProviderStore providers = store.providers(box("key-" + db));
            providers.create(github(), SECRET.clone());
            assertEquals(List.of(github()), providers.list());
            assertEquals(github(), providers.find("github").orElseThrow());
            assertArrayEquals(SECRET, providers.secret("github"));
            assertEquals("openshell-credential-github", github().placeholder());
        }
        try (Connection c = DriverManager.getConnection(config.jdbcUrl(), config.username(), config.password());
             ResultSet rs = c.createStatement().executeQuery("SELECT sealed FROM providers")) {
            assertTrue(rs.next());
            assertFalse(rs.getString(1).contains("reallySecret"), "the value is sealed in the database");
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void anotherKeyOrAnotherRowCannotOpenAValue(TestDatabases.Database db) throws Exception {
        StoreConfig config = TestDatabases.fresh(db);
        try (SandboxStore store = SandboxStore.open(config)) {
            ProviderStore providers = store.providers(box("key-a-" + db));
            providers.create(github(), SECRET.clone());
            providers.create(new ProviderRecord("other", "OTHER_TOKEN", List.of("example.com"), Instant.EPOCH),
                    "x".getBytes(StandardCharsets.UTF_8));
            assertEquals(Reason.INVALID, assertThrows(GatewayException.class,
                    () -> store.providers(box("key-b-" + db)).secret("github")).reason());
            try (Connection c = DriverManager.getConnection(config.jdbcUrl(), config.username(), config.password())) {
                c.createStatement().executeUpdate("UPDATE providers SET sealed = (SELECT sealed FROM providers "
                        + "WHERE name = 'github') WHERE name = 'other'");
            }
            GatewayException moved = assertThrows(GatewayException.class, () -> providers.secret("other"));
            assertEquals(Reason.INVALID, moved.reason());
            assertFalse(moved.getMessage().contains("reallySecret"));
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void boundsAndConflicts(TestDatabases.Database db) throws Exception {
        try (SandboxStore store = SandboxStore.open(TestDatabases.fresh(db))) {
            ProviderStore providers = store.providers(box("key-c-" + db));
            byte[] atBound = new byte[ProviderRecord.MAX_SECRET_BYTES];
            java.util.Arrays.fill(atBound, (byte) 'v');
            providers.create(github(), atBound);
            assertEquals(Reason.CONFLICT, assertThrows(GatewayException.class,
                    () -> providers.create(github(), SECRET.clone())).reason());
            ProviderRecord other = new ProviderRecord("other", "OTHER", List.of("example.com"), Instant.EPOCH);
            assertEquals(Reason.INVALID, assertThrows(GatewayException.class,
                    () -> providers.create(other, new byte[ProviderRecord.MAX_SECRET_BYTES + 1])).reason());
            assertEquals(Reason.INVALID, assertThrows(GatewayException.class,
                    () -> providers.create(other, new byte[0])).reason());
            GatewayException newline = assertThrows(GatewayException.class,
                    () -> providers.create(other, "line\nbreak".getBytes(StandardCharsets.UTF_8)));
            assertEquals(Reason.INVALID, newline.reason());
            assertFalse(newline.getMessage().contains("break"));
            assertTrue(providers.find("other").isEmpty());
            assertTrue(providers.delete("github"));
            assertFalse(providers.delete("github"));
            assertEquals(Reason.NOT_FOUND, assertThrows(GatewayException.class, () -> providers.secret("github")).reason());
        }
    }

    @Test
    void recordValidation() {
        Instant t = Instant.EPOCH;
        assertThrows(GatewayException.class, () -> new ProviderRecord("Bad", "X", List.of("a.com"), t));
        assertThrows(GatewayException.class, () -> new ProviderRecord("ok", "lower", List.of("a.com"), t));
        assertThrows(GatewayException.class, () -> new ProviderRecord("ok", "X", List.of(), t));
        assertThrows(GatewayException.class, () -> new ProviderRecord("ok", "X", List.of("a..com"), t));
        assertThrows(GatewayException.class, () -> new ProviderRecord("ok", "X", List.of("a.com,b.com"), t));
        assertThrows(GatewayException.class, () -> new ProviderRecord("ok", "X", List.of("*.a.com"), t));
        List<String> max = java.util.stream.IntStream.range(0, ProviderRecord.MAX_HOSTS).mapToObj(i -> "h" + i + ".com").toList();
        assertEquals(ProviderRecord.MAX_HOSTS, new ProviderRecord("ok", "X", max, t).hosts().size());
        List<String> over = java.util.stream.IntStream.rangeClosed(0, ProviderRecord.MAX_HOSTS).mapToObj(i -> "h" + i + ".com").toList();
        assertThrows(GatewayException.class, () -> new ProviderRecord("ok", "X", over, t));
    }

    @Test
    void aKeyFileOthersCanReadIsRefused() throws Exception {
        Path d = Files.createDirectories(state.resolve("leaky"));
        SecretBox.loadOrCreate(d);
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(d.resolve(SecretBox.KEY_FILE))));
        Files.setPosixFilePermissions(d.resolve(SecretBox.KEY_FILE), PosixFilePermissions.fromString("rw-r--r--"));
        assertEquals(Reason.INVALID, assertThrows(GatewayException.class, () -> SecretBox.loadOrCreate(d)).reason());
    }
}
