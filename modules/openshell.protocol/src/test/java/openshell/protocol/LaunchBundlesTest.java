package openshell.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;

import openshell.protocol.wire.SupervisorBundle.Builder;
import org.junit.jupiter.api.Test;

class LaunchBundlesTest {
    private static final TokenIssuer ISSUER = TokenIssuer.generate(Launch.ISSUER, "gateway-key-1", Clock.systemUTC());
    private static final String SECRET = "sk-live-0123456789-very-secret";
    private static final String POLICY = "version: 1\nnetwork_policies: {}\n";
    private static final String ENDPOINT = "https://gateway.example.test:8443/session";

    private static LaunchBundles.Request.Builder request() {
        return LaunchBundles.Request.builder()
                .sandboxId("sbx-42").sessionId("session-42").generation(7)
                .policyYaml(POLICY)
                .agent(new LaunchBundles.Agent(List.of("/usr/bin/bash", "-c", "echo hi"),
                        Map.of("PATH", "/usr/bin:/bin", "API_KEY", "openshell-credential-api"), "/sandbox"))
                .workload(1000, 1000)
                .addCredential(new LaunchBundles.Credential("api", SECRET.getBytes(StandardCharsets.US_ASCII),
                        List.of("api.example.test")))
                .gatewayEndpoint(ENDPOINT);
    }

    private static ProtocolException refused(Runnable action) {
        ProtocolException e = assertThrows(ProtocolException.class, action::run);
        assertEquals(Refusal.BUNDLE_INVALID, e.refusal(), e.getMessage());
        return e;
    }

    private static byte[] late(String... arguments) {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        for (String a : arguments) {
            out.writeBytes(a.getBytes(StandardCharsets.UTF_8));
            out.write(0);
        }
        out.write(0);
        return out.toByteArray();
    }

    @Test
    void lateArgumentsAreReadUpToTheirEndAndLeaveTheBundleOnTheStream() throws Exception {
        byte[] bundle = LaunchBundles.mint(request().build(), ISSUER, 1).runtimeBundle();
        java.io.ByteArrayOutputStream stdin = new java.io.ByteArrayOutputStream();
        stdin.writeBytes(late("--sandbox", "sb-late", "--workspace", "/var/tmp/a dir\nwith newline"));
        stdin.writeBytes(bundle);
        ByteArrayInputStream in = new ByteArrayInputStream(stdin.toByteArray());
        assertEquals(List.of("--sandbox", "sb-late", "--workspace", "/var/tmp/a dir\nwith newline"),
                LaunchBundles.readLateArguments(in, java.util.Set.of("--sandbox", "--workspace")));
        assertArrayEquals(bundle, LaunchBundles.read(in));
        assertEquals(List.of(), LaunchBundles.readLateArguments(new ByteArrayInputStream(late()), java.util.Set.of()));
    }

    @Test
    void lateArgumentsAreBoundedEndedAndOnlyTheOptionsGiven() {
        java.util.Set<String> options = java.util.Set.of("--sandbox");
        // At the bound: MAX_LATE_ARGUMENT_BYTES in all, the two NULs included, is read; one more byte is not.
        String value = "x".repeat(LaunchBundles.MAX_LATE_ARGUMENT_BYTES - "--sandbox".length() - 3);
        byte[] atBound = late("--sandbox", value);
        assertEquals(LaunchBundles.MAX_LATE_ARGUMENT_BYTES, atBound.length);
        assertDoesNotThrowLate(atBound, options);
        ProtocolException over = assertThrows(ProtocolException.class, () -> LaunchBundles.readLateArguments(
                new ByteArrayInputStream(late("--sandbox", value + "x")), options));
        assertEquals(Refusal.BUNDLE_INVALID, over.refusal());
        for (byte[] bad : List.of(new byte[0], "--sandbox\0sb".getBytes(StandardCharsets.UTF_8), late("--sandbox"),
                late("--channel", "/elsewhere"), late("--sandbox", "a", "--bundle-stdin"))) {
            ProtocolException e = assertThrows(ProtocolException.class, () -> LaunchBundles.readLateArguments(
                    new ByteArrayInputStream(bad), options), new String(bad, StandardCharsets.UTF_8));
            assertEquals(Refusal.BUNDLE_INVALID, e.refusal());
        }
    }

