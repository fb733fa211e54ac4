package openshell.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.DenyReason;
import openshell.isolation.Executable;
import openshell.isolation.IdentityResolution;
import openshell.isolation.WorkloadIdentity;
import org.junit.jupiter.api.Test;

class PolicyGenerationTest {
    static final String FULL = """
            version: 1
            filesystem_policy:
              read_only: [/usr, /etc]
              read_write: [/tmp, /sandbox]
              include_workdir: true
            landlock:
              compatibility: best_effort
            process:
              run_as_user: 1000
              run_as_group: 1000
            network_policies:
              github:
                endpoints:
                  - host: api.github.com
                    port: 443
                    protocol: rest
                    access: read-only
                    deny_rules:
                      - {method: GET, path: /admin/**}
                binaries:
                  - path: /usr/bin/curl
            """;

    static IdentityResolution who(String path) {
        return new IdentityResolution.Resolved(BinaryIdentity.of(Executable.of(path)));
    }

    static final Destination GITHUB = Destination.of("api.github.com", InetAddress.ofLiteral("140.82.112.5"), 443);

    @Test
    void staticSectionsAreRead() {
        Policy p = Policy.parse(FULL);
        assertEquals(new FilesystemPolicy(List.of("/usr", "/etc"), List.of("/tmp", "/sandbox"), true), p.filesystem());
        assertEquals(LandlockCompatibility.BEST_EFFORT, p.landlock());
        assertEquals(Optional.of(new AccountRef.Id(1000)), p.process().runAsUser());
        assertEquals(Optional.of(WorkloadIdentity.of(1000, 1000)), p.process().workloadIdentity());
        assertEquals(List.of("github"), p.networkPolicyNames());
    }

    @Test
    void absentSectionsFailClosed() {
        Policy p = Policy.parse("version: 1\n");
        assertEquals(FilesystemPolicy.none(), p.filesystem());
        assertEquals(LandlockCompatibility.HARD_REQUIREMENT, p.landlock());
        assertEquals(Optional.empty(), p.process().workloadIdentity());
        Decision d = PolicyGeneration.first(p).decideConnection(who("/usr/bin/curl"), GITHUB);
        assertEquals(DenyCause.NO_ENDPOINT, assertInstanceOf(Decision.Deny.class, d).cause());
    }

    @Test
    void namedAccountsHaveNoNumericIdentity() {
        Policy p = Policy.parse("version: 1\nprocess: {run_as_user: sandbox, run_as_group: 100}\n");
        assertEquals(Optional.of(new AccountRef.Name("sandbox")), p.process().runAsUser());
        assertEquals(Optional.empty(), p.process().workloadIdentity());
    }

    @Test
    void documentAndSnapshotAreTheValidatedBytes() {
        byte[] bytes = FULL.getBytes(StandardCharsets.UTF_8);
        Policy p = Policy.parse(bytes);
        bytes[0] = 'X';
        assertArrayEquals(FULL.getBytes(StandardCharsets.UTF_8), p.document());
        assertEquals(p.sha256(), p.snapshot(7).sha256());
        assertEquals(7, p.snapshot(7).generation());
    }

    @Test
    void invalidUtf8IsAProblemNotACrash() {
        PolicyException e = assertThrows(PolicyException.class, () -> Policy.parse(new byte[] {'v', (byte) 0xff, '\n'}));
        assertTrue(e.getMessage().contains("UTF-8"));
    }

    @Test
    void successorKeepsStaticSectionsAndCountsUp() {
        PolicyGeneration g1 = PolicyGeneration.first(Policy.parse(FULL));
        PolicyGeneration g2 = g1.successor(Policy.parse(FULL.replace("read-only", "full")));
        assertEquals(2, g2.number());
        assertTrue(g2.decideRequest(who("/usr/bin/curl"), GITHUB, "DELETE", "/x").allowed());
        assertFalse(g1.decideRequest(who("/usr/bin/curl"), GITHUB, "DELETE", "/x").allowed());
        PolicyException e = assertThrows(PolicyException.class,
                () -> g1.successor(Policy.parse(FULL.replace("read_write: [/tmp, /sandbox]", "read_write: [/tmp]"))));
        assertTrue(e.getMessage().contains("fixed at creation"));
        assertThrows(PolicyException.class, () -> PolicyGeneration.of(0, Policy.parse(FULL)));
    }

    @Test
    void denyByRuleNamesTheRuleAndMapsToPolicyErrno() {
        Decision d = PolicyGeneration.first(Policy.parse(FULL)).decideRequest(who("/usr/bin/curl"), GITHUB, "HEAD", "/admin/x?y");
        Decision.Deny deny = assertInstanceOf(Decision.Deny.class, d);
        assertEquals(DenyCause.DENY_RULE, deny.cause());
        RuleRef rule = deny.rule().orElseThrow();
        assertEquals("network_policies.github.endpoints[0].deny_rules[0]", rule.path());
        assertEquals(RuleRef.Kind.DENY_RULE, rule.kind());
        assertEquals(19, rule.line());
        assertEquals("GET /admin/**", rule.description());
        assertEquals("github", rule.block());
        assertEquals("api.github.com", rule.hostPattern());
        assertEquals(DenyReason.POLICY, deny.cause().isolationReason());
        assertEquals(DenyReason.IDENTITY_UNRESOLVED, DenyCause.IDENTITY_UNRESOLVED.isolationReason());
    }

    @Test
    void destinationsValidate() {
        assertThrows(PolicyException.class, () -> Destination.of("10.0.0.1", InetAddress.ofLiteral("10.0.0.1"), 443));
        assertThrows(PolicyException.class, () -> Destination.unresolved("a b", 443));
        assertThrows(PolicyException.class, () -> Destination.unresolved("a.com", 0));
        assertThrows(PolicyException.class, () -> Destination.unresolved("a.com", 65536));
        assertEquals(Optional.of("a.com"), Destination.unresolved("A.com.", 1).host());
        assertEquals(Optional.empty(), Destination.unresolved("a.com", 1).address());
    }

    @Test
    void decisionsAreDeterministicAndThreadSafe() throws Exception {
        PolicyGeneration g = PolicyGeneration.first(Policy.parse(FULL));
        List<String> targets = List.of("/", "/admin", "/repos/a", "/a/../admin/x", "/%2e%2e", "/x;y");
        List<Decision> expected = new ArrayList<>();
        for (String t : targets) {
            expected.add(g.decideRequest(who("/usr/bin/curl"), GITHUB, "GET", t));
        }
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            List<Future<Boolean>> results = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                results.add(pool.submit(() -> {
                    for (int n = 0; n < 20_000; n++) {
                        int k = n % targets.size();
                        if (!g.decideRequest(who("/usr/bin/curl"), GITHUB, "GET", targets.get(k)).equals(expected.get(k))) {
                            return false;
                        }
                    }
                    return true;
                }));
            }
            for (Future<Boolean> f : results) {
                assertTrue(f.get(60, TimeUnit.SECONDS));
            }
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void problemsCarryPathLineAndColumn() {
        PolicyException e = assertThrows(PolicyException.class, () -> Policy.parse("version: 1\nprocess:\n  run_as_user: -3\n"));
        PolicyProblem p = e.problems().getFirst();
        assertEquals("process.run_as_user", p.path());
        assertEquals(3, p.line());
        assertEquals(16, p.column());
        assertTrue(p.toString().startsWith("line 3, column 16: process.run_as_user: "));
    }
}
