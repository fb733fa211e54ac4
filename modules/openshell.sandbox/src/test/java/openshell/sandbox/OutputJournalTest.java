package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The agent's output journal at its bounds: everything up to {@link OutputJournal#MAX_RETAINED_BYTES}
 * is kept; past it the oldest block goes and the next reader is told how much; an attached
 * reader that is behind holds the writer back instead of being skipped.
 */
class OutputJournalTest {
    private static final Duration WAIT = Duration.ofSeconds(10);
    private static final Duration NONE = Duration.ofMillis(50);

    @Test
    void keepsExactlyTheBoundWithNothingLost() throws Exception {
        OutputJournal journal = new OutputJournal();
        byte[] written = pattern(0, OutputJournal.MAX_RETAINED_BYTES);
        journal.append(written, 0, written.length);
        journal.finish();
        try (OutputJournal.Reader reader = journal.reader(0)) {
            assertArrayEquals(written, readToEnd(reader, null));
        }
        assertEquals(0, journal.oldest());
    }

    @Test
    void oneBytePastTheBoundDropsTheOldestBlockAndTellsTheNextReader() throws Exception {
        OutputJournal journal = new OutputJournal();
        byte[] written = pattern(0, OutputJournal.MAX_RETAINED_BYTES + 1);
        journal.append(written, 0, written.length);
        journal.finish();
        assertEquals(OutputJournal.BLOCK_BYTES, journal.oldest());
        long[] lost = new long[1];
        try (OutputJournal.Reader reader = journal.reader(0)) {
            byte[] got = readToEnd(reader, lost);
            assertEquals(OutputJournal.BLOCK_BYTES, lost[0], "the reader learns how much it missed");
            assertArrayEquals(java.util.Arrays.copyOfRange(written, OutputJournal.BLOCK_BYTES, written.length), got);
        }
        // A reader that resumes inside what is kept gets exactly the rest, with nothing lost.
        try (OutputJournal.Reader reader = journal.reader(written.length - 100)) {
            long[] none = new long[1];
            assertArrayEquals(java.util.Arrays.copyOfRange(written, written.length - 100, written.length), readToEnd(reader, none));
            assertEquals(0, none[0]);
        }
        // Beyond the end: from the end.
        try (OutputJournal.Reader reader = journal.reader(Long.MAX_VALUE)) {
            assertInstanceOf(OutputJournal.End.class, reader.next(10, NONE));
        }
    }

    @Test
    void anAttachedReaderThatIsBehindHoldsTheWriterBackUntilItReadsOrDetaches() throws Exception {
        OutputJournal journal = new OutputJournal();
        OutputJournal.Reader reader = journal.reader(0);
        byte[] written = pattern(7, OutputJournal.MAX_RETAINED_BYTES + 3 * OutputJournal.BLOCK_BYTES);
        CompletableFuture<Void> writer = CompletableFuture.runAsync(() -> {
            try {
                journal.append(written, 0, written.length);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        }, task -> Thread.ofVirtual().start(task));
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (journal.written() < OutputJournal.MAX_RETAINED_BYTES) {
            assertTrue(System.nanoTime() < deadline, "the writer should fill the journal");
            Thread.sleep(5);
        }
        Thread.sleep(100);
        assertEquals(OutputJournal.MAX_RETAINED_BYTES, journal.written(), "the writer waits at the bound for the reader");
        ByteArrayOutputStream got = new ByteArrayOutputStream();
        while (got.size() < written.length) {
            OutputJournal.Chunk chunk = reader.next(4096, WAIT);
            OutputJournal.Bytes bytes = assertInstanceOf(OutputJournal.Bytes.class, chunk, "nothing may be skipped");
            assertEquals(got.size(), bytes.offset());
            got.writeBytes(bytes.bytes());
        }
        writer.get(WAIT.toSeconds(), TimeUnit.SECONDS);
        assertArrayEquals(written, got.toByteArray());
        assertNull(reader.next(10, NONE), "nothing more yet, and not ended");

        // At the bound again with the reader far behind: detaching frees the writer.
        journal.append(written, 0, OutputJournal.BLOCK_BYTES);
        reader.close();
        OutputJournal.Reader second = journal.reader(journal.written());
        CompletableFuture<Void> more = CompletableFuture.runAsync(() -> {
            try {
                journal.append(written, 0, written.length);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        }, task -> Thread.ofVirtual().start(task));
        Thread.sleep(100);
        second.close();
        more.get(WAIT.toSeconds(), TimeUnit.SECONDS);
        journal.finish();
        journal.append(written, 0, 10);
        assertEquals(2L * written.length + OutputJournal.BLOCK_BYTES, journal.written(), "appends after finish are dropped");
    }

    private static byte[] readToEnd(OutputJournal.Reader reader, long[] lost) throws InterruptedException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        while (true) {
            OutputJournal.Chunk chunk = reader.next(5000, WAIT);
            switch (chunk) {
                case OutputJournal.Bytes bytes -> out.writeBytes(bytes.bytes());
                case OutputJournal.Lost gap -> lost[0] += gap.bytes();
                case OutputJournal.End end -> {
                    return out.toByteArray();
                }
                case null -> throw new AssertionError("a finished journal must not make a reader wait");
            }
        }
    }

    private static byte[] pattern(int seed, int length) {
        byte[] bytes = new byte[length];
        for (int i = 0; i < length; i++) {
            bytes[i] = (byte) (i * 31 + (i >> 13) + seed);
        }
        return bytes;
    }
}
