package openshell.protocol;

import java.util.function.Consumer;

import io.helidon.common.buffers.BufferData;
import io.helidon.http.http2.WindowSize;

/**
 * The receive windows of a client connection and its streams, kept by the calls instead of Helidon.
 *
 * <p>Why: Helidon 4.1.7's client writes a stream's WINDOW_UPDATE only while no newer stream is
 * open, and drops it otherwise (the bytes are never given back), so a long-lived stream beside
 * newer ones (the connect announcements, a relay next to later relays) lost its window for good
 * and its sender failed in Helidon's flow control on the runtime; it sizes every window at the
 * HTTP/2 default of 64 KiB; and it writes two WINDOW_UPDATEs (stream and connection) for every
 * DATA frame read, each a TLS record and a system call on the link. Its own updates are dropped
 * on the way out ({@link #isWindowUpdate}); each call gives back what it read
 * ({@link Stream#read}) once a {@link #RETURN_DIVISOR}th of the window has gathered, and a
 * credited stream starts with {@link ProtocolLimits#CREDITED_STREAM_WINDOW_BYTES}.
 */
final class StreamWindows {
    /** Bytes of a WINDOW_UPDATE frame: the 9-byte header and the 4-byte increment. */
    static final int FRAME_BYTES = 13;
    private static final int WINDOW_UPDATE = 0x8;

    /**
     * Read bytes go back to the peer once they reach this fraction of their window (a quarter):
     * the sender always has three quarters left, and a stream of small messages costs one
     * update per quarter window instead of one per frame.
     */
    static final int RETURN_DIVISOR = 4;

    private final Consumer<BufferData> frames;
    private final int connectionWindow;
    // guarded by this
    private int connectionUnreturned;

    /**
     * @param frames           writes one frame to the connection, past the filter of Helidon's updates
     * @param connectionWindow the connection's receive window, raised to this by {@link #open}
     */
    StreamWindows(Consumer<BufferData> frames, int connectionWindow) {
        if (connectionWindow < WindowSize.DEFAULT_WIN_SIZE) {
            throw new IllegalArgumentException("a connection window below the HTTP/2 default: " + connectionWindow);
        }
        this.frames = frames;
        this.connectionWindow = connectionWindow;
    }

    /** Raises the connection window from the HTTP/2 default; once, after the preface. */
    void open() {
        int increment = connectionWindow - WindowSize.DEFAULT_WIN_SIZE;
        if (increment > 0) {
            frames.accept(windowUpdate(0, increment));
        }
    }

    /**
     * Bytes of the connection read (a DATA frame of any stream, also one dropped unread): they go
     * back to the connection window in batches.
     *
     * @param bytes the frame's length
     */
    void connectionRead(int bytes) {
        if (bytes <= 0) {
            return;
        }
        int back = 0;
        synchronized (this) {
            connectionUnreturned += bytes;
            if (connectionUnreturned >= connectionWindow / RETURN_DIVISOR) {
                back = connectionUnreturned;
                connectionUnreturned = 0;
            }
        }
        if (back > 0) {
            frames.accept(windowUpdate(0, back));
        }
    }

    /** @return connection bytes read and not yet given back (they go back with the next batch) */
    synchronized int connectionUnreturned() {
        return connectionUnreturned;
    }

    /**
     * The window of one stream a call opened; used by that call's reader thread only.
     *
     * @param streamId the stream, positive
     * @param window   its receive window: the HTTP/2 default, or more (raised at once)
     * @return the stream's window
     */
    Stream stream(int streamId, int window) {
        if (streamId <= 0) {
            throw new IllegalArgumentException("not a stream: " + streamId);
        }
        if (window < WindowSize.DEFAULT_WIN_SIZE) {
            throw new IllegalArgumentException("a stream window below the HTTP/2 default: " + window);
        }
        if (window > WindowSize.DEFAULT_WIN_SIZE) {
            frames.accept(windowUpdate(streamId, window - WindowSize.DEFAULT_WIN_SIZE));
        }
        return new Stream(streamId, window);
    }

    /** One stream's receive window. */
    final class Stream {
        private final int streamId;
        private final int window;
        private int unreturned;

        private Stream(int streamId, int window) {
            this.streamId = streamId;
            this.window = window;
        }

        /**
         * A DATA frame of this stream was read.
         *
         * @param bytes      its length
         * @param endOfStream whether it ended the stream: then nothing goes back to the stream
         *                    (the runtime sends nothing more, and an update for a stream it already
         *                    pruned would make Helidon's server open it anew), only to the connection
         */
        void read(int bytes, boolean endOfStream) {
            connectionRead(bytes);
            if (endOfStream || bytes <= 0) {
                return;
            }
            unreturned += bytes;
            if (unreturned >= window / RETURN_DIVISOR) {
                frames.accept(windowUpdate(streamId, unreturned));
                unreturned = 0;
            }
        }

        /** @return bytes read and not yet given back */
        int unreturned() {
            return unreturned;
        }
    }

    /**
     * @param buffer one frame as Helidon writes it (header and payload in one buffer)
     * @return whether it is a WINDOW_UPDATE (of a stream or of the connection)
     */
    static boolean isWindowUpdate(BufferData buffer) {
        return buffer.available() == FRAME_BYTES && (buffer.get(3) & 0xff) == WINDOW_UPDATE;
    }

    /**
     * @param streamId  0 for the connection
     * @param increment 1 to 2^31-1
     * @return the WINDOW_UPDATE frame: length 4, type 0x8, no flags, the stream, the increment
     */
    static BufferData windowUpdate(int streamId, int increment) {
        if (increment <= 0) {
            throw new IllegalArgumentException("a window increment must be positive: " + increment);
        }
        return BufferData.create(new byte[] {0, 0, 4, WINDOW_UPDATE, 0,
            (byte) (streamId >>> 24 & 0x7f), (byte) (streamId >>> 16), (byte) (streamId >>> 8), (byte) streamId,
            (byte) (increment >>> 24 & 0x7f), (byte) (increment >>> 16), (byte) (increment >>> 8), (byte) increment});
    }
}
