package openshell.driver.container;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Optional;

import org.junit.jupiter.api.Test;

import openshell.driver.DriverException;

class ImageIdentityTest {
    private static final Optional<String> PASSWD = Optional.of("""
            root:x:0:0:root:/root:/bin/sh
            agent:x:1000:1000:agent:/home/agent:/bin/sh
            app:x:1234:2000::/app:/sbin/nologin
            """);
    private static final Optional<String> GROUP = Optional.of("""
            root:x:0:agent
            agent:x:1000:
            apps:x:2000:
            tools:x:3000:app,agent
            """);
    private static final String NO_USER_POLICY = "version: 1\n";

    @Test
    void thePolicysUserWinsOverTheImage() {
        ImageIdentity id = ImageIdentity.resolve("version: 1\nprocess:\n  run_as_user: app\n", "agent", PASSWD, GROUP);
        assertEquals(new ImageIdentity(1234, 2000, List.of(3000), ImageIdentity.Source.POLICY), id);
        assertEquals("1234:2000", id.user());
    }

    @Test
    void theImagesUserIsUsedWhenThePolicyNamesNone() {
        assertEquals(new ImageIdentity(1000, 1000, List.of(3000), ImageIdentity.Source.IMAGE),
                ImageIdentity.resolve(NO_USER_POLICY, "agent", PASSWD, GROUP));
        assertEquals(new ImageIdentity(1234, 3000, List.of(), ImageIdentity.Source.IMAGE),
                ImageIdentity.resolve(NO_USER_POLICY, "1234:tools", PASSWD, GROUP));
        // A numeric user the image has no entry for keeps its id as its group.
        assertEquals(new ImageIdentity(4242, 4242, List.of(), ImageIdentity.Source.IMAGE),
                ImageIdentity.resolve(NO_USER_POLICY, "4242", Optional.empty(), Optional.empty()));
    }

    @Test
    void noUserAnywhereGivesTheDefaultNonRootIdentity() {
        assertEquals(new ImageIdentity(ImageIdentity.DEFAULT_ID, ImageIdentity.DEFAULT_ID, List.of(),
                ImageIdentity.Source.DEFAULT), ImageIdentity.resolve(NO_USER_POLICY, "", Optional.empty(), Optional.empty()));
    }

    @Test
    void rootIsRefusedWhoeverNamesIt() {
        for (String user : List.of("root", "0", "0:0", "agent:root", "agent:0")) {
            DriverException e = assertThrows(DriverException.class,
                    () -> ImageIdentity.resolve(NO_USER_POLICY, user, PASSWD, GROUP), user);
            assertEquals(DriverException.Kind.INVALID, e.kind());
            assertTrue(e.getMessage().contains("never runs as root"), e.getMessage());
        }
    }

    @Test
    void anAccountTheImageLacksIsRefusedByName() {
        DriverException e = assertThrows(DriverException.class,
                () -> ImageIdentity.resolve("version: 1\nprocess:\n  run_as_user: ghost\n", "", PASSWD, GROUP));
        assertTrue(e.getMessage().contains("'ghost'"), e.getMessage());
    }

    @Test
    void accountFilesAreBounded() {
        String big = "x".repeat(ImageIdentity.MAX_ACCOUNT_FILE_BYTES + 1);
        assertThrows(DriverException.class, () -> ImageIdentity.resolve(NO_USER_POLICY, "agent", Optional.of(big), GROUP));
        ImageIdentity.resolve(NO_USER_POLICY, "agent",
                Optional.of(PASSWD.get() + "#".repeat(ImageIdentity.MAX_ACCOUNT_FILE_BYTES - PASSWD.get().length())), GROUP);
    }
}
