package openshell.supervisor;

import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;

/**
 * Bytes arriving on one protocol stream, read as an {@link InputStream}. Bounded: when the
 * consumer lags, the stream's deliverer waits (back-pressure towards the runtime).
 */
final class InboundBytes extends InputStream {
    /** Chunks queued per stream (each at most one 16 KiB frame). */
    static final int MAX_CHUNKS = 64;
    private static final byte[] END = new byte[0];

    private final BlockingQueue<byte[]> chunks = new ArrayBlockingQueue<>(MAX_CHUNKS + 1);
    private byte[] current = new byte[0];
    private int position;
    private volatile boolean ended;
    private volatile boolean discarding;
    private volatile String failure;

    /** Queues a chunk, waiting while the queue is full; dropped once the reader has gone ({@link #discard()}). */
    void deliver(byte[] chunk) {
        if (chunk.length == 0 || discarding) {
            return;
        }
        try {
            chunks.put(chunk);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** End of input (clean); later reads return -1 once drained. */
    void end() {
        chunks.offer(END);
    }

    /**
     * The reader has gone: what is queued and what still arrives is dropped, so the stream's
     * deliverer never waits for a reader that will not come (and keeps granting credit).
     */
    void discard() {
        discarding = true;
        chunks.clear();
        chunks.offer(END);
    }

    /** End of input because the stream failed; later reads throw once drained. */
    void fail(String reason) {
        failure = reason;
        chunks.offer(END);
    }

    @Override
    public int read() throws IOException {
        byte[] one = new byte[1];
        int n = read(one, 0, 1);
        return n < 0 ? -1 : one[0] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
        if (len == 0) {
            return 0;
        }
        if (position == current.length) {
            if (ended) {
                return endOfInput();
            }
            try {
                current = chunks.take();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new InterruptedIOException("interrupted");
            }
            position = 0;
            if (current == END) {
                ended = true;
                return endOfInput();
            }
        }
        int n = Math.min(len, current.length - position);
        System.arraycopy(current, position, b, off, n);
        position += n;
        return n;
    }

    private int endOfInput() throws IOException {
        if (failure != null) {
            throw new IOException(failure);
        }
        return -1;
    }

    @Override
    public int available() {
        return current.length - position;
    }
}
