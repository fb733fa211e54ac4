package openshell.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.cert.X509Certificate;
import java.time.Clock;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import openshell.isolation.AgentSpec;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.protocol.LaunchBundles;
import openshell.protocol.LaunchTls;
import openshell.protocol.SupervisorBundle;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The operator's host aliases and upstream CAs: parsing, bounds, and their way into every supervisor bundle. */
class OperatorNetworkTest {
    private static final X509Certificate CA = LaunchTls.issue("demo-ca").pin().authority();

    @TempDir
    Path dir;

    private static String pem(X509Certificate c) throws Exception {
        return "-----BEGIN CERTIFICATE-----\n" + Base64.getMimeEncoder(64, new byte[] {'\n'}).encodeToString(c.getEncoded())
                + "\n-----END CERTIFICATE-----\n";
    }

    private static GatewayException invalid(Runnable action) {
        GatewayException e = assertThrows(GatewayException.class, action::run);
        assertEquals(GatewayException.Reason.INVALID, e.reason(), e.getMessage());
        return e;
    }

    @Test
    void aliasesAreCanonicalNamesToLiteralAddresses() throws Exception {
        OperatorNetwork network = OperatorNetwork.none().withAlias("API.Demo.Test.=127.0.0.1").withAlias("v6.demo.test=::1");
        assertEquals(Map.of("api.demo.test", InetAddress.getByName("127.0.0.1"), "v6.demo.test", InetAddress.getByName("::1")),
                network.hostAliases());
        OperatorNetwork none = OperatorNetwork.none();
        assertTrue(invalid(() -> none.withAlias("api.demo.test")).getMessage().contains("NAME=ADDRESS"));
        assertTrue(invalid(() -> none.withAlias("api.demo.test=")).getMessage().contains("NAME=ADDRESS"));
        assertTrue(invalid(() -> none.withAlias("=127.0.0.1")).getMessage().contains("NAME=ADDRESS"));
        assertTrue(invalid(() -> none.withAlias("*.demo.test=127.0.0.1")).getMessage().contains("no '*'"));
        assertTrue(invalid(() -> none.withAlias("10.0.0.1=127.0.0.1")).getMessage().contains("not an address"));
        assertTrue(invalid(() -> none.withAlias("api.demo.test=localhost")).getMessage().contains("not an IP address"));
        assertTrue(invalid(() -> none.withAlias("api.demo.test=0.0.0.0")).getMessage().contains("not a host address"));
        assertTrue(invalid(() -> none.withAlias("api.demo.test=224.0.0.1")).getMessage().contains("not a host address"));
        OperatorNetwork one = none.withAlias("api.demo.test=127.0.0.1");
        assertTrue(invalid(() -> one.withAlias("API.demo.test=127.0.0.2")).getMessage().contains("declared twice"));
        assertTrue(one.hostAliases().size() == 1, "a refused alias changes nothing");
    }

    @Test
    void theAliasCountIsBoundedInclusively() {
        OperatorNetwork network = OperatorNetwork.none();
        for (int i = 0; i < OperatorNetwork.MAX_HOST_ALIASES; i++) {
            network = network.withAlias("h" + i + ".demo.test=127.0.0." + (i % 250 + 1));
        }
        assertEquals(OperatorNetwork.MAX_HOST_ALIASES, network.hostAliases().size());
        OperatorNetwork full = network;
        assertTrue(invalid(() -> full.withAlias("one.more.test=127.0.0.1")).getMessage()
                .contains("at most " + OperatorNetwork.MAX_HOST_ALIASES));
    }

