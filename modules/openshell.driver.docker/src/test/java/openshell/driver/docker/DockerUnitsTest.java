package openshell.driver.docker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Map;

import org.junit.jupiter.api.Test;

import openshell.driver.DialDirection;
import openshell.driver.DriverException;

/** The pure parts: version negotiation, settings and their bounds, the persisted state. */
class DockerUnitsTest {
    private static final String A = "a".repeat(64);
    private static final String B = "b".repeat(64);

    @Test
    void theApiVersionIsTheDaemonsCappedAtTheNewestKnownAndTooOldNamesBoth() {
        assertEquals(new ApiVersion(1, 41), ApiVersion.negotiate(ApiVersion.parse("1.41"), "unix:///x"));
        assertEquals(ApiVersion.NEWEST, ApiVersion.negotiate(ApiVersion.parse("1.52"), "unix:///x"));
        DriverException old = assertThrows(DriverException.class, () -> ApiVersion.negotiate(ApiVersion.parse("1.40"), "unix:///x"));
        assertEquals(DriverException.Kind.UNAVAILABLE, old.kind());
        assertTrue(old.getMessage().contains("1.40") && old.getMessage().contains("1.41"), old.getMessage());
        assertThrows(DriverException.class, () -> ApiVersion.parse("one"));
        assertTrue(ApiVersion.HEALTH_START_INTERVAL.compareTo(ApiVersion.MINIMUM) > 0);
    }

    @Test
    void settingsHaveDefaultsAndEveryBoundIsCheckedAtTheBound() {
        DockerSettings s = DockerSettings.of(Map.of());
        assertEquals("unix:///var/run/docker.sock", s.host());
        assertEquals(DockerSettings.DEFAULT_PIDS, s.pidsLimit());
        assertEquals(DockerSettings.DEFAULT_MEMORY, s.memoryBytes());
        assertEquals(DockerSettings.DEFAULT_MILLI_CPUS, s.milliCpus());
        assertEquals(DialDirection.RUNTIME_INITIATED, s.direction());
        assertEquals(DockerSettings.MIN_PIDS, DockerSettings.of(Map.of("limits.pids", "64")).pidsLimit());
        assertEquals(DockerSettings.MAX_PIDS, DockerSettings.of(Map.of("limits.pids", "65536")).pidsLimit());
        assertThrows(DriverException.class, () -> DockerSettings.of(Map.of("limits.pids", "63")));
        assertThrows(DriverException.class, () -> DockerSettings.of(Map.of("limits.pids", "65537")));
        assertEquals(DockerSettings.MIN_MEMORY, DockerSettings.of(Map.of("limits.memory", Long.toString(128L << 20))).memoryBytes());
        assertThrows(DriverException.class, () -> DockerSettings.of(Map.of("limits.memory", Long.toString((128L << 20) - 1))));
        assertThrows(DriverException.class, () -> DockerSettings.of(Map.of("limits.memory", Long.toString((64L << 30) + 1))));
        assertEquals(100, DockerSettings.of(Map.of("limits.cpus", "0.1")).milliCpus());
        assertEquals(64_000, DockerSettings.of(Map.of("limits.cpus", "64")).milliCpus());
        assertThrows(DriverException.class, () -> DockerSettings.of(Map.of("limits.cpus", "0.099")));
        assertThrows(DriverException.class, () -> DockerSettings.of(Map.of("limits.cpus", "64.001")));
        assertEquals(DialDirection.SUPERVISOR_INITIATED,
                DockerSettings.of(Map.of("connection.direction", "supervisor")).direction());
        assertThrows(DriverException.class, () -> DockerSettings.of(Map.of("connection.direction", "either")));
        assertThrows(DriverException.class, () -> DockerSettings.of(Map.of("docker.host", "http://x")));
        DriverException unknown = assertThrows(DriverException.class, () -> DockerSettings.of(Map.of("run.root", "/x")));
        assertTrue(unknown.getMessage().contains("run.root"), unknown.getMessage());
    }

    @Test
    void theImageDirectoriesFollowTheProcessDriversLaunchers() {
        DockerSettings s = DockerSettings.of(Map.of("runtime.launcher", "/img/sandbox/bin/openshell-sandbox",
                "supervisor.launcher", "/img/supervisor/bin/openshell-supervisor"));
        assertEquals("/img/sandbox", s.runtimeDir().orElseThrow().toString());
        assertEquals("/img/supervisor", s.supervisorDir().orElseThrow().toString());
        DriverException missing = assertThrows(DriverException.class,
                () -> DockerSettings.requireImage(s.runtimeDir(), "runtime.dir", "sandbox", "bin/openshell-sandbox-static"));
        assertEquals(DriverException.Kind.UNAVAILABLE, missing.kind());
        assertTrue(missing.getMessage().contains("runtime.dir"), missing.getMessage());
    }

    @Test
    void theStateRoundTripsWithItsDialDirectionAndTheDescriptorCarriesOnlyTheChannel() {
        for (DialDirection d : DialDirection.values()) {
            DockerTopology t = new DockerTopology("ns", 3, A, B, "openshell-channel-x", "sha256:" + A, 1000, 1001, d);
            assertEquals(t, DockerTopology.fromState(t.state()));
        }
        DockerTopology t = new DockerTopology("ns", 3, A, B, "openshell-channel-x", "sha256:" + A, 1000, 1001,
                DialDirection.RUNTIME_INITIATED);
        String descriptor = new String(t.descriptor().payload(), StandardCharsets.ISO_8859_1);
        assertEquals("channel=" + DockerTopology.CHANNEL_SOCKET.replace(":", "\\:") + "\ndial=runtime\nruntime.uid=1000\ntransport=unix\n",
                descriptor);
        assertThrows(DriverException.class, () -> DockerTopology.fromState("driver=process\n".getBytes(StandardCharsets.ISO_8859_1)));
        assertThrows(DriverException.class, () -> DockerTopology.fromState(new String(t.state(), StandardCharsets.ISO_8859_1)
                .replace(A, "not-an-id").getBytes(StandardCharsets.ISO_8859_1)));
    }
}
