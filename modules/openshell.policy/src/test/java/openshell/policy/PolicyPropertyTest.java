package openshell.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.Executable;
import openshell.isolation.IdentityResolution;
import org.junit.jupiter.api.Test;

/** Properties checked on seeded random inputs (the seed is in each failure message). */
class PolicyPropertyTest {
    private static final long SEED = 0x5EED_0F_0BE11L;

    // ---------- a naive reference for globs: exponential backtracking, obviously right ----------

    /** '*' one segment or any characters within one, '**' zero or more segments. */
    static boolean refPath(List<String> pattern, List<String> path) {
        if (pattern.isEmpty()) {
            return path.isEmpty();
        }
        String head = pattern.getFirst();
        if (head.equals("**")) {
            for (int i = 0; i <= path.size(); i++) {
                if (refPath(pattern.subList(1, pattern.size()), path.subList(i, path.size()))) {
                    return true;
                }
            }
            return false;
        }
        return !path.isEmpty() && refSegment(head, path.getFirst())
                && refPath(pattern.subList(1, pattern.size()), path.subList(1, path.size()));
    }

    static boolean refSegment(String pattern, String text) {
        String regex = ("\\Q" + pattern.replace("*", "\\E.*\\Q") + "\\E");
        return text.matches(regex);
    }

    /** Host labels: '*' exactly one label, '**' one or more. */
    static boolean refHost(List<String> pattern, List<String> host) {
        if (pattern.isEmpty()) {
            return host.isEmpty();
        }
        String head = pattern.getFirst();
        if (head.equals("**")) {
            for (int i = 1; i <= host.size(); i++) {
                if (refHost(pattern.subList(1, pattern.size()), host.subList(i, host.size()))) {
                    return true;
                }
            }
            return false;
        }
        return !host.isEmpty() && (head.equals("*") || head.equals(host.getFirst()))
                && refHost(pattern.subList(1, pattern.size()), host.subList(1, host.size()));
    }

