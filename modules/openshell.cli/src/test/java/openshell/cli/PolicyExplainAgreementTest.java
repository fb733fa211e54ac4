package openshell.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Random;

import jakarta.json.JsonObject;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.Executable;
import openshell.isolation.IdentityResolution;
import openshell.policy.Decision;
import openshell.policy.Destination;
import openshell.policy.Policy;
import openshell.policy.PolicyGeneration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code policy explain} must give the decision the supervisor's live path gives (issue 34): for
 * random binaries, ancestors, hosts, ports, methods and targets with queries, the explain command,
 * fed the same inputs on its command line, prints exactly what {@code decideRequest} (the call the
 * HTTP relay makes) or {@code decideConnection} (the mediation's call) answers.
 */
class PolicyExplainAgreementTest {
    private static final long SEED = 0x0E4_91A1L;
    /** Random questions asked; each is one explain run and one live decision. */
    private static final int QUESTIONS = 3_000;

    private static final String POLICY = """
            version: 1
            network_policies:
              github:
                name: GitHub
                endpoints:
                  - host: api.github.com
                    port: 443
                    protocol: rest
                    rules:
                      - allow: {method: GET, path: "/repos/**"}
                      - allow: {method: POST, path: "/repos/*/*/issues", query: {draft: {any: ["false", "no"]}}}
                    deny_rules:
                      - {method: "*", path: "/repos/*/*/hooks/**"}
                  - {host: "*.githubusercontent.com", port: 443, protocol: rest, access: read-only}
                binaries:
                  - path: /usr/bin/gh
                  - path: /usr/lib/git-core/*
              audit:
                endpoints:
                  - {host: "**.audit.example.com", ports: [443, 8443], protocol: rest, enforcement: audit, access: read-only}
                binaries:
                  - path: /usr/local/bin/claude
              db:
                endpoints:
                  - {host: db.example.com, port: 5432, protocol: tcp}
                binaries:
                  - path: /usr/bin/psql
            """;

    private static final List<String> BINARIES = List.of("/usr/bin/gh", "/usr/lib/git-core/git-remote-https",
            "/usr/local/bin/claude", "/usr/bin/psql", "/usr/bin/curl", "/bin/sh");
    private static final List<String> HOSTS = List.of("api.github.com", "API.GitHub.com", "raw.githubusercontent.com",
            "x.y.audit.example.com", "audit.example.com", "db.example.com", "evil.example.com", "api.github.com.evil.net");
    private static final List<String> ADDRESSES = List.of("140.82.112.5", "10.0.0.5", "127.0.0.1", "93.184.216.34");
    private static final List<Integer> PORTS = List.of(443, 8443, 5432, 80);
    /** Binary, host, port and address that one block allows together. */
    private static final List<String[]> FITTING = List.of(new String[] {"/usr/bin/gh", "api.github.com", "443", "140.82.112.5"},
            new String[] {"/usr/lib/git-core/git-remote-https", "raw.githubusercontent.com", "443", "140.82.112.5"},
            new String[] {"/usr/local/bin/claude", "x.y.audit.example.com", "8443", "93.184.216.34"},
            new String[] {"/usr/bin/psql", "db.example.com", "5432", "10.0.0.5"});
    private static final List<String> METHODS = List.of("GET", "get", "HEAD", "POST", "DELETE", "OPTIONS", "PROPFIND", "GE T");
    private static final List<String> PATHS = List.of("/", "/repos", "/repos/", "/repos/a/b/issues", "/repos/a/b/issues?draft=no",
            "/repos/a/b/issues?draft=yes", "/repos/a/b/hooks/1", "/repos/a/b/%68ooks/1", "/repos/x/../a/b/hooks/2",
            "/repos/a;x/b", "/a%2Fb", "/../x", "/repos/a?q=%zz", "/x?draft=false");

    @TempDir
    Path dir;

    /** Captures what explain prints. */
    private static final class Captured implements PolicyCommands.Output {
        JsonObject body;
        final List<String> lines = new ArrayList<>();

        @Override
        public void print(JsonObject json, Runnable human) {
            body = json;
            human.run();
        }

        @Override
        public void line(String text) {
            lines.add(text);
        }
    }

    @Test
    void explainGivesTheLiveDecisionForRandomRequests() throws IOException {
        Path file = Files.writeString(dir.resolve("policy.yaml"), POLICY);
        PolicyGeneration live = PolicyGeneration.first(Policy.parse(POLICY));
        Random r = new Random(SEED);
        int allowed = 0;
        int denied = 0;
        for (int i = 0; i < QUESTIONS; i++) {
            String binary = pick(r, BINARIES);
            List<String> ancestors = new ArrayList<>();
            for (int k = r.nextInt(3); k > 0; k--) {
                ancestors.add(pick(r, BINARIES));
            }
            String host = pick(r, HOSTS);
            String address = pick(r, ADDRESSES);
            int port = pick(r, PORTS);
            if (r.nextBoolean()) {
                // Half the questions fit a block, so allows are exercised as much as denials.
                String[] fit = pick(r, FITTING);
                binary = fit[0];
                host = fit[1];
                port = Integer.parseInt(fit[2]);
                address = fit[3];
            }
            boolean request = r.nextInt(4) != 0;
            String method = pick(r, METHODS);
            String target = pick(r, PATHS);

            List<Executable> chain = ancestors.stream().map(Executable::of).toList();
            IdentityResolution who = new IdentityResolution.Resolved(new BinaryIdentity(Executable.of(binary), chain, List.of()));
            Destination where = Destination.of(host, InetAddress.ofLiteral(address), port);
            Decision expected = request ? live.decideRequest(who, where, method, target) : live.decideConnection(who, where);

            Deque<String> args = new ArrayDeque<>(List.of("--policy", file.toString(), "--binary", binary, "--host", host,
                    "--address", address, "--port", Integer.toString(port)));
            ancestors.forEach(a -> args.addAll(List.of("--ancestor", a)));
            if (request) {
                args.addAll(List.of("--method", method, "--path", target));
            }
            Captured out = new Captured();
            int code = PolicyCommands.explain(args, out);
            String where2 = "seed " + SEED + " question " + i + ": " + binary + " " + ancestors + " " + host + "/" + address
                    + ":" + port + (request ? " " + method + " " + target : "");
            assertEquals(PolicyCommands.describe(expected), out.body, where2);
            assertEquals(expected.allowed() ? 0 : PolicyCommands.DENIED, code, where2);
            if (expected.allowed()) {
                allowed++;
            } else {
                denied++;
            }
        }
        assertTrue(allowed > QUESTIONS / 20 && denied > QUESTIONS / 20, "both outcomes exercised: " + allowed + " / " + denied);
    }

    @Test
    void explainTakesADigestAndReportsTheBlockAndAnAuditedDenial() throws IOException {
        Path file = Files.writeString(dir.resolve("policy.yaml"), POLICY);
        Captured out = new Captured();
        int code = PolicyCommands.explain(new ArrayDeque<>(List.of("--policy", file.toString(), "--binary", "/bin/sh",
                "--sha256", "a".repeat(64), "--ancestor", "/usr/local/bin/claude", "--host", "a.audit.example.com",
                "--port", "8443", "--method", "POST", "--path", "/x?y=1")), out);
        assertEquals(0, code, out.lines.toString());
        assertEquals("audit", out.body.getString("block"));
        assertEquals("NO_RULE", out.body.getJsonObject("wouldDeny").getString("cause"));
        assertTrue(out.lines.contains("block: audit"), out.lines.toString());
    }

    @Test
    void checkSaysPlainlyThatDnsAnswersArePerBinaryAndNamesAuditedEndpoints() throws IOException {
        Path file = Files.writeString(dir.resolve("policy.yaml"), POLICY);
        Captured out = new Captured();
        assertEquals(0, PolicyCommands.check(new ArrayDeque<>(List.of("--policy", file.toString())), out));
        assertTrue(out.lines.stream().anyMatch(l -> l.contains("getent") && l.contains("nslookup") && l.contains("per binary")),
                out.lines.toString());
        assertTrue(out.lines.stream().anyMatch(l -> l.contains("network_policies.audit.endpoints[0]") && l.contains("audit")),
                out.lines.toString());
        assertEquals(2, out.body.getJsonArray("notes").size());
    }

    private static <T> T pick(Random r, List<T> from) {
        return from.get(r.nextInt(from.size()));
    }
}
