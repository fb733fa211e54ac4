package openshell.linux;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Landlock on a dedicated thread: the restriction binds that thread only. */
class LandlockTest {
    /** The sandbox runtime's floor ({@code StartupProbes.MIN_LANDLOCK_ABI}, Linux 6.10): below it, it refuses to serve. */
    static final int RUNTIME_MINIMUM_ABI = 5;

    @Test
    void thisKernelHasAtLeastTheAbiTheRuntimeNeeds() {
        int abi = Landlock.abiVersion();
        assertTrue(abi >= RUNTIME_MINIMUM_ABI, "this kernel has Landlock ABI " + abi + ", the runtime needs " + RUNTIME_MINIMUM_ABI);
        assertTrue(RUNTIME_MINIMUM_ABI <= KernelFeatures.LANDLOCK_ABI_TARGET, "the floor is at most what the sandbox is written for");
    }

    @Test
    void restrictedThreadReadsOnlyBeneathItsRules(@TempDir Path dir) throws Exception {
        Path allowed = Files.createDirectory(dir.resolve("allowed"));
        Path secret = Files.writeString(dir.resolve("secret.txt"), "secret");
        Path readable = Files.writeString(allowed.resolve("ok.txt"), "ok");
        String result = CapabilitiesTest.onFreshThread(() -> {
            ProcessControl.setNoNewPrivileges();
            long handled = Landlock.fsRights(Landlock.abiVersion());
            try (Landlock.Ruleset ruleset = Landlock.create(handled, 0, Landlock.scopes(Landlock.abiVersion()))) {
                ruleset.allow(allowed.toString(), Landlock.READ_ONLY);
                ruleset.restrictSelf();
            }
            return open(readable) + " " + open(secret) + " " + write(allowed.resolve("new.txt"));
        });
        assertEquals("0 " + Errno.EACCES + " " + Errno.EACCES, result);
        assertEquals("secret", Files.readString(secret), "the test thread is not restricted");
    }

    @Test
    void tcpBindIsLimitedToTheAllowedPort() throws Exception {
        String result = CapabilitiesTest.onFreshThread(() -> {
            ProcessControl.setNoNewPrivileges();
            int allowed;
            try (java.net.ServerSocket probe = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
                allowed = probe.getLocalPort();
            } catch (java.io.IOException e) {
                return e.toString();
            }
            try {
                try (Landlock.Ruleset ruleset = Landlock.create(0, Landlock.NET_BIND_TCP, 0)) {
                    ruleset.allowPort(allowed, Landlock.NET_BIND_TCP);
                    ruleset.restrictSelf();
                }
                String bound;
                try (java.net.ServerSocket ok = new java.net.ServerSocket(allowed, 1, java.net.InetAddress.getLoopbackAddress())) {
                    bound = ok.getLocalPort() == allowed ? "allowed-port-bound" : "wrong-port";
                }
                try (java.net.ServerSocket denied = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
                    return bound + " other-port-bound " + denied.getLocalPort();
                } catch (java.io.IOException e) {
                    return bound + " other-port-denied";
                }
            } catch (java.io.IOException e) {
                return e.toString();
            }
        });
        assertEquals("allowed-port-bound other-port-denied", result);
    }

