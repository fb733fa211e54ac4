package openshell.sandbox;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * One output stream of the agent, drained from its pipe all the time and kept in a bounded
 * buffer addressed by absolute byte offset, so a client that attaches late or again (after its
 * link dropped) gets what it missed from where it stopped, and learns how much was lost when
 * that is older than what is kept. Without it the agent blocked on a full pipe whenever
 * nobody was attached, and a chunk in flight when an attach stream died was gone.
 *
 * <p>While no reader is attached the oldest bytes make room for new ones (reported to the next
 * reader as lost). While a reader is attached and behind, the writer waits for it instead:
 * an attached client is never skipped over, so the agent is held back by its slowest attached
 * reader, as a pipe would hold it.
 */
final class OutputJournal {
    /** Bytes kept per stream (the agent's stdout and stderr each). */
    static final int MAX_RETAINED_BYTES = 1024 * 1024;
    /** Unit of allocation and of dropping: a quiet agent costs nothing, a chatty one at most the bound. */
    static final int BLOCK_BYTES = 16 * 1024;
    private static final int MAX_BLOCKS = MAX_RETAINED_BYTES / BLOCK_BYTES;

    private final List<byte[]> blocks = new ArrayList<>();
    private final Set<Reader> readers = new HashSet<>();
    // Offset of blocks.get(0)[0]; every byte below it is lost.
    private long base;
    private long end;
    private boolean ended;

    /**
     * Appends the bytes, waiting while an attached reader has not yet read the block that would
     * have to go. After {@link #finish()} the bytes are discarded.
     *
     * @param bytes the source
     * @param off   from
     * @param len   how many
     * @throws InterruptedException if interrupted while waiting for a reader
     */
    synchronized void append(byte[] bytes, int off, int len) throws InterruptedException {
        int at = off;
        int left = len;
        while (left > 0 && !ended) {
            int fill = (int) (end - base) - (blocks.size() - 1) * BLOCK_BYTES;
            if (blocks.isEmpty() || fill == BLOCK_BYTES) {
                if (blocks.size() == MAX_BLOCKS) {
                    if (slowestReader() < base + BLOCK_BYTES) {
                        wait();
                        continue;
                    }
                    blocks.remove(0);
                    base += BLOCK_BYTES;
                }
                blocks.add(new byte[BLOCK_BYTES]);
                fill = 0;
            }
            int n = Math.min(left, BLOCK_BYTES - fill);
            System.arraycopy(bytes, at, blocks.get(blocks.size() - 1), fill, n);
            at += n;
            left -= n;
            end += n;
            notifyAll();
        }
    }

    /** No more output: readers end once they have read what is kept; later appends are dropped. */
    synchronized void finish() {
        ended = true;
        notifyAll();
    }

    /** @return offset one past the last byte ever written */
    synchronized long written() {
        return end;
    }

    /** @return offset of the oldest byte kept */
    synchronized long oldest() {
        return base;
    }

    /**
     * Attaches a reader.
     *
     * @param from the offset to read from (0 for everything kept); beyond the end reads from the end
     * @return the reader, to close when its client goes
     */
    synchronized Reader reader(long from) {
        Reader reader = new Reader(Math.min(Math.max(0, from), end));
        readers.add(reader);
        return reader;
    }

    /**
     * The agent's two journals.
     *
     * @param stdout its stdout (a terminal's merged output)
     * @param stderr its stderr (finished at once on a terminal)
     */
    record Pair(OutputJournal stdout, OutputJournal stderr) {
    }

    private long slowestReader() {
        long slowest = Long.MAX_VALUE;
        for (Reader reader : readers) {
            slowest = Math.min(slowest, reader.cursor);
        }
        return slowest;
    }

    /** What one read returned: bytes at an offset, or how many bytes were lost before it, or the end. */
    sealed interface Chunk permits Bytes, Lost, End {
    }

    /** @param offset where the bytes start @param bytes at least one */
    record Bytes(long offset, byte[] bytes) implements Chunk {
    }

    /** @param bytes how many were dropped before the reader got them */
    record Lost(long bytes) implements Chunk {
    }

    /** The stream ended and everything kept was read. */
    record End() implements Chunk {
    }

    /** A cursor into the journal; the writer waits for it while it is attached and behind. */
    final class Reader implements AutoCloseable {
        private long cursor;
        private boolean closed;

        private Reader(long cursor) {
            this.cursor = cursor;
        }

        /**
         * @param max  most bytes to return
         * @param wait longest wait for something to return
         * @return the next chunk, or null if nothing came within the wait
         * @throws InterruptedException if interrupted while waiting
         */
        Chunk next(int max, Duration wait) throws InterruptedException {
            synchronized (OutputJournal.this) {
                long deadline = System.nanoTime() + wait.toNanos();
                while (cursor == end && !ended && !closed) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        return null;
                    }
                    TimeUnit.NANOSECONDS.timedWait(OutputJournal.this, left);
                }
                if (closed) {
                    return new End();
                }
                if (cursor < base) {
                    long lost = base - cursor;
                    cursor = base;
                    return new Lost(lost);
                }
                if (cursor == end) {
                    return new End();
                }
                int index = (int) ((cursor - base) / BLOCK_BYTES);
                int within = (int) ((cursor - base) % BLOCK_BYTES);
                int n = (int) Math.min(Math.min(max, BLOCK_BYTES - within), end - cursor);
                byte[] out = new byte[n];
                System.arraycopy(blocks.get(index), within, out, 0, n);
                Bytes chunk = new Bytes(cursor, out);
                cursor += n;
                OutputJournal.this.notifyAll();
                return chunk;
            }
        }

        /** @return the offset of the next byte this reader will get */
        long cursor() {
            synchronized (OutputJournal.this) {
                return cursor;
            }
        }

        /** Detaches: the writer no longer waits for this reader. */
        @Override
        public void close() {
            synchronized (OutputJournal.this) {
                closed = true;
                readers.remove(this);
                OutputJournal.this.notifyAll();
            }
        }
    }
}
