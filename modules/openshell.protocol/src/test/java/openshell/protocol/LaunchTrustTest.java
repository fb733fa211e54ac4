package openshell.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.cert.X509Certificate;
import java.time.Clock;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.UnaryOperator;
import openshell.protocol.wire.HostAlias;
import org.junit.jupiter.api.Test;

/** The operator's host aliases and upstream trust anchors in the supervisor bundle, and their bounds. */
class LaunchTrustTest {
    private static final TokenIssuer ISSUER = TokenIssuer.generate(Launch.ISSUER, "gateway-key-1", Clock.systemUTC());
    private static final X509Certificate AUTHORITY = LaunchTls.issue("upstream-ca").pin().authority();

    private static LaunchBundles.Request.Builder request() {
        return LaunchBundles.Request.builder().sandboxId("sbx-7").sessionId("session-7").generation(1)
                .policyYaml("version: 1\n")
                .agent(new LaunchBundles.Agent(List.of("/bin/true"), Map.of(), "/"))
                .workload(1000, 1000);
    }

    private static ProtocolException refused(Runnable action) {
        ProtocolException e = assertThrows(ProtocolException.class, action::run);
        assertEquals(Refusal.BUNDLE_INVALID, e.refusal(), e.getMessage());
        return e;
    }

    @Test
    void aliasesAndAuthoritiesReachTheSupervisorOnly() throws Exception {
        LaunchBundles.Minted minted = LaunchBundles.mint(request()
                .hostAlias("api.demo.test", InetAddress.getByName("127.0.0.1"))
                .hostAlias("v6.demo.test", InetAddress.getByName("::1"))
                .upstreamAuthority(AUTHORITY).build(), ISSUER, 1);
        SupervisorBundle supervisor = LaunchBundles.supervisorBundle(minted.supervisorBundle());
        assertEquals(Map.of("api.demo.test", InetAddress.getByName("127.0.0.1"), "v6.demo.test", InetAddress.getByName("::1")),
                supervisor.hostAliases());
        assertEquals(List.of(AUTHORITY), supervisor.upstreamAuthorities());
        assertTrue(supervisor.toString().contains("api.demo.test"), supervisor.toString());
        assertFalse(new String(minted.runtimeBundle(), StandardCharsets.ISO_8859_1).contains("demo.test"));

        SupervisorBundle plain = LaunchBundles.supervisorBundle(LaunchBundles.mint(request().build(), ISSUER, 1)
                .supervisorBundle());
        assertTrue(plain.hostAliases().isEmpty());
        assertTrue(plain.upstreamAuthorities().isEmpty());
    }

