package openshell.sandbox;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.security.MessageDigest;
import java.time.Duration;
import java.time.Instant;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.Executable;
import openshell.isolation.IdentityResolution;

/**
 * Captures who made a call while the caller is blocked in it: the executable of the calling
 * thread (through {@code /proc/<tid>/exe}, which names and opens the file the kernel mapped, even
 * if it was since renamed or replaced), its SHA-256, the process's ancestors nearest-first up to
 * (not including) the runtime, and the command line for diagnostics only. The caller of this
 * class re-validates the notification afterwards: only then is what was read known to belong to
 * the blocked caller and not to a recycled PID.
 */
final class IdentityCapture {
    /** Digests remembered, keyed by device, inode, size, mtime and ctime; the oldest is forgotten first. */
    static final int MAX_CACHED_DIGESTS = 1024;
    /**
     * How old a file's ctime must be before its digest is remembered. Anyone who may write a file
     * can set its mtime back ({@code touch -d}), but not its ctime, which every write, chmod and
     * utimes moves to the clock's now; a filesystem whose timestamps are coarse (one tick, or whole
     * seconds on ext4 with small inodes) could give a rewrite within the same tick the same ctime,
     * so a file changed less than this long ago is hashed on every capture instead.
     */
    static final Duration CTIME_SETTLE = Duration.ofSeconds(2);
    /** This process's effective uid and gid, for {@link #plainlyReadable}. */
    private static final int SELF_UID = selfId("Uid:");
    private static final int SELF_GID = selfId("Gid:");
    /** Largest executable hashed; a larger one gets no digest (and policy may require one). */
    static final long MAX_HASHED_BYTES = 1L << 30;
    /** What the kernel appends to {@code /proc/<pid>/exe} once the executable was unlinked. */
    static final String DELETED = " (deleted)";

    /**
     * What the digest is remembered by. Linux keeps a change counter (i_version) too, but gives it
     * to nfsd only: statx masks STATX_CHANGE_COOKIE out for user space, so ctime is the most that
     * can be read here.
     */
    private record FileKey(long device, long inode, long size, FileTime modified, FileTime changed) {
    }

