package openshell.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.temporal.ChronoUnit;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import openshell.driver.DialDirection;
import openshell.driver.Provisioned;
import openshell.gateway.store.SandboxRecord;
import openshell.gateway.store.SandboxState;
import openshell.gateway.store.SandboxStore;
import openshell.gateway.store.StoreConfig;
import openshell.isolation.BackendKey;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.TopologyDescriptor;
import org.junit.jupiter.api.Test;

/**
 * Log lines the store refuses are tried again, and when still refused they are not lost in
 * silence: standard error says so, and the sandbox's next kept lines say how many went. The
 * refusal is the real one: another connection holds the sandbox's row past H2's lock timeout.
 */
class SandboxLogsTest {
    private static final Instant NOW = Instant.parse("2026-12-01T10:00:00Z");
    private static final SandboxId ID = new SandboxId("sb-logs");
    private static final Clock CLOCK = Clock.fixed(NOW, ZoneOffset.UTC);

    @Test
    void aBatchRefusedEveryTryIsCountedReportedAndAnnouncedWithTheNextKeptLines() throws Exception {
        StoreConfig config = freshConfig();
        try (SandboxStore store = storeWithTheSandbox(config)) {
            SandboxLogs logs = new SandboxLogs(store, CLOCK);
            String reported;
            try (Connection holder = rowHeld(config)) {
                long start = System.nanoTime();
                reported = stderrOf(() -> assertFalse(logs.append(ID, List.of("lost one", "lost two")),
                        "refused while the row is held"));
                long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                System.out.println("one refused batch took " + waited + " ms");
                assertTrue(waited >= SandboxLogs.APPEND_ATTEMPTS * lockTimeoutMillis(holder), "each try waited out the lock: " + waited);
                assertFalse(logs.append(ID, List.of("lost three")));
                holder.rollback();
            }
            assertTrue(reported.startsWith("openshell gateway: 2 log lines of sandbox sb-logs not kept after "
                    + SandboxLogs.APPEND_ATTEMPTS + " tries (2 so far): "), reported);
            assertFalse(reported.contains("lost one"), "the lines themselves are never printed: " + reported);
            assertEquals(List.of(), store.logs(ID));

            assertTrue(logs.append(ID, List.of("kept")));
            List<String> kept = store.logs(ID);
            assertEquals(2, kept.size(), kept.toString());
            assertTrue(kept.get(0).startsWith(NOW + " gateway: 3 log lines were lost before this one: sandbox store failed"),
                    kept.get(0));
            assertEquals("kept", kept.get(1));

            assertTrue(logs.append(ID, List.of("next")));
            assertEquals("next", store.logs(ID).getLast(), "the loss is announced once");
            assertEquals(3, store.logs(ID).size());
        }
    }

    @Test
    void aLockReleasedDuringTheTriesLosesNothing() throws Exception {
        StoreConfig config = freshConfig();
        try (SandboxStore store = storeWithTheSandbox(config)) {
            SandboxLogs logs = new SandboxLogs(store, CLOCK);
            CompletableFuture<Boolean> appended;
            try (Connection holder = rowHeld(config)) {
                appended = CompletableFuture.supplyAsync(() -> logs.append(ID, List.of("waited")));
                // Released while the second try waits: the first was refused, the second keeps the line.
                Thread.sleep(lockTimeoutMillis(holder) * 3 / 2);
                holder.rollback();
            }
            assertTrue(appended.get(30, TimeUnit.SECONDS));
            assertEquals(List.of("waited"), store.logs(ID));
        }
    }

    /**
     * The session's inbound thread hands lines to the writer and goes on: the row is held until
     * the offer has returned, so an offer that waited for the store would have been refused
     * {@link SandboxLogs#APPEND_ATTEMPTS} times and lost its lines.
     */
    @Test
    void anOfferReturnsWhileTheStoreWaitsAndTheLinesAreKeptOnceItIsFree() throws Exception {
        StoreConfig config = freshConfig();
        try (SandboxStore store = storeWithTheSandbox(config)) {
            LogWriter writer = new LogWriter(new SandboxLogs(store, CLOCK));
            try (Connection holder = rowHeld(config)) {
                assertTrue(writer.offer(ID, List.of("one", "two")));
                holder.rollback();
            }
            writer.close();
            assertEquals(List.of("one", "two"), store.logs(ID));
        }
    }

