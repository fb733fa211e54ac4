package openshell.tests.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.Executable;
import openshell.isolation.IdentityResolution;
import openshell.policy.AccountRef;
import openshell.policy.Decision;
import openshell.policy.DenyCause;
import openshell.policy.Destination;
import openshell.policy.Inspection;
import openshell.policy.LandlockCompatibility;
import openshell.policy.Policy;
import openshell.policy.PolicyGeneration;
import openshell.policy.PolicyProblem;
import org.junit.jupiter.api.Test;

/** The example policies are valid and do what their comments say. */
class ExamplePoliciesTest {
    private static Path dir() {
        return Path.of(System.getProperty("openshell.examples.dir", "../../examples/policies"));
    }

    private static PolicyGeneration load(String name) throws IOException {
        return PolicyGeneration.first(Policy.parse(Files.readAllBytes(dir().resolve(name))));
    }

    private static IdentityResolution who(String path, Executable... ancestors) {
        return new IdentityResolution.Resolved(new BinaryIdentity(Executable.of(path), List.of(ancestors), List.of()));
    }

    private static final InetAddress PUBLIC = InetAddress.ofLiteral("140.82.112.5");

    @Test
    void everyExampleIsValid() throws IOException {
        List<Path> files;
        try (Stream<Path> s = Files.list(dir())) {
            files = s.filter(p -> p.toString().endsWith(".yaml")).toList();
        }
        assertTrue(files.size() >= 2, "examples in " + dir().toAbsolutePath());
        for (Path f : files) {
            List<PolicyProblem> problems = Policy.check(Files.readAllBytes(f));
            assertEquals(List.of(), problems, f.toString());
        }
    }

    @Test
    void codingAgent() throws IOException {
        PolicyGeneration g = load("coding-agent.yaml");
        assertEquals(LandlockCompatibility.HARD_REQUIREMENT, g.policy().landlock());
        assertTrue(g.policy().filesystem().includeWorkdir());
        Destination github = Destination.of("api.github.com", PUBLIC, 443);
        Decision.Allow conn = assertInstanceOf(Decision.Allow.class, g.decideConnection(who("/usr/bin/gh"), github));
        assertEquals(Inspection.HTTP, conn.inspection());
        assertTrue(g.decideRequest(who("/usr/bin/gh"), github, "GET", "/repos/acme/app/pulls").allowed());
        assertTrue(g.decideRequest(who("/usr/bin/gh"), github, "POST", "/repos/acme/app/issues/7/comments").allowed());
        assertFalse(g.decideRequest(who("/usr/bin/gh"), github, "POST", "/repos/acme/app/issues").allowed());
        Decision.Deny secrets = assertInstanceOf(Decision.Deny.class,
                g.decideRequest(who("/usr/bin/git"), github, "GET", "/repos/acme/app/actions/secrets/TOKEN"));
        assertEquals("network_policies.guardrails.endpoints[0].deny_rules[0]", secrets.rule().orElseThrow().path());
        assertTrue(g.decideConnection(who("/usr/lib/git-core/git-remote-https"),
                Destination.of("raw.githubusercontent.com", PUBLIC, 443)).allowed());
        assertEquals(DenyCause.BINARY_NOT_ALLOWED, ((Decision.Deny) g.decideConnection(who("/usr/bin/curl"), github)).cause());
        Destination npm = Destination.of("registry.npmjs.org", PUBLIC, 443);
        assertTrue(g.decideConnection(who("/bin/sh", Executable.of("/usr/bin/node")), npm).allowed());
        Destination pypi = Destination.of("pypi.org", PUBLIC, 443);
        assertEquals(DenyCause.DIGEST_MISMATCH, ((Decision.Deny) g.decideConnection(who("/opt/venv/bin/pip"), pypi)).cause());
        assertTrue(g.decideConnection(new IdentityResolution.Resolved(BinaryIdentity.of(Executable.of("/opt/venv/bin/pip",
                "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"))), pypi).allowed());
    }

    @Test
    void internalDatabase() throws IOException {
        PolicyGeneration g = load("internal-database.yaml");
        assertEquals(Optional.of(new AccountRef.Name("sandbox")), g.policy().process().runAsUser());
        InetAddress internal = InetAddress.ofLiteral("10.20.30.40");
        Decision.Allow pg = assertInstanceOf(Decision.Allow.class,
                g.decideConnection(who("/usr/bin/psql"), Destination.of("pg.corp.example", internal, 5432)));
        assertEquals(Inspection.OPAQUE, pg.inspection());
        assertTrue(pg.hostDeclaredExactly());
        Destination metrics = Destination.of("metrics.corp.example", internal, 8080);
        assertTrue(g.decideRequest(who("/usr/local/bin/agent"), metrics, "get", "/api/v1/query?q=up").allowed());
        assertFalse(g.decideRequest(who("/usr/local/bin/agent"), metrics, "POST", "/api/v1/admin/tsdb/delete").allowed());
        assertFalse(g.decideConnection(who("/usr/bin/psql"), Destination.of("pg.corp.example",
                InetAddress.ofLiteral("169.254.169.254"), 5432)).allowed());
    }
}
