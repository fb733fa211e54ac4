package openshell.protocol;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * Reads a connection's HTTP/2 frames on their way to Helidon, one frame header at a time, and
 * lets a subclass drop a frame, put bytes in front of it, or take its whole payload and put
 * other bytes in its place: where Helidon 4.1.7 mishandles a frame, the fix is to change what
 * its reader sees. Every other byte passes unchanged, and most reads pass as they are; a copy is
 * made only to edit or to hold back a header split across reads until it is whole.
 *
 * <p>A subclass that finds the peer's bytes unusable throws {@link Refused}: from then on the
 * tap reads nothing more and Helidon's reader sees the end of the connection, so nothing after
 * the bad frame is acted on (fail closed).
 *
 * <p>{@link #get()} runs on the connection's reader thread only.
 */
abstract class FrameTap implements Supplier<byte[]> {
    static final int HEADER_BYTES = 9;
    static final int DATA = 0x0;
    static final int HEADERS = 0x1;
    static final int RST_STREAM = 0x3;
    static final int SETTINGS = 0x4;
    static final int PUSH_PROMISE = 0x5;
    static final int WINDOW_UPDATE = 0x8;
    static final int CONTINUATION = 0x9;
    static final int END_STREAM = 0x1;
    static final int END_HEADERS = 0x4;
    static final int PADDED = 0x8;
    static final int PRIORITY = 0x20;
    static final int SETTINGS_ACK = 0x1;
    private static final System.Logger LOGGER = System.getLogger(FrameTap.class.getName());
    private static final int NONE = Integer.MIN_VALUE;

    /**
     * What happens to one frame.
     *
     * @param drop    whether the frame is left out
     * @param before  bytes put in front of it (empty for none)
     * @param rewrite whether the frame is left out and its payload, once read whole, given to
     *                {@link #rewrite}, whose bytes take its place
     */
    record Verdict(boolean drop, byte[] before, boolean rewrite) {
        static final Verdict PASS = new Verdict(false, new byte[0], false);
        static final Verdict DROP = new Verdict(true, new byte[0], false);
        static final Verdict REWRITE = new Verdict(true, new byte[0], true);

        Verdict(boolean drop, byte[] before) {
            this(drop, before, false);
        }

        static Verdict before(byte[] bytes) {
            return new Verdict(false, bytes);
        }
    }

    /** @return a frame header: 24-bit length, type, flags, stream id */
    static byte[] header(int length, int type, int flags, int streamId) {
        return new byte[] {(byte) (length >>> 16), (byte) (length >>> 8), (byte) length, (byte) type, (byte) flags,
                (byte) (streamId >>> 24), (byte) (streamId >>> 16), (byte) (streamId >>> 8), (byte) streamId};
    }

    /** The peer's bytes cannot be passed on: the connection ends here. */
    static final class Refused extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Refused(String message) {
            super(message);
        }
    }

    private final Supplier<byte[]> source;
    private final byte[] header = new byte[HEADER_BYTES];
    private int headerFill;
    private long prefaceLeft;
    private long payloadLeft;
    private boolean dropping;
    // The payload of the frame being rewritten, as it arrives; null when none is.
    private ByteArrayOutputStream rewriting;
    private int rewriteType;
    private int rewriteFlags;
    private int rewriteStream;
    private volatile String refusal;
    // This read's edits, by position in the held-back bytes plus the chunk: {from, to} and what goes in.
    private final List<Edit> edits = new ArrayList<>();

    private record Edit(int from, int to, byte[] insert) {
    }

    /**
     * @param source       the connection's plaintext bytes
     * @param prefaceBytes bytes at the start that are not frames (the client preface on a server's side)
     */
    FrameTap(Supplier<byte[]> source, int prefaceBytes) {
        this.source = source;
        this.prefaceLeft = prefaceBytes;
    }

    /**
     * A whole frame header was read.
     *
     * @param type     frame type
     * @param flags    frame flags
     * @param streamId stream
     * @param length   payload length
     * @return what happens to the frame
     */
    abstract Verdict frame(int type, int flags, int streamId, int length);

    /**
     * The whole payload of a frame {@link #frame} answered {@link Verdict#REWRITE} for.
     *
     * @return the bytes that go in the frame's place: whole frames, or none
     * @throws Refused when the connection cannot go on
     */
    byte[] rewrite(int type, int flags, int streamId, byte[] payload) {
        throw new Refused("frame of type " + type + " taken for rewriting but nothing rewrites it");
    }

    /** @return why this tap ended the connection, if it did */
    Optional<String> refusal() {
        return Optional.ofNullable(refusal);
    }

    @Override
    public final byte[] get() {
        while (true) {
            if (refusal != null) {
                return null;
            }
            byte[] chunk = source.get();
            if (chunk == null) {
                return null;
            }
            byte[] out;
            try {
                out = scan(chunk);
            } catch (Refused e) {
                refusal = e.getMessage();
                LOGGER.log(System.Logger.Level.WARNING, "HTTP/2 connection ended: " + e.getMessage());
                return null;
            }
            if (out.length > 0) {
                return out;
            }
            // All of it dropped, or only part of a frame header so far: read on (an empty read would look like the end).
        }
    }

    private byte[] scan(byte[] chunk) {
        byte[] held = headerFill == 0 ? null : Arrays.copyOf(header, headerFill);
        int offset = held == null ? 0 : held.length;
        edits.clear();
        // Where the frame being dropped began, relative to this chunk (below 0 for a header begun in
        // the last one), or NONE. A frame dropped across reads: its payload from the start of this one.
        int dropFrom = dropping && payloadLeft > 0 ? 0 : NONE;
        int at = 0;
        while (at < chunk.length) {
            if (prefaceLeft > 0) {
                int n = (int) Math.min(prefaceLeft, chunk.length - at);
                prefaceLeft -= n;
                at += n;
                continue;
            }
            if (payloadLeft > 0) {
                int n = (int) Math.min(payloadLeft, chunk.length - at);
                if (rewriting != null) {
                    rewriting.write(chunk, at, n);
                }
                payloadLeft -= n;
                at += n;
            } else {
                int start = at - headerFill;
                int n = Math.min(HEADER_BYTES - headerFill, chunk.length - at);
                System.arraycopy(chunk, at, header, headerFill, n);
                headerFill += n;
                at += n;
                if (headerFill < HEADER_BYTES) {
                    break;
                }
                headerFill = 0;
                int length = ((header[0] & 0xff) << 16) | ((header[1] & 0xff) << 8) | (header[2] & 0xff);
                int streamId = ((header[5] & 0x7f) << 24) | ((header[6] & 0xff) << 16) | ((header[7] & 0xff) << 8)
                        | (header[8] & 0xff);
                payloadLeft = length;
                Verdict verdict = frame(header[3] & 0xff, header[4] & 0xff, streamId, length);
                if (verdict.before().length > 0) {
                    edits.add(new Edit(start + offset, start + offset, verdict.before()));
                }
                dropping = verdict.drop() || verdict.rewrite();
                if (dropping) {
                    dropFrom = start;
                }
                if (verdict.rewrite()) {
                    rewriting = new ByteArrayOutputStream(length);
                    rewriteType = header[3] & 0xff;
                    rewriteFlags = header[4] & 0xff;
                    rewriteStream = streamId;
                }
            }
            if (dropFrom != NONE && payloadLeft == 0) {
                byte[] replacement = null;
                if (rewriting != null) {
                    byte[] payload = rewriting.toByteArray();
                    rewriting = null;
                    replacement = rewrite(rewriteType, rewriteFlags, rewriteStream, payload);
                }
                edits.add(new Edit(dropFrom + offset, at + offset, replacement));
                dropFrom = NONE;
            }
        }
        if (dropFrom != NONE) {
            edits.add(new Edit(dropFrom + offset, chunk.length + offset, null));
        }
        if (held == null && edits.isEmpty() && headerFill == 0) {
            return chunk;
        }
        byte[] data = chunk;
        if (held != null) {
            data = Arrays.copyOf(held, held.length + chunk.length);
            System.arraycopy(chunk, 0, data, held.length, chunk.length);
        }
        // A header begun at the end of this read waits for the rest.
        int keep = data.length - headerFill;
        ByteArrayOutputStream out = new ByteArrayOutputStream(keep + 16);
        int from = 0;
        for (Edit edit : edits) {
            out.write(data, from, edit.from() - from);
            if (edit.insert() != null) {
                out.writeBytes(edit.insert());
            }
            from = edit.to();
        }
        out.write(data, from, keep - from);
        return out.toByteArray();
    }
}