    @Test
    void aBatchPastTheWritersBoundIsCountedAsLostAndAnnounced() throws Exception {
        StoreConfig config = freshConfig();
        try (SandboxStore store = storeWithTheSandbox(config)) {
            LogWriter writer = new LogWriter(new SandboxLogs(store, CLOCK), 2, LogWriter.MAX_PENDING_CHARS, LogWriter.DRAIN_WAIT);
            String reported;
            try (Connection holder = rowHeld(config)) {
                assertTrue(writer.offer(ID, List.of("first")));
                awaitTaken(writer); // the writer now waits for the row
                assertTrue(writer.offer(ID, List.of("second")));
                assertTrue(writer.offer(ID, List.of("third")));
                reported = stderrOf(() -> assertFalse(writer.offer(ID, List.of("over", "the bound"))));
                holder.rollback();
            }
            writer.close();
            assertTrue(reported.startsWith("openshell gateway: 2 log lines of sandbox sb-logs not queued for the store "
                    + "(2 so far): the store is 2 batches behind"), reported);
            assertFalse(reported.contains("over"), "the lines themselves are never printed: " + reported);
            List<String> kept = store.logs(ID);
            List<String> announced = kept.stream().filter(l -> l.contains(" gateway: ")).toList();
            assertEquals(1, announced.size(), kept.toString());
            assertTrue(announced.getFirst().contains("2 log lines were lost before this one: the store is 2 batches behind"),
                    announced.getFirst());
            assertEquals(List.of("first", "second", "third"), kept.stream().filter(l -> !l.contains(" gateway: ")).toList());
            assertTrue(kept.indexOf(announced.getFirst()) < kept.indexOf("second"), "announced before the next kept lines: " + kept);
        }
    }

    @Test
    void aBatchPastTheCharacterBoundIsCountedAsLostAndLongLinesCountAsCut() throws Exception {
        StoreConfig config = freshConfig();
        try (SandboxStore store = storeWithTheSandbox(config)) {
            long bound = 2L * SandboxLogs.MAX_LINE_CHARS;
            LogWriter writer = new LogWriter(new SandboxLogs(store, CLOCK), LogWriter.MAX_PENDING_BATCHES, bound,
                    LogWriter.DRAIN_WAIT);
            String reported;
            try (Connection holder = rowHeld(config)) {
                assertTrue(writer.offer(ID, List.of("taken")));
                awaitTaken(writer);
                // A line counts as much as is kept of it: two over-long lines fill the bound exactly.
                String longLine = "l".repeat(SandboxLogs.MAX_LINE_CHARS + 100);
                assertTrue(writer.offer(ID, List.of(longLine, longLine)));
                reported = stderrOf(() -> assertFalse(writer.offer(ID, List.of("x"))));
                holder.rollback();
            }
            writer.close();
            assertTrue(reported.startsWith("openshell gateway: 1 log lines of sandbox sb-logs not queued for the store "
                    + "(1 so far): the store is behind by more than " + bound + " characters of log lines"), reported);
            assertEquals(List.of("taken", "l".repeat(SandboxLogs.MAX_LINE_CHARS), "l".repeat(SandboxLogs.MAX_LINE_CHARS)),
                    store.logs(ID).stream().filter(l -> !l.contains(" gateway: ")).toList());
        }
    }

    @Test
    void whatTheStoreDidNotTakeByTheDrainWaitIsCountedAndLaterOffersToo() throws Exception {
        StoreConfig config = freshConfig();
        try (SandboxStore store = storeWithTheSandbox(config)) {
            LogWriter writer = new LogWriter(new SandboxLogs(store, CLOCK), 4, LogWriter.MAX_PENDING_CHARS, java.time.Duration.ofMillis(100));
            String atClose;
            String afterClose;
            try (Connection holder = rowHeld(config)) {
                assertTrue(writer.offer(ID, List.of("taken")));
                awaitTaken(writer);
                assertTrue(writer.offer(ID, List.of("left", "behind")));
                atClose = stderrOf(writer::close);
                afterClose = stderrOf(() -> assertFalse(writer.offer(ID, List.of("late"))));
                holder.rollback();
            }
            assertTrue(atClose.startsWith("openshell gateway: 2 log lines of sandbox sb-logs not written (2 so far): "
                    + "the gateway stopped before the store took them (waited 100 ms)"), atClose);
            assertTrue(afterClose.startsWith("openshell gateway: 1 log lines of sandbox sb-logs not queued for the store "
                    + "(3 so far): the gateway is stopping"), afterClose);
            // The batch the writer was on when the row came free is still written; then the writer ends.
            String[] where = {""};
            String meanwhile = stderrOf(() -> {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
                while (!store.logs(ID).contains("taken") && System.nanoTime() < deadline) {
                    try {
                        Thread.sleep(10);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        return;
                    }
                }
                where[0] = writer.writerState();
            });
            // A writer that reached the store only after the close counted the rest also announces that loss first.
            assertEquals(List.of("taken"), store.logs(ID).stream().filter(l -> !l.contains(" gateway: ")).toList(),
                    () -> "standard error meanwhile: " + meanwhile + "\nthe writer: " + where[0]);
        }
    }

