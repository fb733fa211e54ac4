package openshell.driver.container;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import openshell.driver.DriverException;

class StagedArchiveTest {
    @Test
    void gnuTarSeesTheNumericOwnersAndModes(@TempDir Path dir) throws IOException, InterruptedException {
        byte[] tar = StagedArchive.create().directory("channel", 1000, 1000, 0711)
                .file("channel/secret", 65534, 65534, 0600, "s3".getBytes(StandardCharsets.UTF_8)).toBytes();
        Path file = dir.resolve("a.tar");
        Files.write(file, tar);
        Process p = new ProcessBuilder("tar", "--numeric-owner", "-tvf", file.toString()).redirectErrorStream(true).start();
        String listing = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), listing);
        assertTrue(listing.contains("drwx--x--x 1000/1000"), listing);
        assertTrue(listing.contains("-rw------- 65534/65534"), listing);
        Map<String, byte[]> files = StagedArchive.readFiles(new ByteArrayInputStream(tar));
        assertEquals(1, files.size());
        assertArrayEquals("s3".getBytes(StandardCharsets.UTF_8), files.get("channel/secret"));
    }

    @Test
    void pathsThatCouldLeaveTheVolumeAreRefused() {
        for (String bad : new String[] {"/etc/passwd", "../x", "a/../../x", ""}) {
            assertThrows(DriverException.class, () -> StagedArchive.create().directory(bad, 1, 1, 0700), bad);
        }
    }

    @Test
    void entriesAreBounded() {
        StagedArchive a = StagedArchive.create();
        for (int i = 0; i < StagedArchive.MAX_ENTRIES; i++) {
            a.directory("d" + i, 1, 1, 0700);
        }
        assertThrows(DriverException.class, () -> a.directory("one-more", 1, 1, 0700));
        assertThrows(DriverException.class, () -> StagedArchive.create().file("big", 1, 1, 0600,
                new byte[StagedArchive.MAX_BYTES + 1]));
    }
}
