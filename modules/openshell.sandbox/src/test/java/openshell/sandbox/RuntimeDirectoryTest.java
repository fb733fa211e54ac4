package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class RuntimeDirectoryTest {
    private static final int SELF = IdentityCapture.selfUid();

    @TempDir
    Path tmp;

    private Path directory(String name, String mode) throws IOException {
        Path dir = Files.createDirectory(tmp.resolve(name));
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString(mode));
        return dir;
    }

    @Test
    void aPrivateChannelDirectoryHoldsTheRuntimeDirectoryAndLosesWhatAnEarlierRuntimeLeft() throws IOException {
        Path run = directory("run", "rwx------");
        Path socket = Files.writeString(run.resolve("supervisor.sock"), "not ours to remove");
        Path stale = Files.createDirectory(run.resolve(RuntimeDirectory.PREFIX + "killed"));
        Files.writeString(stale.resolve("resolv.conf"), "nameserver 127.0.0.53\n");
        Files.writeString(stale.resolve("trust-0.pem"), "-----BEGIN CERTIFICATE-----\n");

        Path made = RuntimeDirectory.create(Optional.of(socket), SELF);
        try {
            assertEquals(run, made.getParent());
            assertTrue(made.getFileName().toString().startsWith(RuntimeDirectory.PREFIX), made.toString());
            assertFalse(Files.exists(stale), "the killed runtime's directory is gone");
            assertTrue(Files.exists(socket), "nothing but runtime directories is touched");
            try (var left = Files.list(run)) {
                assertEquals(List.of(made, socket).stream().sorted().toList(), left.sorted().toList());
            }
        } finally {
            RuntimeDirectory.remove(made);
        }
    }

    @Test
    void anEarlierRuntimeDirectoryThatCannotBeRemovedDoesNotStopTheLaunch() throws IOException {
        Path run = directory("run", "rwx------");
        Path stale = Files.createDirectories(run.resolve(RuntimeDirectory.PREFIX + "odd").resolve("nested"));
        Files.writeString(stale.resolve("file"), "x");

        Path made = RuntimeDirectory.create(Optional.of(run.resolve("supervisor.sock")), SELF);
        try {
            assertEquals(run, made.getParent());
            assertTrue(Files.exists(stale), "left for the driver's delete");
        } finally {
            RuntimeDirectory.remove(made);
        }
    }

    @Test
    void aChannelDirectoryOthersMayEnterIsNotUsed() throws IOException {
        for (String mode : List.of("rwx--x--x", "rwxr-x---", "rwx----w-")) {
            Path run = directory("shared-" + mode.replace('-', '_'), mode);
            Path made = RuntimeDirectory.create(Optional.of(run.resolve("supervisor.sock")), SELF);
            try {
                assertEquals(Path.of(System.getProperty("java.io.tmpdir")), made.getParent(), mode);
                assertTrue(made.getFileName().toString().startsWith(RuntimeDirectory.TEMPORARY_PREFIX), made.toString());
            } finally {
                RuntimeDirectory.remove(made);
            }
        }
    }

    @Test
    void aChannelDirectoryOfAnotherOwnerOrBehindALinkIsNotUsed() throws IOException {
        Path run = directory("run", "rwx------");
        assertFalse(RuntimeDirectory.privateTo(run, SELF + 1), "another uid's directory");
        Path link = Files.createSymbolicLink(tmp.resolve("link"), run);
        assertFalse(RuntimeDirectory.privateTo(link, SELF), "a link to a private directory");
        assertFalse(RuntimeDirectory.privateTo(tmp.resolve("missing"), SELF));
        assertTrue(RuntimeDirectory.privateTo(run, SELF));

        Path made = RuntimeDirectory.create(Optional.of(link.resolve("supervisor.sock")), SELF);
        try {
            assertEquals(Path.of(System.getProperty("java.io.tmpdir")), made.getParent());
        } finally {
            RuntimeDirectory.remove(made);
        }
        Path noChannel = RuntimeDirectory.create(Optional.empty(), SELF);
        try {
            assertEquals(Path.of(System.getProperty("java.io.tmpdir")), noChannel.getParent());
        } finally {
            RuntimeDirectory.remove(noChannel);
        }
    }

    @Test
    void removingRemovesLinksNotWhatTheyPointAt() throws IOException {
        Path outside = Files.writeString(tmp.resolve("outside"), "keep");
        Path dir = directory(RuntimeDirectory.PREFIX + "x", "rwx------");
        Files.writeString(dir.resolve("resolv.conf"), "nameserver 127.0.0.53\n");
        Files.createSymbolicLink(dir.resolve("trust-0.pem"), outside);

        RuntimeDirectory.remove(dir);

        assertFalse(Files.exists(dir));
        assertEquals("keep", Files.readString(outside));
        RuntimeDirectory.remove(dir); // already gone: nothing to do
    }

    @Test
    void theChannelIsReadFromTheArgumentsASpareHasBeforeItsLateOnes() {
        assertEquals(Optional.of(Path.of("/run/sb/supervisor.sock")), SandboxMain.channelOf(
                List.of("--channel", "/run/sb/supervisor.sock", "--bundle-stdin", "--late-arguments")));
        assertEquals(Optional.empty(), SandboxMain.channelOf(List.of("--bundle-stdin", "--channel")));
        assertEquals(Optional.empty(), SandboxMain.channelOf(List.of("--channel", "a\0b")));
        assertEquals(Optional.empty(), SandboxMain.channelOf(List.of()));
    }
}
