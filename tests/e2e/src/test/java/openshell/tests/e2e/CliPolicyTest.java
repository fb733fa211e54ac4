package openshell.tests.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code policy check} and {@code policy explain} on the shipped example, without a gateway. */
class CliPolicyTest {
    private static final Path EXAMPLE = Path.of("../../examples/policies/coding-agent.yaml").toAbsolutePath().normalize();

    @TempDir
    Path state;

    @Test
    void theExampleIsValidAndABrokenPolicyIsReportedWithLines() throws Exception {
        Cli.Result ok = Cli.run(state, "policy", "check", "--policy", EXAMPLE.toString());
        assertEquals(0, ok.exit(), ok.err());
        assertTrue(ok.out().contains("valid"), ok.out());

        Path bad = state.resolve("bad.yaml");
        Files.writeString(bad, "version: 1\nnetwork_policies:\n  x:\n    endpoints:\n      - host: api.example.com\n"
                + "        port: 99999\n        protocol: tcp\n    binaries:\n      - path: /usr/bin/curl\n");
        Cli.Result invalid = Cli.run(state, "policy", "check", "--policy", bad.toString());
        assertEquals(1, invalid.exit());
        assertTrue(invalid.out().contains(bad + ":6:15: network_policies.x.endpoints[0].port"), invalid.out());

        Cli.Result json = Cli.run(state, "--output", "json", "policy", "check", "--policy", bad.toString());
        assertTrue(json.out().contains("\"valid\":false") && json.out().contains("\"line\":6"), json.out());
    }

    @Test
    void explainNamesTheRuleOrTheReason() throws Exception {
        Cli.Result allowed = Cli.run(state, "policy", "explain", "--policy", EXAMPLE.toString(),
                "--binary", "/usr/bin/gh", "--host", "api.github.com", "--port", "443",
                "--method", "POST", "--path", "/repos/acme/x/issues/3/comments");
        assertEquals(0, allowed.exit(), allowed.err());
        // The rule that allows it, by its place and as written (the example uses upstream's rules: [{allow: ...}]).
        assertTrue(allowed.out().startsWith("ALLOW: allowed by network_policies.github.endpoints[0].rules[")
                && allowed.out().contains("(POST /repos/acme/*/issues/*/comments, line "), allowed.out());
        assertTrue(allowed.out().contains("block: github"), allowed.out());

        Cli.Result otherBinary = Cli.run(state, "policy", "explain", "--policy", EXAMPLE.toString(),
                "--binary", "/usr/bin/curl", "--host", "api.github.com", "--port", "443");
        assertEquals(5, otherBinary.exit());
        assertTrue(otherBinary.out().startsWith("DENY:") && otherBinary.out().contains("/usr/bin/curl"),
                otherBinary.out());

        Cli.Result l7 = Cli.run(state, "--output", "json", "policy", "explain", "--policy", EXAMPLE.toString(),
                "--binary", "/usr/bin/gh", "--host", "api.github.com", "--port", "443",
                "--method", "DELETE", "--path", "/repos/acme/x");
        assertEquals(5, l7.exit());
        assertTrue(l7.out().contains("\"decision\":\"deny\""), l7.out());

        Cli.Result metadata = Cli.run(state, "policy", "explain", "--policy", EXAMPLE.toString(),
                "--binary", "/usr/bin/gh", "--host", "169.254.169.254", "--port", "80");
        assertEquals(5, metadata.exit());

        Cli.Result usage = Cli.run(state, "policy", "explain", "--policy", EXAMPLE.toString(), "--binary", "/usr/bin/gh");
        assertEquals(2, usage.exit());
    }
}