    @Test
    void theOperatorsResolverReachesTheSupervisorOnlyAndIsAnAddress() throws Exception {
        InetSocketAddress resolver = new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 5353);
        LaunchBundles.Minted minted = LaunchBundles.mint(request().upstreamResolver(resolver).build(), ISSUER, 1);
        SupervisorBundle supervisor = LaunchBundles.supervisorBundle(minted.supervisorBundle());
        assertEquals(Optional.of(resolver), supervisor.upstreamResolver());
        assertTrue(supervisor.toString().contains("resolver=/127.0.0.1:5353"), supervisor.toString());
        assertTrue(LaunchBundles.supervisorBundle(LaunchBundles.mint(request().build(), ISSUER, 1).supervisorBundle())
                .upstreamResolver().isEmpty(), "without the setting the host's resolver is asked");
        assertTrue(refused(() -> request().upstreamResolver(InetSocketAddress.createUnresolved("dns.test", 53)).build())
                .getMessage().contains("not the name"));
        assertTrue(refused(() -> request().upstreamResolver(new InetSocketAddress(InetAddress.ofLiteral("127.0.0.1"), 0))
                .build()).getMessage().contains("port 0"));
        assertTrue(refused(() -> request().upstreamResolver(new InetSocketAddress(InetAddress.ofLiteral("0.0.0.0"), 53))
                .build()).getMessage().contains("not a host address"));
    }

    @Test
    void theAliasCountIsBoundedInclusively() throws Exception {
        LaunchBundles.Request.Builder atBound = request();
        for (int i = 0; i < LaunchBundles.MAX_HOST_ALIASES; i++) {
            atBound.hostAlias("h" + i + ".demo.test", InetAddress.getByAddress(new byte[] {127, 0, 0, (byte) (i % 250 + 1)}));
        }
        assertEquals(LaunchBundles.MAX_HOST_ALIASES, LaunchBundles.supervisorBundle(LaunchBundles.mint(atBound.build(),
                ISSUER, 1).supervisorBundle()).hostAliases().size());
        atBound.hostAlias("one.more.test", InetAddress.getByName("127.0.0.1"));
        assertTrue(refused(atBound::build).getMessage().contains("more than " + LaunchBundles.MAX_HOST_ALIASES));
    }

    @Test
    void theAuthorityCountIsBoundedInclusively() {
        LaunchBundles.Request.Builder atBound = request();
        for (int i = 0; i < LaunchBundles.MAX_UPSTREAM_AUTHORITIES; i++) {
            atBound.upstreamAuthority(AUTHORITY);
        }
        assertEquals(LaunchBundles.MAX_UPSTREAM_AUTHORITIES, LaunchBundles.supervisorBundle(LaunchBundles.mint(
                atBound.build(), ISSUER, 1).supervisorBundle()).upstreamAuthorities().size());
        atBound.upstreamAuthority(AUTHORITY);
        assertTrue(refused(atBound::build).getMessage().contains("more than " + LaunchBundles.MAX_UPSTREAM_AUTHORITIES));
    }

    @Test
    void badAliasesAreRefusedWhenBuilt() throws Exception {
        InetAddress loopback = InetAddress.getByName("127.0.0.1");
        refused(() -> request().hostAlias("API.demo.test", loopback).build());
        refused(() -> request().hostAlias("*.demo.test", loopback).build());
        refused(() -> request().hostAlias("bad..name", loopback).build());
        refused(() -> request().hostAlias("a".repeat(64) + ".test", loopback).build());
        refused(() -> request().hostAlias("api.demo.test", loopback).hostAlias("api.demo.test", loopback));
        InetAddress any = InetAddress.getByName("0.0.0.0");
        InetAddress multicast = InetAddress.getByName("224.0.0.1");
        assertTrue(refused(() -> request().hostAlias("any.demo.test", any).build()).getMessage().contains("not a host address"));
        refused(() -> request().hostAlias("multi.demo.test", multicast).build());
    }

    @Test
    void malformedAliasesAndAuthoritiesOnTheWireAreRefused() throws Exception {
        byte[] good = LaunchBundles.mint(request().build(), ISSUER, 1).supervisorBundle();
        UnaryOperator<openshell.protocol.wire.SupervisorBundle.Builder> fiveBytes = b -> b.addHostAliases(HostAlias
                .newBuilder().setName("api.demo.test").setAddress(ByteString.copyFrom(new byte[5])));
        assertTrue(refused(() -> LaunchBundles.supervisorBundle(edit(good, fiveBytes))).getMessage().contains("5 bytes"));
        UnaryOperator<openshell.protocol.wire.SupervisorBundle.Builder> upper = b -> b.addHostAliases(HostAlias
                .newBuilder().setName("API.demo.test").setAddress(ByteString.copyFrom(new byte[] {127, 0, 0, 1})));
        refused(() -> LaunchBundles.supervisorBundle(edit(good, upper)));
        UnaryOperator<openshell.protocol.wire.SupervisorBundle.Builder> junk = b -> b.addUpstreamAuthoritiesDer(
                ByteString.copyFromUtf8("not a certificate"));
        assertTrue(refused(() -> LaunchBundles.supervisorBundle(edit(good, junk))).getMessage()
                .contains("upstream_authorities_der"));
    }

    private static byte[] edit(byte[] bundle, UnaryOperator<openshell.protocol.wire.SupervisorBundle.Builder> change) {
        try {
            return change.apply(openshell.protocol.wire.SupervisorBundle.parseFrom(bundle).toBuilder()).build().toByteArray();
        } catch (com.google.protobuf.InvalidProtocolBufferException e) {
            throw new AssertionError(e);
        }
    }
}