    private static <T> List<T> randomList(Random r, List<T> alphabet, int max) {
        int n = r.nextInt(max + 1);
        List<T> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(alphabet.get(r.nextInt(alphabet.size())));
        }
        return out;
    }

    @Test
    void pathGlobsAgreeWithTheReference() {
        Random r = new Random(SEED);
        List<String> tokens = List.of("a", "b", "ab", "*", "**", "a*", "*b", "a*b");
        List<String> segments = List.of("a", "b", "ab", "ba", "aab", "abb", "");
        for (int i = 0; i < 20_000; i++) {
            List<String> pattern = randomList(r, tokens, 6);
            List<String> path = randomList(r, segments, 7);
            boolean got = SegmentGlob.of("p", pattern.toArray(String[]::new)).matches(path.toArray(String[]::new));
            assertEquals(refPath(pattern, path), got, "seed " + SEED + " case " + i + ": " + pattern + " vs " + path);
        }
    }

    @Test
    void hostGlobsAgreeWithTheReference() {
        Random r = new Random(SEED + 1);
        List<String> labels = List.of("x", "y", "z", "*", "**");
        for (int i = 0; i < 20_000; i++) {
            List<String> pattern = new ArrayList<>(randomList(r, labels, 4));
            pattern.add(r.nextBoolean() ? "com" : "x");
            List<String> host = new ArrayList<>(randomList(r, List.of("x", "y", "z"), 5));
            host.add(r.nextBoolean() ? "com" : "x");
            List<String> problems = new ArrayList<>();
            HostNames.Pattern p = HostNames.parsePattern(String.join(".", pattern), problems);
            boolean wild = pattern.stream().anyMatch(l -> l.contains("*"));
            boolean refusedUpstream = wild && (pattern.size() < HostNames.MIN_WILDCARD_LABELS
                    || pattern.subList(1, pattern.size()).contains("**"));
            if (refusedUpstream) {
                // Upstream refuses these (a top-level-domain wildcard, '**' not as the whole first label).
                assertEquals(null, p, pattern + " must be refused");
                assertEquals(1, problems.size(), problems.toString());
                continue;
            }
            boolean got = switch (p) {
                case HostNames.Exact e -> e.name().equals(String.join(".", host));
                case HostNames.Wildcard w -> w.matches(String.join(".", host));
                default -> throw new AssertionError(p + " " + problems);
            };
            assertEquals(refHost(pattern, host), got, "seed " + SEED + " case " + i + ": " + pattern + " vs " + host);
        }
    }

    // ---------- normalization ----------

    @Test
    void normalizationIsIdempotentAndCanonical() {
        Random r = new Random(SEED + 2);
        String[] pieces = {"/", "/", "//", ".", "..", "a", "b", "%2e", "%2E", "%2f", "%41", "%7e", "%25", "%3b", "%zz", "%", ";",
                "?", "#", "\\", "~", "*", ":", "@", "%c3%a9", " ", "\u00e9", "%00"};
        int accepted = 0;
        for (int i = 0; i < 30_000; i++) {
            StringBuilder t = new StringBuilder(r.nextInt(8) == 0 ? "" : "/");
            int n = r.nextInt(12);
            for (int k = 0; k < n; k++) {
                t.append(pieces[r.nextInt(pieces.length)]);
            }
            String once;
            try {
                once = RequestPaths.normalize(t.toString());
            } catch (RequestPaths.Refused e) {
                continue;
            }
            accepted++;
            String where = "seed " + SEED + " case " + i + ": '" + t + "' -> '" + once + "'";
            try {
                assertEquals(once, RequestPaths.normalize(once), where);
            } catch (RequestPaths.Refused e) {
                throw new AssertionError(where + " is refused on the second pass: " + e.getMessage());
            }
            assertTrue(once.startsWith("/"), where);
            assertFalse(once.contains("//") || once.contains("/./") || once.contains("/../") || once.endsWith("/.")
                    || once.endsWith("/.."), where);
            assertFalse(once.toUpperCase(Locale.ROOT).contains("%2F") || once.contains("?") || once.contains("#"), where);
        }
        assertTrue(accepted > 1000, "too few accepted inputs to mean anything: " + accepted);
    }

    @Test
    void equivalentSpellingsNormalizeAlike() throws Exception {
        Random r = new Random(SEED + 3);
        String unreserved = "abcxyzABC019-._~";
        for (int i = 0; i < 5_000; i++) {
            List<String> segs = new ArrayList<>();
            int n = 1 + r.nextInt(5);
            for (int k = 0; k < n; k++) {
                StringBuilder s = new StringBuilder();
                int len = 1 + r.nextInt(4);
                for (int c = 0; c < len; c++) {
                    s.append(unreserved.charAt(r.nextInt(unreserved.length())));
                }
                String seg = s.toString();
                segs.add(seg.equals(".") || seg.equals("..") ? "d" : seg);
            }
            String canonical = "/" + String.join("/", segs);
            String bare = canonical;
            StringBuilder spelled = new StringBuilder();
            for (String s : segs) {
                switch (r.nextInt(6)) {
                    case 0 -> spelled.append("//");
                    case 1 -> spelled.append("/./");
                    case 2 -> spelled.append("/zz/%2e%2E/");
                    default -> spelled.append('/');
                }
                int enc = r.nextInt(s.length() + 1);
                for (int c = 0; c < s.length(); c++) {
                    char ch = s.charAt(c);
                    spelled.append(c == enc ? String.format("%%%02x", (int) ch) : String.valueOf(ch));
                }
            }
            boolean directory = r.nextBoolean();
            if (directory) {
                // Upstream keeps a trailing slash, so the canonical form does too.
                spelled.append('/');
                canonical = canonical + "/";
            }
            if (r.nextBoolean()) {
                spelled.append("?q=/../x");
            }
            assertEquals(canonical, RequestPaths.normalize(spelled.toString()), "seed " + SEED + " case " + i + ": " + spelled + " (" + bare + ")");
        }
    }

    // ---------- engine: deny wins, case folding ----------

    private static final List<String> BINARIES = List.of("/bin/a", "/bin/b", "/bin/c");
    private static final List<String> METHODS = List.of("GET", "POST", "DELETE", "*");
    private static final List<String> PATTERNS = List.of("/**", "/x", "/x/*", "/x/**", "/*/y", "/y/*/z", "/x*");
    private static final List<String> PATHS = List.of("/", "/x", "/x/y", "/x/y/z", "/y/q/z", "/xa", "/q/y");

    private record Rule(String method, String path) {
    }

    private record Block(String key, List<String> binaries, List<Rule> allows, List<Rule> denies) {
    }

    private static boolean ruleMatches(Rule rule, String method, String path) {
        List<String> segs = path.equals("/") ? List.of() : List.of(path.substring(1).split("/"));
        List<String> pat = new ArrayList<>(rule.path().equals("/") ? List.of() : List.of(rule.path().substring(1).split("/")));
        boolean methodOk = rule.method().equals("*") || rule.method().equals(method)
                || (method.equals("HEAD") && rule.method().equals("GET"));
        if (rule.path().equals("/**") || rule.path().equals("**")) {
            return methodOk;
        }
        if (!pat.isEmpty() && pat.getLast().equals("**")) {
            // Upstream: a trailing "/**" needs at least one segment, so "/x/**" never matches "/x".
            pat.add(pat.size() - 1, "*");
        }
        return methodOk && refPath(pat, segs);
    }

    @Test
    void denyRulesOfEveryMatchingBlockWin() {
        Random r = new Random(SEED + 4);
        InetAddress address = InetAddress.ofLiteral("93.184.216.34");
        Destination where = Destination.of("h.example.com", address, 443);
        int denied = 0;
        int allowed = 0;
        for (int iteration = 0; iteration < 300; iteration++) {
            List<Block> blocks = new ArrayList<>();
            StringBuilder yaml = new StringBuilder("version: 1\nnetwork_policies:\n");
            int nBlocks = 1 + r.nextInt(4);
            for (int b = 0; b < nBlocks; b++) {
                List<String> bins = new ArrayList<>(randomList(r, BINARIES, 2));
                if (bins.isEmpty()) {
                    bins.add(BINARIES.get(r.nextInt(3)));
                }
                List<Rule> allows = new ArrayList<>();
                for (int k = r.nextInt(3); k > 0; k--) {
                    allows.add(new Rule(METHODS.get(r.nextInt(METHODS.size())), PATTERNS.get(r.nextInt(PATTERNS.size()))));
                }
                List<Rule> denies = new ArrayList<>();
                for (int k = r.nextInt(3); k > 0; k--) {
                    denies.add(new Rule(METHODS.get(r.nextInt(METHODS.size())), PATTERNS.get(r.nextInt(PATTERNS.size()))));
                }
                if (allows.isEmpty()) {
                    // A rest endpoint needs rules or access (upstream); this one matches none of PATHS.
                    allows.add(new Rule("GET", "/never"));
                }
                // Keys descend in file order, so the smallest key is never simply the first block written.
                String key = "k" + (char) ('z' - b);
                blocks.add(new Block(key, bins, allows, denies));
                yaml.append("  ").append(key).append(":\n    endpoints:\n      - host: h.example.com\n        port: 443\n        protocol: rest\n");
                appendRules(yaml, "rules", allows);
                appendRules(yaml, "deny_rules", denies);
                yaml.append("    binaries:\n");
                for (String bin : bins) {
                    yaml.append("      - path: ").append(bin).append('\n');
                }
            }
            PolicyGeneration g = PolicyGeneration.first(Policy.parse(yaml.toString()));
            for (int q = 0; q < 30; q++) {
                String bin = BINARIES.get(r.nextInt(3));
                String method = List.of("GET", "HEAD", "POST", "DELETE", "PUT").get(r.nextInt(5));
                String path = PATHS.get(r.nextInt(PATHS.size()));
                List<Block> mine = blocks.stream().filter(b -> b.binaries().contains(bin)).toList();
                String expected;
                if (mine.isEmpty()) {
                    expected = "BINARY_NOT_ALLOWED";
                } else if (mine.stream().anyMatch(b -> b.denies().stream().anyMatch(d -> ruleMatches(d, method, path)))) {
                    expected = "DENY_RULE";
                } else if (mine.stream().anyMatch(b -> b.allows().stream().anyMatch(a -> ruleMatches(a, method, path)))) {
                    expected = "ALLOW";
                } else {
                    expected = "NO_RULE";
                }
                Decision d = g.decideRequest(new IdentityResolution.Resolved(BinaryIdentity.of(Executable.of(bin))), where, method, path);
                String got = d instanceof Decision.Deny deny ? deny.cause().name() : "ALLOW";
                // Upstream reports the lexicographically smallest key among the blocks that decided.
                String expectedBlock = switch (expected) {
                    case "DENY_RULE" -> mine.stream().filter(b -> b.denies().stream().anyMatch(x -> ruleMatches(x, method, path)))
                            .map(Block::key).min(String::compareTo).orElseThrow();
                    case "ALLOW" -> mine.stream().filter(b -> b.allows().stream().anyMatch(x -> ruleMatches(x, method, path)))
                            .map(Block::key).min(String::compareTo).orElseThrow();
                    default -> null;
                };
                if (expectedBlock != null && expected.equals(got)) {
                    String block = d instanceof Decision.Allow a ? a.rule().block() : ((Decision.Deny) d).rule().orElseThrow().block();
                    assertEquals(expectedBlock, block, "seed " + SEED + " iteration " + iteration + ": reported block under\n" + yaml);
                }
                assertEquals(expected, got, "seed " + SEED + " iteration " + iteration + ": " + bin + " " + method + " " + path
                        + " under\n" + yaml + "\n" + d.reason());
                if (got.equals("DENY_RULE")) {
                    denied++;
                } else if (got.equals("ALLOW")) {
                    allowed++;
                }
            }
        }
        assertTrue(denied > 100 && allowed > 100, "the generator must exercise both outcomes: " + denied + " / " + allowed);
    }

    private static void appendRules(StringBuilder yaml, String key, List<Rule> rules) {
        if (rules.isEmpty()) {
            return;
        }
        yaml.append("        ").append(key).append(":\n");
        for (Rule rule : rules) {
            yaml.append("          - {method: \"").append(rule.method()).append("\", path: \"").append(rule.path()).append("\"}\n");
        }
    }

    @Test
    void hostAndMethodCaseNeverChangesADecision() {
        Random r = new Random(SEED + 5);
        PolicyGeneration g = PolicyGeneration.first(Policy.parse("""
                version: 1
                network_policies:
                  b:
                    endpoints:
                      - {host: Api.Example.com, port: 443, protocol: rest, access: read-only, deny_rules: [{method: get, path: /secret/**}]}
                      - {host: "*.CDN.example.com", port: 443, protocol: rest, rules: [{method: Post, path: /up/*}]}
                    binaries:
                      - path: /bin/a
                """));
        IdentityResolution who = new IdentityResolution.Resolved(BinaryIdentity.of(Executable.of("/bin/a")));
        InetAddress address = InetAddress.ofLiteral("93.184.216.34");
        List<String> hosts = List.of("api.example.com", "x.cdn.example.com", "other.example.com");
        List<String> methods = List.of("get", "head", "post", "delete", "options");
        List<String> paths = List.of("/", "/secret/x", "/up/f", "/up/f/g", "/public");
        for (int i = 0; i < 5_000; i++) {
            String host = hosts.get(r.nextInt(hosts.size()));
            String method = methods.get(r.nextInt(methods.size()));
            String path = paths.get(r.nextInt(paths.size()));
            Decision canonical = g.decideRequest(who, Destination.of(host, address, 443), method.toUpperCase(Locale.ROOT), path);
            Decision folded = g.decideRequest(who, Destination.of(randomCase(r, host), address, 443), randomCase(r, method), path);
            assertEquals(canonical.allowed(), folded.allowed(), "seed " + SEED + " case " + i);
            assertEquals(canonical instanceof Decision.Allow a ? a.rule() : ((Decision.Deny) canonical).cause(),
                    folded instanceof Decision.Allow a ? a.rule() : ((Decision.Deny) folded).cause(), "seed " + SEED + " case " + i);
            Decision dns = g.decideName(who, randomCase(r, host));
            assertEquals(g.decideName(who, host).allowed(), dns.allowed());
        }
    }

    private static String randomCase(Random r, String s) {
        StringBuilder b = new StringBuilder(s.length());
        for (char c : s.toCharArray()) {
            b.append(r.nextBoolean() ? Character.toUpperCase(c) : c);
        }
        return b.toString();
    }
}
