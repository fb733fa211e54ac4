package openshell.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.util.List;
import java.util.Map;

import openshell.driver.LaunchMaterial;
import openshell.isolation.AgentSpec;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.protocol.LaunchBundles;
import openshell.protocol.SupervisorBundle;
import openshell.protocol.TokenAudience;
import openshell.protocol.TokenIssuer;
import openshell.protocol.TokenVerifier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The real sealer: bundles the mains can read, tokens that verify with the persisted key after a restart. */
class LaunchSealsTest {
    @TempDir
    Path state;

    @Test
    void supervisorBundleCarriesTheSessionEndpointAndTokensThatSurviveARestartOfTheKey() {
        TokenIssuer issuer = SigningKey.loadOrCreate(state, Clock.systemUTC());
        SandboxSessionId session = SandboxSessionId.fresh();
        SandboxContext context = new SandboxContext(new SandboxId("sb-one"), session,
                PolicySnapshot.of(1, "version: 1\n".getBytes(StandardCharsets.UTF_8)),
                new AgentSpec(List.of("/bin/sleep", "5"), Map.of("A", "b"), "/"), SandboxLifecycle.WORKLOAD);
        LaunchMaterial material = LaunchSeals.standard(issuer, () -> "http://127.0.0.1:8710")
                .seal(context, 3, 1, List.of(new LaunchBundles.Credential("github", "s3cret".getBytes(StandardCharsets.UTF_8),
                        List.of("api.github.com"))));
        SupervisorBundle bundle = LaunchBundles.supervisorBundle(material.supervisorBundle());
        assertEquals("sb-one", bundle.sandboxId());
        assertEquals(3, bundle.generation());
        assertEquals(session.value(), bundle.sessionLineage());
        assertEquals("http://127.0.0.1:8710", bundle.gatewayEndpoint().orElseThrow());
        assertEquals(1, bundle.credentialsByName().size());
        assertFalse(new String(material.runtimeBundle(), StandardCharsets.ISO_8859_1).contains("s3cret"),
                "credentials go to the supervisor only");

        // The same key after a gateway restart verifies the launch's gateway token.
        TokenIssuer restarted = SigningKey.loadOrCreate(state, Clock.systemUTC());
        assertEquals(issuer.verificationKey(), restarted.verificationKey());
        TokenVerifier verifier = TokenVerifier.builder().key(restarted.verificationKey()).issuer(restarted.issuer())
                .audience(TokenAudience.GATEWAY).sandboxId("sb-one").runtimeGeneration(3)
                .component(SessionHub.COMPONENT).build();
        assertEquals(1, verifier.verify(bundle.tokens().gatewayToken()).credentialEpoch());
    }

    @Test
    void aSigningKeyReadableByOthersIsRefused() throws Exception {
        SigningKey.loadOrCreate(state, Clock.systemUTC());
        java.nio.file.Files.setPosixFilePermissions(state.resolve(SigningKey.FILE),
                java.nio.file.attribute.PosixFilePermissions.fromString("rw-r--r--"));
        assertEquals(GatewayException.Reason.INVALID, assertThrows(GatewayException.class,
                () -> SigningKey.loadOrCreate(state, Clock.systemUTC())).reason());
    }
}