    @Test
    void upstreamCasComeFromBoundedPemFiles() throws Exception {
        Path file = Files.writeString(dir.resolve("ca.pem"), pem(CA));
        assertEquals(List.of(CA), OperatorNetwork.none().withAuthorities(file).upstreamAuthorities());

        String padded = pem(CA) + "\n".repeat(OperatorNetwork.MAX_AUTHORITY_FILE_BYTES - pem(CA).length());
        Path atBound = Files.writeString(dir.resolve("bound.pem"), padded);
        assertEquals(OperatorNetwork.MAX_AUTHORITY_FILE_BYTES, Files.size(atBound));
        assertEquals(1, OperatorNetwork.none().withAuthorities(atBound).upstreamAuthorities().size());
        Path over = Files.writeString(dir.resolve("over.pem"), padded + "\n");
        assertTrue(invalid(() -> OperatorNetwork.none().withAuthorities(over)).getMessage().contains("larger than"));

        Path junk = Files.writeString(dir.resolve("junk.pem"), "hello");
        assertTrue(invalid(() -> OperatorNetwork.none().withAuthorities(junk)).getMessage().contains(junk.toString()));
        Path empty = Files.writeString(dir.resolve("empty.pem"), "");
        invalid(() -> OperatorNetwork.none().withAuthorities(empty));
        invalid(() -> OperatorNetwork.none().withAuthorities(dir.resolve("missing.pem")));
    }

    @Test
    void theUpstreamResolverIsOneAddressAndPort() throws Exception {
        assertEquals(Optional.empty(), OperatorNetwork.none().upstreamResolver(), "by default the host's resolver");
        assertEquals(Optional.of(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 5353)),
                OperatorNetwork.none().withResolver("127.0.0.1:5353").upstreamResolver());
        assertEquals(Optional.of(new InetSocketAddress(InetAddress.getByName("::1"), 53)),
                OperatorNetwork.none().withResolver("[::1]:53").upstreamResolver());
        OperatorNetwork none = OperatorNetwork.none();
        for (String bad : List.of("127.0.0.1", "localhost:53", "::1:53", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:x",
                ":53", "0.0.0.0:53", "224.0.0.251:5353")) {
            invalid(() -> none.withResolver(bad));
        }
        OperatorNetwork one = none.withResolver("127.0.0.1:5353");
        assertTrue(invalid(() -> one.withResolver("127.0.0.1:5354")).getMessage().contains("twice"));
    }

    @Test
    void theUpstreamCaCountIsBoundedInclusively() throws Exception {
        Path many = Files.writeString(dir.resolve("many.pem"), pem(CA).repeat(OperatorNetwork.MAX_UPSTREAM_AUTHORITIES));
        OperatorNetwork full = OperatorNetwork.none().withAuthorities(many);
        assertEquals(OperatorNetwork.MAX_UPSTREAM_AUTHORITIES, full.upstreamAuthorities().size());
        Path one = Files.writeString(dir.resolve("one.pem"), pem(CA));
        assertTrue(invalid(() -> full.withAuthorities(one)).getMessage()
                .contains("at most " + OperatorNetwork.MAX_UPSTREAM_AUTHORITIES));
    }

    @Test
    void theGatewayCommandLineSetsItAndEverySupervisorBundleCarriesIt() throws Exception {
        Path file = Files.writeString(dir.resolve("ca.pem"), pem(CA));
        GatewayConfig config = GatewayMain.parse(List.of("--state", dir.toString(), "--host-alias", "api.demo.test=127.0.0.1",
                "--host-alias", "other.demo.test=127.0.0.1", "--upstream-ca", file.toString(),
                "--upstream-resolver", "127.0.0.1:5353"));
        assertEquals(List.of("api.demo.test", "other.demo.test"), List.copyOf(config.network().hostAliases().keySet()));
        assertEquals(List.of(CA), config.network().upstreamAuthorities());
        assertTrue(assertThrows(GatewayException.class, () -> GatewayMain.parse(List.of("--host-alias", "nope")))
                .getMessage().contains("NAME=ADDRESS"));

        SandboxContext context = new SandboxContext(new SandboxId("sb-net"), SandboxSessionId.fresh(),
                PolicySnapshot.of(1, "version: 1\n".getBytes(StandardCharsets.UTF_8)),
                new AgentSpec(List.of("/bin/true"), Map.of(), "/"), SandboxLifecycle.WORKLOAD);
        SupervisorBundle bundle = LaunchBundles.supervisorBundle(LaunchSeals.standard(
                SigningKey.loadOrCreate(dir, Clock.systemUTC()), () -> "http://127.0.0.1:8710", config.network())
                .seal(context, 1, 1, List.of()).supervisorBundle());
        assertEquals(config.network().hostAliases(), bundle.hostAliases());
        assertEquals(List.of(CA), bundle.upstreamAuthorities());
        assertEquals(Optional.of(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 5353)), bundle.upstreamResolver());
    }
}
