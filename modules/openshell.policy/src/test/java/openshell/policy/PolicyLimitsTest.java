package openshell.policy;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;
import org.yaml.snakeyaml.DumperOptions;
import org.yaml.snakeyaml.nodes.ScalarNode;
import org.yaml.snakeyaml.nodes.Tag;

/** Every bound of the module, tested at the bound and one past it. */
class PolicyLimitsTest {
    private static final String ENDPOINT = "      - {host: api.example.com, port: 443, protocol: tcp}\n";
    private static final String BINARY = "      - {path: /usr/bin/curl}\n";

    static String block(String name, String endpoints, String binaries) {
        return "  " + name + ":\n    endpoints:\n" + endpoints + "    binaries:\n" + binaries;
    }

    static String doc(String networkPolicies) {
        return "version: 1\nnetwork_policies:\n" + networkPolicies;
    }

    static String repeat(int n, IntFunction<String> f) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < n; i++) {
            b.append(f.apply(i));
        }
        return b.toString();
    }

    /** Asserts the document at the bound is valid and one past it is rejected with a problem mentioning {@code why}. */
    static void atBound(IntFunction<String> document, int bound, String why) {
        assertDoesNotThrow(() -> Policy.parse(document.apply(bound)), "at the bound " + bound);
        PolicyException e = assertThrows(PolicyException.class, () -> Policy.parse(document.apply(bound + 1)));
        assertTrue(e.problems().stream().anyMatch(p -> p.message().contains(why)), why + " not in " + e.problems());
    }

    @Test
    void networkPolicies() {
        atBound(n -> doc(repeat(n, i -> block("b" + i, ENDPOINT, BINARY))), Policy.MAX_NETWORK_POLICIES,
                "at most " + Policy.MAX_NETWORK_POLICIES + " blocks");
    }

    @Test
    void endpoints() {
        atBound(n -> doc(block("b", repeat(n, i -> "      - {host: h" + i + ".example.com, port: 443, protocol: tcp}\n"), BINARY)),
                Policy.MAX_ENDPOINTS, "at most " + Policy.MAX_ENDPOINTS + " entries");
    }

    @Test
    void binaries() {
        atBound(n -> doc(block("b", ENDPOINT, repeat(n, i -> "      - {path: /usr/bin/b" + i + "}\n"))),
                Policy.MAX_BINARIES, "at most " + Policy.MAX_BINARIES + " entries");
    }

    @Test
    void rulesAndDenyRules() {
        for (String list : List.of("rules", "deny_rules")) {
            atBound(n -> doc(block("b", "      - host: api.example.com\n        port: 443\n        protocol: rest\n        "
                    + (list.equals("rules") ? "" : "access: read-only\n        ") + list + ":\n" + repeat(n, i -> "          - {method: GET, path: /p" + i + "}\n"), BINARY)),
                    Policy.MAX_RULES, "at most " + Policy.MAX_RULES + " entries");
        }
    }

    @Test
    void ports() {
        atBound(n -> doc(block("b", "      - host: api.example.com\n        protocol: tcp\n        ports: ["
                + String.join(", ", repeat(n, i -> (i + 1) + (i + 1 < n ? "," : "")).split(",")) + "]\n", BINARY)),
                Policy.MAX_PORTS, "at most " + Policy.MAX_PORTS + " entries");
    }

    @Test
    void filesystemPathsCountBothLists() {
        atBound(n -> "version: 1\nfilesystem_policy:\n  read_only:\n" + repeat(n / 2, i -> "    - /ro/p" + i + "\n")
                        + "  read_write:\n" + repeat(n - n / 2, i -> "    - /rw/p" + i + "\n"),
                Policy.MAX_FILESYSTEM_PATHS, "read_only and read_write together");
    }

    @Test
    void blockNameLength() {
        atBound(n -> doc(block("b".repeat(n), ENDPOINT, BINARY)), Policy.MAX_NAME_LENGTH, "a block key is 1 to");
    }

    @Test
    void pathLength() {
        atBound(n -> doc(block("b", ENDPOINT, "      - path: /" + "a".repeat(n - 1) + "\n")), Policy.MAX_PATH_LENGTH,
                "at most " + Policy.MAX_PATH_LENGTH + " characters");
        atBound(n -> "version: 1\nfilesystem_policy:\n  read_only: [/" + "a".repeat(n - 1) + "]\n", Policy.MAX_PATH_LENGTH,
                "at most " + Policy.MAX_PATH_LENGTH + " characters");
    }

    @Test
    void pathPatternLength() {
        atBound(n -> doc(block("b", "      - host: api.example.com\n        port: 443\n        protocol: rest\n        rules:\n"
                + "          - {method: GET, path: /" + "a".repeat(n - 1) + "}\n", BINARY)),
                Policy.MAX_PATH_PATTERN_LENGTH, "at most " + Policy.MAX_PATH_PATTERN_LENGTH + " characters");
    }

    @Test
    void documentBytes() {
        String base = doc(block("b", ENDPOINT, BINARY));
        IntFunction<String> padded = n -> {
            StringBuilder b = new StringBuilder(n).append(base);
            while (n - b.length() > 80) {
                b.append('#').append("x".repeat(78)).append('\n');
            }
            int rest = n - b.length() - 2;
            return b.append('#').append("x".repeat(rest)).append('\n').toString();
        };
        atBound(padded, Policy.MAX_DOCUMENT_BYTES, "bytes");
        assertEquals(Policy.MAX_DOCUMENT_BYTES, padded.apply(Policy.MAX_DOCUMENT_BYTES).getBytes(StandardCharsets.UTF_8).length);
    }

    @Test
    void nestingDepth() {
        // The root mapping holds an (unknown, so rejected) key whose value nests k flow lists: at the
        // bound the parser reads it and only the schema complains; one deeper the parser refuses.
        IntFunction<List<PolicyProblem>> nested = k -> Policy.check(("version: 1\nx: " + "[".repeat(k) + "]".repeat(k) + "\n")
                .getBytes(StandardCharsets.UTF_8));
        assertTrue(nested.apply(Policy.MAX_NESTING_DEPTH).stream().noneMatch(p -> p.message().contains("Nesting")),
                nested.apply(Policy.MAX_NESTING_DEPTH).toString());
        assertTrue(nested.apply(Policy.MAX_NESTING_DEPTH + 1).stream().anyMatch(p -> p.message().contains("Nesting")));
    }

    @Test
    void aliases() {
        atBound(n -> "version: 1\nnetwork_policies:\n  b0:\n    endpoints: [{host: h.example.com, port: 443, protocol: tcp}]\n"
                + "    binaries: &bins [{path: /usr/bin/curl}]\n"
                + repeat(n, i -> "  c" + i + ":\n    endpoints: [{host: h" + i + ".example.com, port: 443, protocol: tcp}]\n    binaries: *bins\n"),
                Policy.MAX_ALIASES, "aliases");
    }

    @Test
    void billionLaughsIsRejectedQuickly() {
        StringBuilder b = new StringBuilder("version: 1\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for (int i = 1; i < 10; i++) {
            b.append("a").append(i).append(": &a").append(i).append(" [");
            for (int j = 0; j < 10; j++) {
                b.append(j == 0 ? "" : ", ").append("*a").append(i - 1);
            }
            b.append("]\n");
        }
        List<PolicyProblem> problems = assertTimeoutPreemptively(Duration.ofSeconds(10),
                () -> Policy.check(b.toString().getBytes(StandardCharsets.UTF_8)));
        assertTrue(problems.stream().anyMatch(p -> p.message().contains("aliases")), problems.toString());
    }

    @Test
    void nodeBudget() {
        ScalarNode node = new ScalarNode(Tag.STR, "x", null, null, DumperOptions.ScalarStyle.PLAIN);
        PolicyReader reader = new PolicyReader();
        assertEquals(Policy.MAX_NODES, reader.countNodes(node, Policy.MAX_NODES));
        assertThrows(RuntimeException.class, () -> reader.countNodes(node, 1));
    }

    @Test
    void methodLength() {
        atBound(n -> doc(block("b", "      - host: api.example.com\n        port: 443\n        protocol: rest\n        rules:\n"
                + "          - {method: " + "M".repeat(n) + ", path: /}\n", BINARY)), Policy.MAX_METHOD_LENGTH, "not an HTTP method");
        Policy p = Policy.parse(doc(block("b", "      - {host: api.example.com, port: 443, protocol: rest, access: full}\n", BINARY)));
        PolicyGeneration g = PolicyGeneration.first(p);
        var who = new openshell.isolation.IdentityResolution.Resolved(
                openshell.isolation.BinaryIdentity.of(openshell.isolation.Executable.of("/usr/bin/curl")));
        Destination d = Destination.of("api.example.com", java.net.InetAddress.ofLiteral("93.184.216.34"), 443);
        assertTrue(g.decideRequest(who, d, "m".repeat(Policy.MAX_METHOD_LENGTH), "/").allowed());
        assertEquals(DenyCause.MALFORMED_REQUEST,
                ((Decision.Deny) g.decideRequest(who, d, "m".repeat(Policy.MAX_METHOD_LENGTH + 1), "/")).cause());
    }

    @Test
    void requestTargetLength() {
        Policy p = Policy.parse(doc(block("b", "      - {host: api.example.com, port: 443, protocol: rest, access: full}\n", BINARY)));
        PolicyGeneration g = PolicyGeneration.first(p);
        var who = new openshell.isolation.IdentityResolution.Resolved(
                openshell.isolation.BinaryIdentity.of(openshell.isolation.Executable.of("/usr/bin/curl")));
        Destination d = Destination.of("api.example.com", java.net.InetAddress.ofLiteral("93.184.216.34"), 443);
        String at = "/" + "a".repeat(Policy.MAX_REQUEST_TARGET_LENGTH - 1);
        assertTrue(g.decideRequest(who, d, "GET", at).allowed());
        Decision past = g.decideRequest(who, d, "GET", at + "a");
        assertEquals(DenyCause.MALFORMED_REQUEST, ((Decision.Deny) past).cause());
    }
}
