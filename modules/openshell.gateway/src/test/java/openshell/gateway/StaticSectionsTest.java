package openshell.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import openshell.driver.LaunchMaterial;
import openshell.isolation.AgentSpec;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.WorkloadIdentity;
import openshell.policy.Policy;
import openshell.protocol.LaunchBundles;
import openshell.protocol.WorkloadConfinement;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What the gateway makes of the static sections: the workload identity and the sealed confinement. */
class StaticSectionsTest {
    private static final String POLICY = """
            version: 1
            filesystem_policy:
              read_only: [/usr, /etc]
              read_write: [/tmp, /var/tmp]
              include_workdir: true
            landlock:
              compatibility: best_effort
            process:
              run_as_user: 4321
              run_as_group: staff
            """;

    @TempDir
    Path state;

    @Test
    void numericIdsBecomeTheWorkloadIdentityAndNamesKeepTheDefaultForTheRuntimeToResolve() {
        assertEquals(WorkloadIdentity.of(4321, StaticSections.DEFAULT_ID), StaticSections.workload(Policy.parse(POLICY)));
        assertEquals(WorkloadIdentity.of(StaticSections.DEFAULT_ID, StaticSections.DEFAULT_ID),
                StaticSections.workload(Policy.parse("version: 1\n")));
        assertEquals(new WorkloadConfinement(true, List.of("/usr", "/etc"), List.of("/tmp", "/var/tmp"), true, true,
                Optional.of("4321"), Optional.of("staff")), StaticSections.confinement(Policy.parse(POLICY)));
        assertEquals(WorkloadConfinement.standard(), StaticSections.confinement(Policy.parse("version: 1\n")));
    }

    @Test
    void aRecordedPolicyThatNoLongerPassesIsRefusedNotLaunched() {
        GatewayException e = org.junit.jupiter.api.Assertions.assertThrows(GatewayException.class,
                () -> StaticSections.admitted("version: 1\nfilesystem_policy: {read_only: []}\n"));
        assertEquals(GatewayException.Reason.INVALID, e.reason());
        org.junit.jupiter.api.Assertions.assertTrue(e.getMessage().contains("grants nothing"), e.getMessage());
    }

    @Test
    void theSealedRuntimeBundleCarriesTheConfinementAndTheIdentity() {
        SandboxContext context = new SandboxContext(new SandboxId("sb-static"), SandboxSessionId.fresh(),
                PolicySnapshot.of(1, POLICY.getBytes(StandardCharsets.UTF_8)), new AgentSpec(List.of("/bin/true"), Map.of(), "/"),
                StaticSections.workload(Policy.parse(POLICY)));
        LaunchMaterial material = LaunchSeals.standard(SigningKey.loadOrCreate(state, Clock.systemUTC()), () -> "http://127.0.0.1:1")
                .seal(context, 1, 1, List.of());
        assertEquals(StaticSections.confinement(Policy.parse(POLICY)), LaunchBundles.runtimeConfinement(material.runtimeBundle()));
        assertEquals(4321, LaunchBundles.runtimeBundle(material.runtimeBundle()).workloadUid());
    }
}