    private final long runtimePid;
    /** Digests computed (not served from the cache). */
    private long computed;
    private final Map<FileKey, String> digests = new LinkedHashMap<>(64, 0.75f, true) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<FileKey, String> eldest) {
            return size() > MAX_CACHED_DIGESTS;
        }
    };

    /** @param runtimePid the runtime's own pid: the ancestor walk stops below it */
    IdentityCapture(long runtimePid) {
        this.runtimePid = runtimePid;
    }

    /**
     * @param tid  the calling thread
     * @param tgid its process
     * @return the identity, or why there is none
     */
    IdentityResolution capture(int tid, int tgid) {
        try {
            Executable executable = executable(Path.of("/proc", Integer.toString(tid), "exe"));
            List<Executable> ancestors = new ArrayList<>();
            int pid = parentOf(tgid);
            while (pid > 1 && pid != runtimePid && ancestors.size() < BinaryIdentity.MAX_ANCESTORS) {
                ancestors.add(executable(Path.of("/proc", Integer.toString(pid), "exe")));
                pid = parentOf(pid);
            }
            return new IdentityResolution.Resolved(new BinaryIdentity(executable, ancestors, cmdline(tgid)));
        } catch (IOException | RuntimeException e) {
            return new IdentityResolution.Unresolved("identity of thread " + tid + " could not be read: " + e);
        }
    }

    /** @return this process's effective uid (as {@code /proc/self/status} gives it) */
    static int selfUid() {
        return SELF_UID;
    }

    synchronized long digestsComputed() {
        return computed;
    }

    private Executable executable(Path exeLink) throws IOException {
        String path = Files.readSymbolicLink(exeLink).toString();
        if (path.endsWith(DELETED)) {
            // The path names no file any more (or another one): nothing policy could match on is left.
            throw new IOException("the executable " + path + " was deleted while it ran");
        }
        Optional<String> digest;
        try {
            // One stat for both the permission check and the digest cache's key.
            Map<String, Object> a = Files.readAttributes(exeLink, "unix:uid,gid,mode,dev,ino,size,lastModifiedTime,ctime");
            digest = plainlyReadable(a) ? digest(exeLink, key(a)) : Optional.empty();
        } catch (java.nio.file.AccessDeniedException e) {
            // Executable but not readable by the runtime (an unmapped owner's file): a path, no digest.
            digest = Optional.empty();
        }
        return digest.isPresent() ? Executable.of(path, digest.get()) : Executable.of(path);
    }

    /**
     * Whether the runtime could read the file by its permission bits alone, as if it had no
     * CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH (it is root of the sandbox's user namespace and has
     * them there). A binary its owner made execute-only (say 0711) gets no digest, whoever owns it,
     * instead of a digest only privilege could read: a policy that pins a digest then denies it.
     */
    static boolean plainlyReadable(Path file) throws IOException {
        return plainlyReadable(Files.readAttributes(file, "unix:uid,gid,mode"));
    }

    private static boolean plainlyReadable(Map<String, Object> a) {
        int mode = (Integer) a.get("mode");
        if ((Integer) a.get("uid") == SELF_UID) {
            return (mode & 0400) != 0;
        }
        if ((Integer) a.get("gid") == SELF_GID) {
            return (mode & 0040) != 0;
        }
        return (mode & 0004) != 0;
    }

    private Optional<String> digest(Path exeLink, FileKey before) throws IOException {
        synchronized (this) {
            String cached = digests.get(before);
            if (cached != null) {
                return Optional.of(cached);
            }
        }
        if (before.size() > MAX_HASHED_BYTES) {
            return Optional.empty();
        }
        MessageDigest sha;
        try {
            sha = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        byte[] buffer = new byte[64 * 1024];
        try (InputStream in = Files.newInputStream(exeLink)) {
            for (int n; (n = in.read(buffer)) > 0; ) {
                sha.update(buffer, 0, n);
            }
        }
        String hex = HexFormat.of().formatHex(sha.digest());
        // Cache only if the file did not change while it was read, and its last change is settled.
        boolean keep = key(exeLink).equals(before) && settled(before.changed());
        synchronized (this) {
            computed++;
            if (keep) {
                digests.put(before, hex);
            }
        }
        return Optional.of(hex);
    }

    private static FileKey key(Path exeLink) throws IOException {
        return key(Files.readAttributes(exeLink, "unix:dev,ino,size,lastModifiedTime,ctime"));
    }

    private static FileKey key(Map<String, Object> a) {
        return new FileKey(((Number) a.get("dev")).longValue(), ((Number) a.get("ino")).longValue(),
                ((Number) a.get("size")).longValue(), (FileTime) a.get("lastModifiedTime"), (FileTime) a.get("ctime"));
    }

    /** Whether a file changed at {@code changed} could not be changed again with the same ctime. */
    private static boolean settled(FileTime changed) {
        return changed.toInstant().plus(CTIME_SETTLE).isBefore(Instant.now());
    }

    static int parentOf(int pid) throws IOException {
        return parentFromStat(Files.readAllBytes(Path.of("/proc", Integer.toString(pid), "stat")));
    }

    /**
     * The parent pid in a {@code /proc/<pid>/stat} line: the field after the state, which follows
     * the command name's last ')' (the name itself may hold spaces and parentheses). Parsed from
     * the bytes, without decoding or splitting the line: this runs for every ancestor of every
     * mediated connect.
     */
    static int parentFromStat(byte[] stat) throws IOException {
        int close = -1;
        for (int i = stat.length - 1; i >= 0; i--) {
            if (stat[i] == ')') {
                close = i;
                break;
            }
        }
        // ") S 1234 ": the state is one character between single spaces.
        int at = close + 4;
        if (close < 0 || at >= stat.length || stat[close + 1] != ' ' || stat[close + 3] != ' ') {
            throw new IOException("malformed /proc stat line");
        }
        return number(stat, at, "stat");
    }

    static int processOf(int tid) throws IOException {
        return tgidFromStatus(Files.readAllBytes(Path.of("/proc", Integer.toString(tid), "status")));
    }

    private static final byte[] TGID = "\nTgid:".getBytes(StandardCharsets.US_ASCII);

    /**
     * The {@code Tgid:} field of a {@code /proc/<tid>/status} file, from the bytes (the name on
     * the first line is escaped by the kernel, so no other line starts with "Tgid:").
     */
    static int tgidFromStatus(byte[] status) throws IOException {
        outer:
        for (int i = 0; i + TGID.length <= status.length; i++) {
            for (int j = 0; j < TGID.length; j++) {
                if (status[i + j] != TGID[j]) {
                    continue outer;
                }
            }
            int at = i + TGID.length;
            while (at < status.length && (status[at] == '\t' || status[at] == ' ')) {
                at++;
            }
            return number(status, at, "status");
        }
        throw new IOException("no Tgid in /proc status");
    }

    /** A decimal pid at {@code at}, ended by a space, a newline or the end. */
    private static int number(byte[] b, int at, String file) throws IOException {
        long n = 0;
        int i = at;
        for (; i < b.length && b[i] >= '0' && b[i] <= '9'; i++) {
            n = n * 10 + (b[i] - '0');
            if (n > Integer.MAX_VALUE) {
                throw new IOException("a pid out of range in /proc " + file);
            }
        }
        if (i == at || (i < b.length && b[i] != ' ' && b[i] != '\n')) {
            throw new IOException("malformed pid in /proc " + file);
        }
        return (int) n;
    }

    private static List<String> cmdline(int pid) {
        try {
            byte[] raw = Files.readAllBytes(Path.of("/proc", Integer.toString(pid), "cmdline"));
            List<String> parts = new ArrayList<>();
            int start = 0;
            for (int i = 0; i < raw.length && parts.size() < BinaryIdentity.MAX_CMDLINE; i++) {
                if (raw[i] == 0) {
                    parts.add(new String(raw, start, i - start, StandardCharsets.UTF_8));
                    start = i + 1;
                }
            }
            return parts;
        } catch (IOException e) {
            return List.of();
        }
    }

    /**
     * The effective id from /proc/self/status ("Uid:" or "Gid:": real, effective, saved, fs), not
     * the owner of /proc/self, which a non-dumpable process (the runtime is one) shows as root.
     */
    private static int selfId(String field) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"), StandardCharsets.US_ASCII)) {
                if (line.startsWith(field)) {
                    return Integer.parseInt(line.substring(field.length()).trim().split("\\s+")[1]);
                }
            }
        } catch (IOException e) {
            throw new java.io.UncheckedIOException("cannot read /proc/self/status", e);
        }
        throw new IllegalStateException("/proc/self/status has no " + field + " line");
    }
}
