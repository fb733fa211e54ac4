package openshell.protocol;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;

/**
 * Reads a connection's HTTP/2 frames on their way to Helidon, one frame header at a time, and
 * lets a subclass drop a frame or put bytes in front of it: where Helidon 4.1.7 mishandles a
 * frame, the fix is to change what its reader sees. Every other byte passes unchanged, and most
 * reads pass as they are; a copy is made only to edit or to hold back a header split across
 * reads until it is whole.
 *
 * <p>{@link #get()} runs on the connection's reader thread only.
 */
abstract class FrameTap implements Supplier<byte[]> {
    static final int HEADER_BYTES = 9;
    static final int DATA = 0x0;
    static final int HEADERS = 0x1;
    static final int RST_STREAM = 0x3;
    static final int SETTINGS = 0x4;
    static final int WINDOW_UPDATE = 0x8;
    static final int END_STREAM = 0x1;
    static final int SETTINGS_ACK = 0x1;
    private static final int NONE = Integer.MIN_VALUE;

    /**
     * What happens to one frame.
     *
     * @param drop   whether the frame is left out
     * @param before bytes put in front of it (empty for none)
     */
    record Verdict(boolean drop, byte[] before) {
        static final Verdict PASS = new Verdict(false, new byte[0]);
        static final Verdict DROP = new Verdict(true, new byte[0]);

        static Verdict before(byte[] bytes) {
            return new Verdict(false, bytes);
        }
    }

    private final Supplier<byte[]> source;
    private final byte[] header = new byte[HEADER_BYTES];
    private int headerFill;
    private long prefaceLeft;
    private long payloadLeft;
    private boolean dropping;
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

    @Override
    public final byte[] get() {
        while (true) {
            byte[] chunk = source.get();
            if (chunk == null) {
                return null;
            }
            byte[] out = scan(chunk);
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
                dropping = verdict.drop();
                if (dropping) {
                    dropFrom = start;
                }
            }
            if (dropFrom != NONE && payloadLeft == 0) {
                edits.add(new Edit(dropFrom + offset, at + offset, null));
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
