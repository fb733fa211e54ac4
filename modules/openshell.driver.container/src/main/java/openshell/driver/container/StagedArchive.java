package openshell.driver.container;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;

/**
 * A small ustar archive of directories and files with numeric owners and modes, as an engine
 * extracts it into a volume through a staging container that has no {@code User} (Docker 20.10
 * refuses an owner-preserving upload into a container whose {@code User} is set). Also reads the
 * files out of the archive an engine returns for a path (the image's account files).
 */
public final class StagedArchive {
    /** Most entries in one archive. */
    public static final int MAX_ENTRIES = 64;
    /** Most file content in one archive, and most read out of one. */
    public static final int MAX_BYTES = 1024 * 1024;
    private static final int BLOCK = 512;

    /** One entry: a directory (no content) or a regular file. */
    private record Entry(String path, int uid, int gid, int mode, byte[] content, boolean directory) {
    }

    private final List<Entry> entries = new ArrayList<>();
    private long bytes;

    /** @return an empty archive */
    public static StagedArchive create() {
        return new StagedArchive();
    }

    private StagedArchive() {
    }

    /**
     * @param path relative path, no {@code ..}
     * @param uid  numeric owner
     * @param gid  numeric group
     * @param mode permission bits, e.g. {@code 0711}
     * @return this
     */
    public StagedArchive directory(String path, int uid, int gid, int mode) {
        return add(new Entry(checked(path), uid, gid, mode, new byte[0], true));
    }

    /**
     * @param path    relative path, no {@code ..}
     * @param uid     numeric owner
     * @param gid     numeric group
     * @param mode    permission bits, e.g. {@code 0600}
     * @param content the bytes (copied)
     * @return this
     */
    public StagedArchive file(String path, int uid, int gid, int mode, byte[] content) {
        return add(new Entry(checked(path), uid, gid, mode, content.clone(), false));
    }

    private StagedArchive add(Entry e) {
        if (entries.size() >= MAX_ENTRIES) {
            throw new DriverException(Kind.INVALID, "a staged archive holds at most " + MAX_ENTRIES + " entries");
        }
        if (e.uid() < 0 || e.gid() < 0 || (e.mode() & ~07777) != 0) {
            throw new DriverException(Kind.INVALID, "bad owner or mode for " + e.path());
        }
        if (bytes + e.content().length > MAX_BYTES) {
            throw new DriverException(Kind.INVALID, "a staged archive holds at most " + MAX_BYTES + " bytes");
        }
        bytes += e.content().length;
        entries.add(e);
        return this;
    }

    private static String checked(String path) {
        Objects.requireNonNull(path, "path");
        if (path.isEmpty() || path.startsWith("/") || List.of(path.split("/")).contains("..") || path.length() > 99
                || !StandardCharsets.US_ASCII.newEncoder().canEncode(path)) {
            throw new DriverException(Kind.INVALID, "a staged path must be relative, ASCII, under 100 characters and"
                    + " without '..': " + path);
        }
        return path;
    }

    /** @return the archive's bytes */
    public byte[] toBytes() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (Entry e : entries) {
            byte[] h = new byte[BLOCK];
            put(h, 0, 100, e.directory() && !e.path().endsWith("/") ? e.path() + "/" : e.path());
            octal(h, 100, 8, e.mode());
            octal(h, 108, 8, e.uid());
            octal(h, 116, 8, e.gid());
            octal(h, 124, 12, e.content().length);
            octal(h, 136, 12, 0);
            for (int i = 148; i < 156; i++) {
                h[i] = ' ';
            }
            h[156] = (byte) (e.directory() ? '5' : '0');
            put(h, 257, 6, "ustar");
            put(h, 263, 2, "00");
            int sum = 0;
            for (byte b : h) {
                sum += b & 0xff;
            }
            octal(h, 148, 7, sum);
            out.writeBytes(h);
            out.writeBytes(e.content());
            int pad = (BLOCK - e.content().length % BLOCK) % BLOCK;
            out.writeBytes(new byte[pad]);
        }
        out.writeBytes(new byte[2 * BLOCK]);
        return out.toByteArray();
    }

    private static void put(byte[] h, int at, int len, String s) {
        byte[] b = s.getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(b, 0, h, at, Math.min(len, b.length));
    }

    private static void octal(byte[] h, int at, int len, long value) {
        String s = Long.toOctalString(value);
        String padded = "0".repeat(Math.max(0, len - 1 - s.length())) + s;
        put(h, at, len - 1, padded);
        h[at + len - 1] = 0;
    }

    /**
     * Reads the regular files of a tar stream (as an engine returns a path), at most
     * {@link #MAX_BYTES} of content in all.
     *
     * @param in the stream (not closed)
     * @return each file's name (as in the archive) and content
     * @throws DriverException INVALID if it is malformed or too large
     */
    public static Map<String, byte[]> readFiles(InputStream in) {
        Map<String, byte[]> files = new LinkedHashMap<>();
        long total = 0;
        try {
            while (true) {
                byte[] h = in.readNBytes(BLOCK);
                if (h.length < BLOCK || allZero(h)) {
                    return files;
                }
                String name = cstring(h, 0, 100);
                String prefix = cstring(h, 345, 155);
                if (!prefix.isEmpty()) {
                    name = prefix + "/" + name;
                }
                long size = parseOctal(h, 124, 12);
                char type = (char) h[156];
                if (size < 0 || total + size > MAX_BYTES) {
                    throw new DriverException(Kind.INVALID, "an archive from the engine holds more than " + MAX_BYTES
                            + " bytes");
                }
                byte[] content = in.readNBytes((int) size);
                if (content.length != size) {
                    throw new DriverException(Kind.INVALID, "an archive from the engine ends inside " + name);
                }
                in.skipNBytes((BLOCK - size % BLOCK) % BLOCK);
                if (type == '0' || type == 0) {
                    files.put(name, content);
                    total += size;
                }
            }
        } catch (IOException e) {
            throw new DriverException(Kind.INVALID, "cannot read an archive from the engine: " + e.getMessage(), e);
        }
    }

    private static boolean allZero(byte[] b) {
        for (byte x : b) {
            if (x != 0) {
                return false;
            }
        }
        return true;
    }

    private static String cstring(byte[] h, int at, int len) {
        int end = at;
        while (end < at + len && h[end] != 0) {
            end++;
        }
        return new String(h, at, end - at, StandardCharsets.US_ASCII);
    }

    private static long parseOctal(byte[] h, int at, int len) {
        String s = cstring(h, at, len).trim();
        if (s.isEmpty()) {
            return 0;
        }
        try {
            return Long.parseLong(s, 8);
        } catch (NumberFormatException e) {
            throw new DriverException(Kind.INVALID, "an archive from the engine has a bad size field: " + s);
        }
    }
}
