package openshell.driver;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import openshell.driver.spi.ComputeDriverProvider;
import openshell.isolation.AgentSpec;
import openshell.isolation.BackendKey;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.TopologyDescriptor;
import openshell.isolation.WorkloadIdentity;
import org.junit.jupiter.api.Test;

/** The SPI's value types and registry: bounds at the bound, redaction, exact-name resolution. */
class DriverSpiTest {
    /** A driver that records nothing: a unit-test double for the registry, never registered. */
    record NamedDriver(String name) implements ComputeDriver {
        @Override
        public Provisioned create(LaunchPlan plan) {
            throw new UnsupportedOperationException();
        }

        @Override
        public Provisioned start(SandboxId id, byte[] state, LaunchPlan plan) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void stop(SandboxId id, byte[] state) {
        }

        @Override
        public void delete(SandboxId id, byte[] state) {
        }

        @Override
        public DriverStatus status(SandboxId id, byte[] state) {
            return new DriverStatus(DriverStatus.Phase.GONE, "test double");
        }
    }

    record Provider(String name, String createsName) implements ComputeDriverProvider {
        @Override
        public ComputeDriver create(DriverEnvironment environment) {
            return new NamedDriver(createsName);
        }
    }

    static final DriverEnvironment ENV = new DriverEnvironment(Path.of("/tmp/state"), Map.of());

    static SandboxContext context() {
        return new SandboxContext(new SandboxId("sb"), SandboxSessionId.fresh(),
                PolicySnapshot.of(1, "version: 1\n".getBytes()), AgentSpec.of(List.of("/bin/true")),
                WorkloadIdentity.of(1000, 1000));
    }

    @Test
    void registryResolvesExactNamesOnly() {
        DriverRegistry registry = DriverRegistry.of(List.of(new Provider("process", "process"),
                new Provider("docker", "docker")));
        assertEquals("process", registry.driver("process", ENV).name());
        DriverException unknown = assertThrows(DriverException.class, () -> registry.driver("Process", ENV));
        assertEquals(DriverException.Kind.UNAVAILABLE, unknown.kind());
        assertEquals(DriverException.Kind.UNAVAILABLE,
                assertThrows(DriverException.class, () -> registry.driver("proc", ENV)).kind());
    }

    @Test
    void duplicateNamesAreRefused() {
        assertEquals(DriverException.Kind.INVALID, assertThrows(DriverException.class,
                () -> DriverRegistry.of(List.of(new Provider("process", "process"), new Provider("process", "process"))))
                .kind());
    }

    @Test
    void aProviderThatCreatesAnotherDriverIsRefused() {
        DriverRegistry registry = DriverRegistry.of(List.of(new Provider("process", "docker")));
        assertEquals(DriverException.Kind.FAILED,
                assertThrows(DriverException.class, () -> registry.driver("process", ENV)).kind());
    }

    @Test
    void theSpiModuleRegistersNoDriverOfItsOwn() {
        assertEquals(java.util.Set.of(), DriverRegistry.load().names());
    }

    @Test
    void launchMaterialIsCopiedBoundedAndNeverPrinted() {
        byte[] secret = "token-secret".getBytes();
        LaunchMaterial m = LaunchMaterial.of(secret, new byte[LaunchMaterial.MAX_BUNDLE_BYTES]);
        secret[0] = 'X';
        assertEquals('t', m.supervisorBundle()[0]);
        assertFalse(m.toString().contains("token"));
        assertEquals(DriverException.Kind.INVALID, assertThrows(DriverException.class,
                () -> LaunchMaterial.of(new byte[LaunchMaterial.MAX_BUNDLE_BYTES + 1], new byte[0])).kind());
    }

    @Test
    void launchPlanOptionsAreBoundedAndNamed() {
        LaunchMaterial m = LaunchMaterial.of(new byte[0], new byte[0]);
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i < LaunchPlan.MAX_OPTIONS; i++) {
            options.put("option" + i, "v");
        }
        assertEquals(LaunchPlan.MAX_OPTIONS, new LaunchPlan(context(), 1, m, options).options().size());
        options.put("one-more", "v");
        assertThrows(DriverException.class, () -> new LaunchPlan(context(), 1, m, options));
        assertThrows(DriverException.class, () -> new LaunchPlan(context(), 1, m, Map.of("Bad Name", "v")));
        assertThrows(DriverException.class, () -> new LaunchPlan(context(), 0, m, Map.of()));
    }

    @Test
    void provisionedStateIsCopiedAndBounded() {
        TopologyDescriptor d = TopologyDescriptor.of(new BackendKey("openshell-sandbox", 1), new byte[] {1});
        byte[] state = new byte[Provisioned.MAX_STATE_BYTES];
        Provisioned p = Provisioned.of(d, DialDirection.RUNTIME_INITIATED, state);
        state[0] = 9;
        assertArrayEquals(new byte[Provisioned.MAX_STATE_BYTES], p.state());
        assertSame(d, p.descriptor());
        assertEquals(DriverException.Kind.INVALID, assertThrows(DriverException.class,
                () -> Provisioned.of(d, DialDirection.RUNTIME_INITIATED, new byte[Provisioned.MAX_STATE_BYTES + 1])).kind());
    }

    @Test
    void environmentNeedsAnAbsoluteStateRoot() {
        assertThrows(DriverException.class, () -> new DriverEnvironment(Path.of("relative"), Map.of()));
    }
}