    private static void assertDoesNotThrowLate(byte[] bytes, java.util.Set<String> options) {
        try {
            assertEquals(2, LaunchBundles.readLateArguments(new ByteArrayInputStream(bytes), options).size());
        } catch (java.io.IOException e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void mintedBundlesRoundTripToTheirViews() {
        LaunchBundles.Minted minted = LaunchBundles.mint(request().build(), ISSUER, 3);
        RuntimeBundle runtime = LaunchBundles.runtimeBundle(minted.runtimeBundle());
        SupervisorBundle supervisor = LaunchBundles.supervisorBundle(minted.supervisorBundle());

        assertEquals("sbx-42", runtime.sandboxId());
        assertEquals("session-42", runtime.sessionId());
        assertEquals(7, runtime.generation());
        assertEquals("session-42", runtime.sessionLineage());
        assertEquals(Launch.ISSUER, runtime.tokenIssuer());
        assertEquals(ISSUER.verificationKey().keyId(), runtime.verificationKey().keyId());
        assertArrayEquals(ISSUER.verificationKey().publicKey().getEncoded(), runtime.verificationKey().publicKey().getEncoded());
        assertEquals("sandbox.session-42.openshell.internal", runtime.identity().serverName());
        assertEquals(2, runtime.identity().chain().size());
        assertEquals(1000, runtime.workloadUid());
        assertEquals(1000, runtime.workloadGid());

        assertEquals("sbx-42", supervisor.sandboxId());
        assertEquals(7, supervisor.generation());
        assertEquals("session-42", supervisor.sessionLineage());
        assertEquals(runtime.identity().serverName(), supervisor.pin().serverName());
        assertEquals(runtime.identity().chain().getLast(), supervisor.pin().authority());
        assertEquals(minted.tokens().gatewayToken(), supervisor.tokens().gatewayToken());
        assertEquals(minted.tokens().sandboxToken(), supervisor.tokens().sandboxToken());
        assertEquals(3, supervisor.tokens().credentialEpoch());
        // The JWT's exp has whole seconds; the bundle carries exactly that.
        assertEquals(minted.tokens().expiresAt().truncatedTo(java.time.temporal.ChronoUnit.SECONDS),
                supervisor.tokens().expiresAt());
        assertEquals(POLICY, new String(supervisor.policyYaml(), StandardCharsets.UTF_8));
        assertEquals(List.of("/usr/bin/bash", "-c", "echo hi"), supervisor.agent().argv());
        assertEquals("/sandbox", supervisor.agent().workingDirectory());
        assertEquals("openshell-credential-api", supervisor.agent().environment().get("API_KEY"));
        assertEquals(1000, supervisor.workloadUid());
        assertEquals(1000, supervisor.workloadGid());
        assertEquals(SECRET, new String(supervisor.credentialsByName().get("api").secret(), StandardCharsets.US_ASCII));
        assertEquals(List.of("api.example.test"), supervisor.credentials().getFirst().hosts());
        assertEquals(Optional.of(ENDPOINT), supervisor.gatewayEndpoint());

        // The runtime's verifier accepts exactly the supervisor's sandbox-audience token.
        TokenClaims claims = runtime.verifier().verify(supervisor.tokens().sandboxToken());
        assertEquals("sbx-42", claims.sandboxId());
        assertEquals(3, claims.credentialEpoch());
        assertEquals(Refusal.TOKEN_WRONG_AUDIENCE, assertThrows(ProtocolException.class,
                () -> runtime.verifier().verify(supervisor.tokens().gatewayToken())).refusal());
        // A token of another launch of the same sandbox and generation: another lineage, refused.
        String otherLaunch = ISSUER.mintPair(new TokenGrant("sbx-42", 7, "session-43", RuntimeBundle.SUPERVISOR_COMPONENT,
                java.time.Duration.ofMinutes(30)), 3).sandboxToken();
        assertEquals(Refusal.TOKEN_WRONG_LINEAGE, assertThrows(ProtocolException.class,
                () -> runtime.verifier().verify(otherLaunch)).refusal());
    }

    @Test
    void bothViewsMeetOverARealTlsLinkAndAttach() throws Exception {
        LaunchBundles.Minted minted = LaunchBundles.mint(request().generation(Launch.GENERATION).build(), ISSUER, 1);
        RuntimeBundle runtime = LaunchBundles.runtimeBundle(minted.runtimeBundle());
        SupervisorBundle supervisor = LaunchBundles.supervisorBundle(minted.supervisorBundle());
        Path directory = Files.createTempDirectory("oslb");
        try {
            Transport where = Transport.unix(directory.resolve("s.sock"));
            try (SupervisorEndpoint listening = SupervisorEndpoint.builder().transport(where).initiator(Initiator.RUNTIME)
                    .pin(supervisor.pin()).tokens(new TokenSlot(supervisor.tokens(), Clock.systemUTC())).build()) {
                Transport dialTo = listening.listen();
                try (RuntimeEndpoint served = RuntimeEndpoint.builder().transport(dialTo).initiator(Initiator.RUNTIME)
                        .identity(runtime.identity()).verifier(runtime.verifier())
                        .addService(new TestRuntime(Launch.GENERATION, Clock.systemUTC())).build().start();
                     SupervisorLink link = listening.connect()) {
                    assertTrue(served.toString() != null);
                    Launch.blocking(link).attach(Launch.attachRequest("attach-bundle"));
                }
            }
        } finally {
            try (var files = Files.list(directory)) {
                for (Path f : files.toList()) {
                    Files.deleteIfExists(f);
                }
            }
            Files.deleteIfExists(directory);
        }
    }

    @Test
    void theRuntimeBundleHoldsNoTokenPolicyCredentialOrEndpointBytes() {
        LaunchBundles.Minted minted = LaunchBundles.mint(request().build(), ISSUER, 1);
        byte[] runtime = minted.runtimeBundle();
        for (String forbidden : List.of(minted.tokens().gatewayToken(), minted.tokens().sandboxToken(), SECRET, POLICY,
                ENDPOINT, "api.example.test", "openshell-credential-api", "/usr/bin/bash")) {
            assertFalse(contains(runtime, forbidden.getBytes(StandardCharsets.UTF_8)),
                    "the runtime bundle contains " + forbidden.substring(0, Math.min(12, forbidden.length())));
        }
        // No fragment of any token either: not even the signature part.
        String signature = minted.tokens().sandboxToken().substring(minted.tokens().sandboxToken().lastIndexOf('.') + 1);
        assertFalse(contains(runtime, signature.getBytes(StandardCharsets.US_ASCII)));
        // The supervisor bundle is where they are.
        assertTrue(contains(minted.supervisorBundle(), SECRET.getBytes(StandardCharsets.US_ASCII)));
        assertTrue(contains(minted.supervisorBundle(), minted.tokens().sandboxToken().getBytes(StandardCharsets.US_ASCII)));
    }

    @Test
    void textFormsNameNoTokenOrSecret() {
        LaunchBundles.Minted minted = LaunchBundles.mint(request().build(), ISSUER, 1);
        SupervisorBundle supervisor = LaunchBundles.supervisorBundle(minted.supervisorBundle());
        for (String text : List.of(minted.toString(), supervisor.toString(), supervisor.credentials().toString(),
                supervisor.tokens().toString(), request().build().toString(),
                LaunchBundles.runtimeBundle(minted.runtimeBundle()).toString())) {
            assertFalse(text.contains(SECRET), text);
            assertFalse(text.contains(minted.tokens().sandboxToken()), text);
            assertFalse(text.contains(minted.tokens().gatewayToken()), text);
        }
    }

    @Test
    void corruptBundlesAreRefused() {
        LaunchBundles.Minted minted = LaunchBundles.mint(request().build(), ISSUER, 1);
        byte[] runtime = minted.runtimeBundle();
        byte[] supervisor = minted.supervisorBundle();
        refused(() -> LaunchBundles.runtimeBundle(new byte[0]));
        refused(() -> LaunchBundles.supervisorBundle(new byte[0]));
        byte[] garbage = new byte[512];
        new java.util.Random(7).nextBytes(garbage);
        refused(() -> LaunchBundles.runtimeBundle(garbage));
        refused(() -> LaunchBundles.supervisorBundle(garbage));
        // Every truncation is refused: a bundle cut short never parses into a usable view.
        for (int cut : List.of(1, 7, runtime.length / 2, runtime.length - 1)) {
            refused(() -> LaunchBundles.runtimeBundle(Arrays.copyOf(runtime, cut)));
        }
        for (int cut : List.of(1, 7, supervisor.length / 3, supervisor.length - 1)) {
            refused(() -> LaunchBundles.supervisorBundle(Arrays.copyOf(supervisor, cut)));
        }
        // One bundle is never taken for the other.
        assertTrue(refused(() -> LaunchBundles.runtimeBundle(supervisor)).getMessage()
                .contains("expected a runtime bundle, got a supervisor bundle"));
        assertTrue(refused(() -> LaunchBundles.supervisorBundle(runtime)).getMessage()
                .contains("expected a supervisor bundle, got a runtime bundle"));
        // A corrupted key is refused, not half-used.
        openshell.protocol.wire.RuntimeBundle wire = parseRuntime(runtime);
        refused(() -> LaunchBundles.runtimeBundle(wire.toBuilder()
                .setTlsLeafKeyPkcs8(com.google.protobuf.ByteString.copyFromUtf8("not a key")).build().toByteArray()));
        refused(() -> LaunchBundles.runtimeBundle(wire.toBuilder().setVerificationKey(wire.getVerificationKey().toBuilder()
                .setPublicKeyDer(com.google.protobuf.ByteString.copyFromUtf8("nope"))).build().toByteArray()));
        refused(() -> LaunchBundles.runtimeBundle(wire.toBuilder().setTlsChainDer(0,
                com.google.protobuf.ByteString.copyFromUtf8("nope")).build().toByteArray()));
        // Unknown fields (a newer or foreign writer) are refused.
        refused(() -> LaunchBundles.runtimeBundle(wire.toBuilder().setUnknownFields(com.google.protobuf.UnknownFieldSet
                .newBuilder().addField(99, com.google.protobuf.UnknownFieldSet.Field.newBuilder().addVarint(1).build())
                .build()).build().toByteArray()));
    }

    @Test
    void eachMissingFieldIsRefusedByName() {
        byte[] supervisor = LaunchBundles.mint(request().build(), ISSUER, 1).supervisorBundle();
        openshell.protocol.wire.SupervisorBundle wire = parseSupervisor(supervisor);
        Map<String, Function<Builder, Builder>> removals = Map.ofEntries(
                Map.entry("sandbox_id", Builder::clearSandboxId),
                Map.entry("session_id", Builder::clearSessionId),
                Map.entry("session_lineage", Builder::clearSessionLineage),
                Map.entry("tls_authority_der", Builder::clearTlsAuthorityDer),
                Map.entry("gateway_token", Builder::clearGatewayToken),
                Map.entry("sandbox_token", Builder::clearSandboxToken),
                Map.entry("credential_epoch", Builder::clearCredentialEpoch),
                Map.entry("tokens_expire_at", Builder::clearTokensExpireAt),
                Map.entry("policy_yaml", Builder::clearPolicyYaml),
                Map.entry("agent", Builder::clearAgent),
                Map.entry("workload_uid", Builder::clearWorkloadUid),
                Map.entry("format", Builder::clearFormat));
        removals.forEach((field, removal) -> {
            String message = refused(() -> LaunchBundles.supervisorBundle(removal.apply(wire.toBuilder()).build()
                    .toByteArray())).getMessage();
            String expected = field.equals("format") ? "without a format" : field.equals("agent") ? "no agent" : field;
            assertTrue(message.contains(expected), field + ": " + message);
        });
        openshell.protocol.wire.RuntimeBundle runtime = parseRuntime(LaunchBundles.mint(request().build(), ISSUER, 1)
                .runtimeBundle());
        assertTrue(refused(() -> LaunchBundles.runtimeBundle(runtime.toBuilder().clearVerificationKey().build()
                .toByteArray())).getMessage().contains("verification_key"));
        assertTrue(refused(() -> LaunchBundles.runtimeBundle(runtime.toBuilder().clearTlsLeafKeyPkcs8().build()
                .toByteArray())).getMessage().contains("tls_leaf_key_pkcs8"));
        assertTrue(refused(() -> LaunchBundles.runtimeBundle(runtime.toBuilder().clearTlsChainDer().build()
                .toByteArray())).getMessage().contains("tls_chain_der"));
        assertTrue(refused(() -> LaunchBundles.runtimeBundle(runtime.toBuilder().clearWorkloadUid().build()
                .toByteArray())).getMessage().contains("workload_uid"));
        assertTrue(refused(() -> LaunchBundles.runtimeBundle(runtime.toBuilder().clearTokenIssuer().build()
                .toByteArray())).getMessage().contains("token_issuer"));
        assertTrue(refused(() -> LaunchBundles.runtimeBundle(runtime.toBuilder().clearSessionLineage().build()
                .toByteArray())).getMessage().contains("session_lineage"));
    }

    @Test
    void badRequestsAreRefusedBeforeMinting() {
        refused(() -> request().sandboxId("").build());
        refused(() -> request().workload(0, 1000).build());
        refused(() -> request().gatewayEndpoint("ftp://x").build());
        refused(() -> request().gatewayEndpoint("not a url").build());
        refused(() -> request().addCredential(new LaunchBundles.Credential("api", new byte[] {1}, List.of("h"))).build());
        refused(() -> new LaunchBundles.Credential("API", new byte[] {1}, List.of("h")));
        refused(() -> new LaunchBundles.Credential("api", new byte[0], List.of("h")));
        refused(() -> new LaunchBundles.Credential("api", new byte[] {1}, List.of()));
        refused(() -> new LaunchBundles.Agent(List.of("bash"), Map.of(), "/"));
        refused(() -> LaunchBundles.Request.builder().sandboxId("s").sessionId("s").policyYaml(POLICY)
                .agent(new LaunchBundles.Agent(List.of("/bin/true"), Map.of(), "/")).build());
        assertEquals(Refusal.INVALID_ARGUMENT, assertThrows(ProtocolException.class,
                () -> request().sessionId("Not A Label").build()).refusal());
    }

    @Test
    void aBundleOfExactlyTheBoundIsReadAndOneByteMoreIsRefused() throws Exception {
        byte[] minted = LaunchBundles.mint(request().build(), ISSUER, 1).supervisorBundle();
        openshell.protocol.wire.SupervisorBundle wire = parseSupervisor(minted);
        byte[] atBound = padTo(wire, LaunchBundles.MAX_BUNDLE_BYTES);
        assertEquals(LaunchBundles.MAX_BUNDLE_BYTES, atBound.length);
        assertArrayEquals(atBound, LaunchBundles.read(new ByteArrayInputStream(atBound)));
        assertEquals("sbx-42", LaunchBundles.supervisorBundle(atBound).sandboxId());

        byte[] over = padTo(wire, LaunchBundles.MAX_BUNDLE_BYTES + 1);
        assertEquals(LaunchBundles.MAX_BUNDLE_BYTES + 1, over.length);
        assertTrue(refused(() -> LaunchBundles.supervisorBundle(over)).getMessage().contains("above"));
        assertThrows(ProtocolException.class, () -> LaunchBundles.read(new ByteArrayInputStream(over)));
        assertThrows(ProtocolException.class, () -> LaunchBundles.read(new ByteArrayInputStream(new byte[0])));
        // Minting refuses what no main would read.
        String policy = "#".repeat(LaunchBundles.MAX_BUNDLE_BYTES);
        refused(() -> LaunchBundles.mint(request().policyYaml(policy).build(), ISSUER, 1));
    }

    /** The bundle with its policy padded by comment bytes so the whole encodes to exactly {@code size} bytes. */
    private static byte[] padTo(openshell.protocol.wire.SupervisorBundle wire, int size) {
        String policy = wire.getPolicyYaml().toStringUtf8();
        int pad = size - wire.getSerializedSize();
        for (int attempt = 0; attempt < 8; attempt++) {
            byte[] bytes = wire.toBuilder().setPolicyYaml(com.google.protobuf.ByteString.copyFromUtf8(
                    policy + "#".repeat(Math.max(0, pad)))).build().toByteArray();
            if (bytes.length == size) {
                return bytes;
            }
            pad -= bytes.length - size;
        }
        throw new AssertionError("cannot pad to " + size);
    }

    private static openshell.protocol.wire.RuntimeBundle parseRuntime(byte[] bytes) {
        try {
            return openshell.protocol.wire.RuntimeBundle.parseFrom(bytes);
        } catch (com.google.protobuf.InvalidProtocolBufferException e) {
            throw new AssertionError(e);
        }
    }

    private static openshell.protocol.wire.SupervisorBundle parseSupervisor(byte[] bytes) {
        try {
            return openshell.protocol.wire.SupervisorBundle.parseFrom(bytes);
        } catch (com.google.protobuf.InvalidProtocolBufferException e) {
            throw new AssertionError(e);
        }
    }

    private static boolean contains(byte[] haystack, byte[] needle) {
        outer:
        for (int i = 0; i + needle.length <= haystack.length; i++) {
            for (int j = 0; j < needle.length; j++) {
                if (haystack[i + j] != needle[j]) {
                    continue outer;
                }
            }
            return true;
        }
        return false;
    }

}