    @Test
    void olderAbiFailsARequiredPlanAndIsReportedForABestEffortOne() throws Exception {
        // The parent chooses the rights for the kernel's ABI; here as if the kernel were older.
        LaunchResult required = launchAsIfAbi(Launches.bash("echo target-ran").build(), 3).ready();
        LaunchResult.Failed failed = assertInstanceOf(LaunchResult.Failed.class, required);
        assertEquals(LaunchStep.LANDLOCK, failed.step());
        assertEquals(Errno.EOPNOTSUPP, failed.errno());
        assertTrue(failed.detail().contains("ABI 3"), failed.detail());

        String probe = "if cat /etc/hostname >/dev/null 2>&1; then echo etc=opened; else echo etc=denied; fi";
        LaunchPlan bestEffort = Launches.bash(probe).landlock(LaunchPlan.Mode.BEST_EFFORT,
                java.util.List.of("/usr", "/lib", "/lib64", "/bin"), java.util.List.of("/dev/null")).build();
        Launches.Outcome abi3 = launchAsIfAbi(bestEffort, 3);
        LandlockOutcome outcome = assertInstanceOf(LaunchResult.Ready.class, abi3.ready(), abi3.toString()).landlock();
        assertTrue(outcome.enforced());
        assertEquals(Landlock.fsRights(3), outcome.handledFs());
        assertEquals(0, outcome.scopes());
        assertTrue(!outcome.complete(), "the parent sees the downgrade: " + outcome);
        assertEquals("etc=denied", abi3.output().trim(), "the ABI 3 rights are in force");

        Launches.Outcome none = launchAsIfAbi(bestEffort, 0);
        LandlockOutcome noLandlock = assertInstanceOf(LaunchResult.Ready.class, none.ready(), none.toString()).landlock();
        assertTrue(!noLandlock.enforced() && !noLandlock.complete(), noLandlock.toString());
        assertEquals("etc=opened", none.output().trim(), "without Landlock nothing is denied");
    }

    private static Launches.Outcome launchAsIfAbi(LaunchPlan plan, int abi) throws Exception {
        return Launches.run(plan, Launches::continueAll, (launcher, p) -> launcher.sendPlan(p, Launches.WAIT, abi));
    }

    @Test
    void fileRuleDropsDirectoryOnlyRights(@TempDir Path dir) throws Exception {
        Path file = Files.writeString(dir.resolve("f.txt"), "x");
        try (Landlock.Ruleset ruleset = Landlock.create(Landlock.fsRights(Landlock.abiVersion()), 0, 0)) {
            ruleset.allow(file.toString(), Landlock.READ_ONLY | Landlock.MAKE_DIR);
            assertEquals(java.util.List.of(file.toString()), ruleset.paths());
        }
    }

    @Test
    void unhandledRightsAreRefusedClearly() {
        try (Landlock.Ruleset ruleset = Landlock.create(Landlock.READ_FILE, 0, 0)) {
            LinuxException e = assertThrows(LinuxException.class, () -> ruleset.allow("/usr", Landlock.WRITE_FILE));
            assertEquals(Errno.EINVAL, e.errno());
            LinuxException missing = assertThrows(LinuxException.class, () -> ruleset.allow("/does/not/exist", Landlock.READ_FILE));
            assertEquals(Errno.ENOENT, missing.errno());
        }
    }

    @Test
    void rightsPerAbiFollowTheKernelHistory() {
        assertEquals(0, Landlock.fsRights(0));
        assertEquals((1L << 13) - 1, Landlock.fsRights(1));
        assertEquals(Landlock.fsRights(1) | Landlock.REFER | Landlock.TRUNCATE, Landlock.fsRights(3));
        assertEquals(Landlock.fsRights(3) | Landlock.IOCTL_DEV, Landlock.fsRights(5));
        assertEquals(0, Landlock.netRights(3));
        assertEquals(3, Landlock.netRights(4));
        assertEquals(0, Landlock.scopes(5));
        assertEquals(3, Landlock.scopes(6));
        LandlockOutcome partial = new LandlockOutcome(3, Landlock.fsRights(7), Landlock.fsRights(3), 3, 0, true);
        assertTrue(!partial.complete(), "a best-effort downgrade is visible");
    }

    private static int open(Path path) {
        int fd = LibC.open(path.toString(), 0x80000, 0);
        if (fd < 0) {
            return LibC.errno();
        }
        LibC.close(fd);
        return 0;
    }

    private static int write(Path path) {
        int fd = LibC.open(path.toString(), 0x80000 | 1 | 0x40, 0600);
        if (fd < 0) {
            return LibC.errno();
        }
        LibC.close(fd);
        return 0;
    }
}