    @Test
    void lossesAreRememberedForAtMostTheBoundOfSandboxes() throws Exception {
        SandboxStore store = storeWithTheSandbox(freshConfig());
        // A store that is gone refuses at once: every try fails without a lock wait.
        store.close();
        SandboxLogs logs = new SandboxLogs(store, CLOCK, 1);
        String first = stderrOf(() -> assertFalse(logs.append(ID, List.of("a", "b"))));
        assertTrue(first.contains("(2 so far)"), first);
        String again = stderrOf(() -> assertFalse(logs.append(ID, List.of("c"))));
        assertTrue(again.contains("(3 so far)"), "the remembered sandbox keeps counting: " + again);
        String other = stderrOf(() -> assertFalse(logs.append(new SandboxId("sb-other"), List.of("d"))));
        assertTrue(other.contains("not announced in its log: 1 sandboxes have losses to announce"), other);
    }

    @Test
    void linesAreCutAtTheBound() throws Exception {
        StoreConfig config = freshConfig();
        try (SandboxStore store = storeWithTheSandbox(config)) {
            SandboxLogs logs = new SandboxLogs(store, CLOCK);
            String atBound = "a".repeat(SandboxLogs.MAX_LINE_CHARS);
            assertTrue(logs.append(ID, List.of(atBound, atBound + "b")));
            assertEquals(List.of(atBound, atBound), store.logs(ID));
            // The announcement of a loss too, however long the store's reason was.
            assertEquals(SandboxLogs.MAX_LINE_CHARS, logs.lossLine(3, "r".repeat(2 * SandboxLogs.MAX_LINE_CHARS)).length());
            assertTrue(logs.append(ID, List.of(logs.lossLine(3, "r".repeat(2 * SandboxLogs.MAX_LINE_CHARS)))));
        }
    }

    /** Longest wait in these tests for the writer thread to reach a state. */
    private static final long WAIT_SECONDS = 30;

    /** Waits until the writer took every queued batch (it is then in the store, waiting for the row). */
    private static void awaitTaken(LogWriter writer) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        while (writer.pendingBatches() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertEquals(0, writer.pendingBatches(), "the writer took the batch");
    }

    /** How long a statement waits for a row another transaction holds (H2's default, as a session sees it). */
    private static long lockTimeoutMillis(Connection c) throws Exception {
        try (PreparedStatement s = c.prepareStatement("SELECT LOCK_TIMEOUT()")) {
            var rows = s.executeQuery();
            assertTrue(rows.next(), "H2 reports its lock timeout");
            long millis = rows.getLong(1);
            assertTrue(millis > 0, "a lock wait that ends: " + millis);
            return millis;
        }
    }

    private static StoreConfig freshConfig() throws Exception {
        return StoreConfig.embedded(Files.createTempDirectory("openshell-logs-test-").resolve("db"));
    }

    /** @return a store on a fresh embedded database that holds the one sandbox these tests log for */
    private static SandboxStore storeWithTheSandbox(StoreConfig config) {
        SandboxStore store = SandboxStore.open(config);
        store.create(record());
        return store;
    }

    private static Connection rowHeld(StoreConfig config) throws Exception {
        Connection c = DriverManager.getConnection(config.jdbcUrl(), config.username(), config.password());
        c.setAutoCommit(false);
        try (PreparedStatement s = c.prepareStatement("SELECT id FROM sandboxes WHERE id = ? FOR UPDATE")) {
            s.setString(1, ID.value());
            assertTrue(s.executeQuery().next());
        }
        return c;
    }

    private static String stderrOf(Runnable work) {
        PrintStream original = System.err;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            work.run();
        } finally {
            System.setErr(original);
        }
        return captured.toString(StandardCharsets.UTF_8);
    }

    private static SandboxRecord record() {
        Instant now = Instant.now().truncatedTo(ChronoUnit.MILLIS);
        return new SandboxRecord(ID, "logs", "process",
                Provisioned.of(TopologyDescriptor.of(new BackendKey("openshell-sandbox", 1), new byte[] {1}),
                        DialDirection.RUNTIME_INITIATED, new byte[] {1}),
                SandboxState.PROVISIONING, 1, 1, SandboxSessionId.fresh().value(), 1,
                "version: 1\nnetwork_policies: {}\n", 1, now, now);
    }
}
