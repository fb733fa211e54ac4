package openshell.linux;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/** Capabilities, prctl switches and credentials on dedicated threads (all per-thread state). */
class CapabilitiesTest {

    static <T> T onFreshThread(Supplier<T> body) throws Exception {
        CompletableFuture<T> result = new CompletableFuture<>();
        Thread.ofPlatform().start(() -> {
            try {
                result.complete(body.get());
            } catch (Throwable t) {
                result.completeExceptionally(t);
            }
        });
        return result.get(30, TimeUnit.SECONDS);
    }

    @Test
    void clearAllEmptiesEveryCapabilitySetOfTheCallingThreadOnly() throws Exception {
        long before = Capabilities.boundingSet();
        assertNotEquals(0, before, "tests run as root with a full bounding set");
        String after = onFreshThread(() -> {
            Capabilities.clearAll();
            Capabilities.requireNone();
            return Capabilities.current() + " bounding " + Long.toHexString(Capabilities.boundingSet())
                    + " ambient " + Capabilities.ambientSet() + " " + statusCapabilities();
        });
        // The kernel's own view (/proc/thread-self/status) is the independent oracle.
        assertEquals("Sets[effective=0, permitted=0, inheritable=0] bounding 0 ambient 0 "
                + "[CapInh:\t0000000000000000, CapPrm:\t0000000000000000, CapEff:\t0000000000000000, "
                + "CapBnd:\t0000000000000000, CapAmb:\t0000000000000000]", after);
        assertEquals(before, Capabilities.boundingSet(), "other threads keep theirs");
    }

    static java.util.List<String> statusCapabilities() {
        try {
            return java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/thread-self/status")).stream()
                    .filter(l -> l.startsWith("Cap")).toList();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Test
    void lastCapabilityMatchesTheKernel() throws Exception {
        try (java.io.InputStream in = java.nio.file.Files.newInputStream(java.nio.file.Path.of("/proc/sys/kernel/cap_last_cap"))) {
            assertEquals(Integer.parseInt(new String(in.readAllBytes(), java.nio.charset.StandardCharsets.US_ASCII).trim()),
                    Capabilities.lastCapability());
        }
    }

    @Test
    void requireNoneFailsNamingWhatRemains() throws Exception {
        LinuxException e = onFreshThread(() -> assertThrows(LinuxException.class, Capabilities::requireNone));
        assertEquals(Errno.EPERM, e.errno());
        assertTrue(e.getMessage().contains("capabilities remain"), e.getMessage());
    }

    @Test
    void droppedCapabilitiesCannotBeRegained() throws Exception {
        LinuxException e = onFreshThread(() -> {
            Capabilities.clearAll();
            return assertThrows(LinuxException.class, () -> Capabilities.set(
                    new Capabilities.Sets(1L << Capabilities.CAP_SYS_ADMIN, 1L << Capabilities.CAP_SYS_ADMIN, 0)));
        });
        assertEquals(Errno.EPERM, e.errno());
        assertEquals("capset", e.call());
    }

    @Test
    void noNewPrivilegesIsPerThreadAndSticks() throws Exception {
        assertFalse(ProcessControl.noNewPrivileges());
        assertTrue(onFreshThread(() -> {
            ProcessControl.setNoNewPrivileges();
            return ProcessControl.noNewPrivileges();
        }));
        assertFalse(ProcessControl.noNewPrivileges(), "the test thread is unaffected");
    }

    @Test
    void parentDeathSignalAndDumpableRoundTrip() throws Exception {
        assertEquals(9, onFreshThread(() -> {
            ProcessControl.setParentDeathSignal(9);
            return ProcessControl.parentDeathSignal();
        }));
        assertTrue(ProcessControl.dumpable());
    }

    @Test
    void childSubreaperRoundTrips() {
        boolean before = ProcessControl.childSubreaper();
        try {
            ProcessControl.setChildSubreaper(true);
            assertTrue(ProcessControl.childSubreaper());
        } finally {
            ProcessControl.setChildSubreaper(before);
        }
    }

    @Test
    void resourceLimitsApplyToAChild() throws Exception {
        try (ChildProcess child = ChildProcess.builder("/usr/bin/sleep").argv(java.util.List.of("sleep", "60")).spawn()) {
            try {
                new ResourceLimit(ResourceLimit.NOFILE, 100, 200).applyTo(child.pid());
                assertEquals(new ResourceLimit(ResourceLimit.NOFILE, 100, 200), ResourceLimit.of(child.pid(), ResourceLimit.NOFILE));
            } finally {
                child.pidfd().signal(9);
                child.awaitExit(java.time.Duration.ofSeconds(30));
            }
        }
        assertThrows(LinuxException.class, () -> new ResourceLimit(ResourceLimit.NOFILE, 300, 200));
    }
}
