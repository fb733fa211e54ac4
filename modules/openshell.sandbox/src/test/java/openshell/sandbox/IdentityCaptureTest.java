package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.concurrent.TimeUnit;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.IdentityResolution;
import org.junit.jupiter.api.Test;

/** Digests are cached by device, inode, size, mtime and ctime, and recomputed when the file changes. */
class IdentityCaptureTest {

    private static BinaryIdentity capture(IdentityCapture capture, Path binary) throws Exception {
        Process p = new ProcessBuilder(binary.toString(), "60").start();
        try {
            long deadline = System.nanoTime() + TestSandbox.WAIT.toNanos();
            while (!Files.readSymbolicLink(Path.of("/proc/" + p.pid() + "/exe")).equals(binary) && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            return assertInstanceOf(IdentityResolution.Resolved.class, capture.capture((int) p.pid(), (int) p.pid())).identity();
        } finally {
            p.destroyForcibly();
            assertTrue(p.waitFor(TestSandbox.WAIT.toSeconds(), TimeUnit.SECONDS));
        }
    }

    @Test
    void aDigestIsComputedOnceAndAgainWhenTheFileChanges() throws Exception {
        Path dir = Files.createTempDirectory("openshell-identity");
        try {
            digestsFollowTheFile(dir);
        } finally {
            TestSandbox.deleteTree(dir);
        }
    }

    private static void digestsFollowTheFile(Path dir) throws Exception {
        Path binary = dir.resolve("sleeper");
        Files.copy(Path.of("/usr/bin/sleep"), binary);
        binary.toFile().setExecutable(true);
        IdentityCapture capture = new IdentityCapture(ProcessHandle.current().pid());
        capture(capture, binary);
        capture(capture, binary);
        assertEquals(2, capture.digestsComputed(), "a file changed just now is not remembered");
        Thread.sleep(IdentityCapture.CTIME_SETTLE.toMillis());
        BinaryIdentity first = capture(capture, binary);
        assertEquals(binary.toString(), first.path());
        assertEquals(TestSandbox.sha256(binary.toString()), first.executable().sha256().orElseThrow());
        assertEquals(List.of(), first.ancestors(), "started by the runtime itself");
        assertEquals(List.of(binary.toString(), "60"), first.diagnosticCmdline());
        assertEquals(3, capture.digestsComputed());
        assertEquals(first.executable(), capture(capture, binary).executable());
        assertEquals(3, capture.digestsComputed(), "served from the cache");
        Files.write(binary, new byte[] {0}, StandardOpenOption.APPEND);
        BinaryIdentity changed = capture(capture, binary);
        assertEquals(4, capture.digestsComputed(), "a changed file is hashed again");
        assertNotEquals(first.executable().sha256(), changed.executable().sha256());
        assertEquals(TestSandbox.sha256(binary.toString()), changed.executable().sha256().orElseThrow());
    }

    /**
     * The attack of issue 33: a workload that owns a binary rewrites it in place at the same size
     * and sets its mtime back with {@code touch -d}; device, inode, size and mtime are as they were,
     * and the new content must still get its own digest.
     */
    @Test
    void aRewriteAtTheSameSizeWithTheMtimeSetBackIsHashedAgain(@org.junit.jupiter.api.io.TempDir Path dir) throws Exception {
        Path binary = dir.resolve("sleeper");
        Files.copy(Path.of("/usr/bin/sleep"), binary);
        binary.toFile().setExecutable(true);
        Thread.sleep(IdentityCapture.CTIME_SETTLE.toMillis());
        IdentityCapture capture = new IdentityCapture(ProcessHandle.current().pid());
        BinaryIdentity before = capture(capture, binary);
        assertEquals(1, capture.digestsComputed());
        var mtime = Files.getLastModifiedTime(binary);
        long size = Files.size(binary);
        Object inode = Files.getAttribute(binary, "unix:ino");
        byte[] bytes = Files.readAllBytes(binary);
        int at = indexOf(bytes, "Usage: ".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
        bytes[at] = 'u';
        // In place: the same inode, truncated and written again, the size unchanged.
        Files.write(binary, bytes, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING);
        Files.setLastModifiedTime(binary, mtime);
        assertEquals(inode, Files.getAttribute(binary, "unix:ino"));
        assertEquals(size, Files.size(binary));
        assertEquals(mtime, Files.getLastModifiedTime(binary));
        BinaryIdentity after = capture(capture, binary);
        assertEquals(TestSandbox.sha256(binary.toString()), after.executable().sha256().orElseThrow());
        assertNotEquals(before.executable().sha256(), after.executable().sha256(), "the old digest was served");
    }

    private static int indexOf(byte[] haystack, byte[] needle) {
        outer:
        for (int i = 0; i + needle.length <= haystack.length; i++) {
            for (int j = 0; j < needle.length; j++) {
                if (haystack[i + j] != needle[j]) {
                    continue outer;
                }
            }
            return i;
        }
        throw new AssertionError("no such bytes in the binary");
    }

    /** The pids come from the bytes of /proc's files, also when a command name holds ") (" and spaces. */
    @Test
    void parentAndProcessAreParsedFromProcBytes() throws Exception {
        java.nio.charset.Charset ascii = java.nio.charset.StandardCharsets.US_ASCII;
        assertEquals(77, IdentityCapture.parentFromStat("123 (a) (b c) S 77 123 123 0 -1 4194560 0\n".getBytes(ascii)));
        assertEquals(1, IdentityCapture.parentFromStat("9 (sh) R 1 9 9".getBytes(ascii)));
        for (String bad : List.of("123 (no close S 77", "123 (x) S", "123 (x) S x7 1", "123 (x) S 99999999999 1", "")) {
            org.junit.jupiter.api.Assertions.assertThrows(java.io.IOException.class,
                    () -> IdentityCapture.parentFromStat(bad.getBytes(ascii)), bad);
        }
        assertEquals(4242, IdentityCapture.tgidFromStatus(
                "Name:\tTgid:\\n1\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nNgid:\t0\nPid:\t4243\n".getBytes(ascii)));
        org.junit.jupiter.api.Assertions.assertThrows(java.io.IOException.class,
                () -> IdentityCapture.tgidFromStatus("Name:\tx\nPid:\t1\n".getBytes(ascii)));
        // And from the real files: a thread of this JVM belongs to it; a child's parent is this JVM.
        long self = ProcessHandle.current().pid();
        assertEquals(self, IdentityCapture.processOf((int) self));
        Process child = new ProcessBuilder("/usr/bin/sleep", "30").start();
        try {
            assertEquals(self, IdentityCapture.parentOf((int) child.pid()));
        } finally {
            child.destroyForcibly();
        }
        int read = 0;
        try (var tasks = Files.list(Path.of("/proc/self/task"))) {
            for (Path task : tasks.toList()) {
                try {
                    assertEquals(self, IdentityCapture.processOf(Integer.parseInt(task.getFileName().toString())));
                    read++;
                } catch (java.nio.file.NoSuchFileException ended) {
                    // A thread of this JVM that ended between the listing and the read.
                    assertFalse(Files.exists(task), "only a thread that is gone may have no status: " + task);
                }
            }
        }
        assertTrue(read > 0, "the main thread at least was read");
    }

    @Test
    void aVanishedCallerIsUnresolvedWithAReason() {
        IdentityResolution r = new IdentityCapture(ProcessHandle.current().pid()).capture(Integer.MAX_VALUE - 1, Integer.MAX_VALUE - 1);
        assertTrue(assertInstanceOf(IdentityResolution.Unresolved.class, r).reason().contains("could not be read"));
    }

    /**
     * Digests come from what the permission bits let the runtime read, not from its privilege: an
     * execute-only file of another owner has none; the owner's, group's or others' read bit gives one.
     */
    @Test
    void onlyWhatThePermissionBitsLetTheRuntimeReadIsHashed(@org.junit.jupiter.api.io.TempDir Path dir) throws Exception {
        // The test JVM is dumpable, so its /proc entry belongs to its effective uid.
        int self = (Integer) Files.getAttribute(Path.of("/proc/" + ProcessHandle.current().pid()), "unix:uid");
        Path file = Files.writeString(dir.resolve("tool"), "#!/bin/sh\n");
        Files.setPosixFilePermissions(file, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Files.setAttribute(file, "unix:uid", self + 4242);
        Files.setAttribute(file, "unix:gid", self + 4242);
        assertEquals(false, IdentityCapture.plainlyReadable(file), "another owner's 0711 file");
        Files.setPosixFilePermissions(file, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--xr-x"));
        assertEquals(true, IdentityCapture.plainlyReadable(file), "others may read");
        Files.setAttribute(file, "unix:uid", self);
        Files.setPosixFilePermissions(file, java.nio.file.attribute.PosixFilePermissions.fromString("-wx--x--x"));
        assertEquals(false, IdentityCapture.plainlyReadable(file), "its own file without the owner's read bit");
        Files.setPosixFilePermissions(file, java.nio.file.attribute.PosixFilePermissions.fromString("r-x------"));
        assertEquals(true, IdentityCapture.plainlyReadable(file), "its own readable file");
    }
}
