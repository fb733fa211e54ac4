package openshell.policy;

import java.io.StringReader;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Pattern;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.composer.Composer;
import org.yaml.snakeyaml.parser.ParserImpl;
import org.yaml.snakeyaml.reader.StreamReader;
import org.yaml.snakeyaml.resolver.Resolver;
import org.yaml.snakeyaml.error.Mark;
import org.yaml.snakeyaml.error.MarkedYAMLException;
import org.yaml.snakeyaml.nodes.MappingNode;
import org.yaml.snakeyaml.nodes.Node;
import org.yaml.snakeyaml.nodes.NodeTuple;
import org.yaml.snakeyaml.nodes.ScalarNode;
import org.yaml.snakeyaml.nodes.SequenceNode;
import org.yaml.snakeyaml.nodes.Tag;

/**
 * Reads a policy from SnakeYAML's node graph (never its object constructor, so no tag can build
 * an object) and validates it against the schema in one pass that collects every problem with
 * its YAML path and line. One instance reads one document.
 */
final class PolicyReader {
    /** Upstream's keys are free-form; these survive as YAML paths and audit fields ("_provider_" stays reserved). */
    private static final Pattern BLOCK_NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9_.-]*");
    private static final Pattern SHA256 = Pattern.compile("[0-9a-fA-F]{64}");
    private static final Pattern METHOD = Pattern.compile("[A-Za-z][A-Za-z0-9_-]{0," + (HttpMethods.MAX_LENGTH - 1) + "}");
    private static final Pattern NUMERIC_ID = Pattern.compile("[1-9][0-9]{0,9}");

    /** The presets as upstream defines them for REST: read-only never writes, read-write never deletes. */
    static final Set<String> READ_ONLY = Set.of("GET", "HEAD", "OPTIONS");
    static final Set<String> READ_WRITE = Set.of("GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH");

    private static final Set<String> ROOT_KEYS = Set.of("version", "filesystem_policy", "landlock", "process",
            "network_policies");
    private static final Set<String> FS_KEYS = Set.of("read_only", "read_write", "include_workdir");
    private static final Set<String> LANDLOCK_KEYS = Set.of("compatibility");
    private static final Set<String> PROCESS_KEYS = Set.of("run_as_user", "run_as_group");
    private static final Set<String> BLOCK_KEYS = Set.of("name", "endpoints", "binaries");
    private static final Set<String> ENDPOINT_KEYS = Set.of("name", "host", "port", "ports", "protocol", "enforcement",
            "access", "rules", "deny_rules");
    private static final Set<String> RULE_KEYS = Set.of("method", "path", "query");
    private static final Set<String> BINARY_KEYS = Set.of("path", "ancestor", "sha256");
    private static final Set<String> UPSTREAM_PROTOCOLS = Set.of("websocket", "graphql", "mcp", "json-rpc");

    /**
     * Upstream fields this engine does not apply: refused by name, never ignored, with what to do
     * instead.
     */
    private static final Map<String, String> UPSTREAM_ONLY = Map.ofEntries(
            Map.entry("network_middlewares", "middleware does not run here; remove the section"),
            Map.entry("tls", "this engine has no TLS mode to choose; remove tls (a rest endpoint is inspected as the"
                    + " supervisor relays it, a tcp endpoint never)"),
            Map.entry("allowed_ips", "address pinning is not implemented; private addresses are reachable only through an"
                    + " endpoint that names the exact host"),
            Map.entry("path", "endpoint selection by path is not implemented; put the path in the endpoint's rules"),
            Map.entry("allow_encoded_slash", "an encoded slash (%2F) in a request path is always refused here"),
            Map.entry("credential_binding", "credentials are bound to endpoints in the gateway's provider configuration"),
            Map.entry("request_body_credential_rewrite", "credential placeholders are replaced in headers only"),
            Map.entry("websocket_credential_rewrite", "WebSocket is not inspected here"),
            Map.entry("allow_uninspected_credentials", "credentials are sent only on inspected requests"),
            Map.entry("credential_signing", "request signing is not implemented"),
            Map.entry("signing_service", "request signing is not implemented"),
            Map.entry("signing_region", "request signing is not implemented"),
            Map.entry("persisted_queries", "GraphQL is not inspected here; use protocol: rest rules"),
            Map.entry("graphql_persisted_queries", "GraphQL is not inspected here; use protocol: rest rules"),
            Map.entry("graphql_max_body_bytes", "GraphQL is not inspected here; use protocol: rest rules"),
            Map.entry("mcp", "MCP is not inspected here; use protocol: rest rules"),
            Map.entry("json_rpc", "JSON-RPC is not inspected here; use protocol: rest rules"));

    private final List<PolicyProblem> problems = new ArrayList<>();
    private int nodes;
    private int endpointOrdinal;

    /** Thrown once the node budget is spent; the problem is already recorded. */
    private static final class Exhausted extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Exhausted() {
            super(null, null, false, false);
        }
    }

    Policy read(byte[] document) {
        if (document.length > Policy.MAX_DOCUMENT_BYTES) {
            throw new PolicyException("the document has " + document.length + " bytes; at most "
                    + Policy.MAX_DOCUMENT_BYTES + " are accepted");
        }
        String text;
        try {
            text = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(document)).toString();
        } catch (CharacterCodingException e) {
            throw new PolicyException("the document is not valid UTF-8");
        }
        Node root = compose(text);
        if (root == null) {
            throw new PolicyException(List.copyOf(problems));
        }
        Policy policy;
        try {
            policy = policy(root, document);
        } catch (Exhausted e) {
            policy = null;
        }
        if (!problems.isEmpty() || policy == null) {
            List<PolicyProblem> sorted = new ArrayList<>(problems);
            sorted.sort(Comparator.comparingInt(PolicyProblem::line).thenComparingInt(PolicyProblem::column));
            throw new PolicyException(sorted);
        }
        return policy;
    }

    private Node compose(String text) {
        LoaderOptions options = new LoaderOptions();
        options.setAllowDuplicateKeys(false);
        options.setMaxAliasesForCollections(Policy.MAX_ALIASES);
        options.setNestingDepthLimit(Policy.MAX_NESTING_DEPTH);
        options.setCodePointLimit(Policy.MAX_DOCUMENT_BYTES);
        options.setAllowRecursiveKeys(false);
        options.setProcessComments(false);
        options.setTagInspector(tag -> false);
        try {
            // The composer alone: Yaml's constructors build bean introspection (java.beans), which
            // the supervisor's image does not link and a node tree never needs.
            Node root = new Composer(new ParserImpl(new StreamReader(new StringReader(text)), options), new Resolver(), options)
                    .getSingleNode();
            if (root == null) {
                problems.add(new PolicyProblem("$", 0, 0, "the document is empty"));
            }
            return root;
        } catch (MarkedYAMLException e) {
            Mark m = e.getProblemMark() != null ? e.getProblemMark() : e.getContextMark();
            String what = e.getProblem() != null ? e.getProblem() : e.getMessage();
            String context = e.getContext() != null ? e.getContext() + ": " : "";
            problems.add(new PolicyProblem("$", m == null ? 0 : m.getLine() + 1, m == null ? 0 : m.getColumn() + 1,
                    "YAML syntax: " + context + what));
        } catch (RuntimeException e) {
            // SnakeYAML reports limits (nesting, aliases, size) and some syntax errors unmarked.
            problems.add(new PolicyProblem("$", 0, 0, "YAML: " + firstLine(e.getMessage())));
        } catch (StackOverflowError e) {
            problems.add(new PolicyProblem("$", 0, 0, "YAML: the document is nested too deeply"));
        }
        return null;
    }

    private static String firstLine(String s) {
        if (s == null) {
            return "unreadable document";
        }
        int nl = s.indexOf('\n');
        return nl < 0 ? s : s.substring(0, nl);
    }

    private Policy policy(Node root, byte[] document) {
        Map<String, Node> top = mapping(root, "$", ROOT_KEYS);
        if (top == null) {
            return null;
        }
        Node version = top.get("version");
        if (version == null) {
            problem(root, "version", "required: the policy format version (" + Policy.VERSION + ")");
        } else {
            Integer v = integer(version, "version", 0, Integer.MAX_VALUE);
            if (v != null && v != Policy.VERSION) {
                problem(version, "version", "unsupported version " + v + "; this engine reads version " + Policy.VERSION);
            }
        }
        FilesystemPolicy fs = top.containsKey("filesystem_policy") ? filesystem(top.get("filesystem_policy")) : FilesystemPolicy.none();
        LandlockCompatibility landlock = top.containsKey("landlock") ? landlock(top.get("landlock")) : LandlockCompatibility.HARD_REQUIREMENT;
        ProcessPolicy process = top.containsKey("process") ? process(top.get("process")) : ProcessPolicy.none();
        List<NetworkModel.Block> blocks = top.containsKey("network_policies") ? network(top.get("network_policies")) : List.of();
        if (problems.isEmpty()) {
            ambiguities(blocks);
        }
        if (!problems.isEmpty()) {
            return null;
        }
        return new Policy(document, fs, landlock, process, blocks);
    }

    private FilesystemPolicy filesystem(Node node) {
        String at = "filesystem_policy";
        Map<String, Node> m = mapping(node, at, FS_KEYS);
        if (m == null) {
            return null;
        }
        List<Node> ro = m.containsKey("read_only") ? sequence(m.get("read_only"), at + ".read_only", Policy.MAX_FILESYSTEM_PATHS) : List.of();
        List<Node> rw = m.containsKey("read_write") ? sequence(m.get("read_write"), at + ".read_write", Policy.MAX_FILESYSTEM_PATHS) : List.of();
        if (ro == null || rw == null) {
            return null;
        }
        if (ro.size() + rw.size() > Policy.MAX_FILESYSTEM_PATHS) {
            problem(node, at, "at most " + Policy.MAX_FILESYSTEM_PATHS + " paths in read_only and read_write together, got "
                    + (ro.size() + rw.size()));
            return null;
        }
        Set<String> seen = new HashSet<>();
        List<String> readOnly = fsPaths(ro, at + ".read_only", false, seen);
        List<String> readWrite = fsPaths(rw, at + ".read_write", true, seen);
        Boolean workdir = m.containsKey("include_workdir") ? bool(m.get("include_workdir"), at + ".include_workdir") : Boolean.FALSE;
        if (workdir == null) {
            return null;
        }
        if (ro.isEmpty() && rw.isEmpty() && !workdir) {
            // Would read as no section at all (the runtime's standard view): say so instead of guessing.
            problem(node, at, "grants nothing: list read_only or read_write paths or set include_workdir,"
                    + " or leave the section out for the runtime's standard view");
            return null;
        }
        return new FilesystemPolicy(readOnly, readWrite, workdir);
    }

    private List<String> fsPaths(List<Node> nodes, String at, boolean writable, Set<String> seen) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < nodes.size(); i++) {
            String p = at + "[" + i + "]";
            String path = string(nodes.get(i), p);
            if (path == null) {
                continue;
            }
            String why = absolutePathProblem(path, false);
            if (why != null) {
                problem(nodes.get(i), p, why);
            } else if (writable && path.equals("/")) {
                problem(nodes.get(i), p, "the root directory is never writable");
            } else if (!seen.add(path)) {
                problem(nodes.get(i), p, "'" + path + "' is listed more than once");
            } else {
                out.add(path);
            }
        }
        return out;
    }

    /** @return why the path is not a canonical absolute path, or null if it is */
    private static String absolutePathProblem(String path, boolean glob) {
        if (path.length() > Policy.MAX_PATH_LENGTH) {
            return "a path is at most " + Policy.MAX_PATH_LENGTH + " characters";
        }
        if (!path.startsWith("/")) {
            return "must be an absolute path: '" + path + "'";
        }
        if (path.indexOf('\0') >= 0) {
            return "a path must not contain NUL";
        }
        if (!glob && path.indexOf('*') >= 0) {
            return "a filesystem path is literal; '*' is not allowed: '" + path + "'";
        }
        if (path.equals("/")) {
            return null;
        }
        for (String segment : path.substring(1).split("/", -1)) {
            if (segment.isEmpty()) {
                return "must be canonical (no empty segment, no trailing slash): '" + path + "'";
            }
            if (segment.equals(".") || segment.equals("..")) {
                return "must not contain '.' or '..' segments: '" + path + "'";
            }
            if (glob && segment.contains("**") && !segment.equals("**")) {
                return "'**' must be a whole segment: '" + path + "'";
            }
        }
        return null;
    }

    private LandlockCompatibility landlock(Node node) {
        Map<String, Node> m = mapping(node, "landlock", LANDLOCK_KEYS);
        if (m == null) {
            return null;
        }
        Node c = m.get("compatibility");
        if (c == null) {
            problem(node, "landlock.compatibility", "required: best_effort or hard_requirement");
            return null;
        }
        String v = string(c, "landlock.compatibility");
        if (v == null) {
            return null;
        }
        return switch (v) {
            case "best_effort" -> LandlockCompatibility.BEST_EFFORT;
            case "hard_requirement" -> LandlockCompatibility.HARD_REQUIREMENT;
            default -> {
                problem(c, "landlock.compatibility", "expected best_effort or hard_requirement, got '" + v + "'");
                yield null;
            }
        };
    }

    private ProcessPolicy process(Node node) {
        Map<String, Node> m = mapping(node, "process", PROCESS_KEYS);
        if (m == null) {
            return null;
        }
        AccountRef user = m.containsKey("run_as_user") ? account(m.get("run_as_user"), "process.run_as_user") : null;
        AccountRef group = m.containsKey("run_as_group") ? account(m.get("run_as_group"), "process.run_as_group") : null;
        return ProcessPolicy.ofNullable(user, group);
    }

    private AccountRef account(Node node, String at) {
        count(node);
        if (node instanceof ScalarNode s && s.getTag().equals(Tag.INT)) {
            Integer id = integer(node, at, Integer.MIN_VALUE, Integer.MAX_VALUE);
            if (id == null) {
                return null;
            }
            if (id < 1) {
                problem(node, at, "must be a positive id, never 0 (root): " + id);
                return null;
            }
            return new AccountRef.Id(id);
        }
        String name = string(node, at);
        if (name == null) {
            return null;
        }
        if (NUMERIC_ID.matcher(name).matches() && Long.parseLong(name) <= Integer.MAX_VALUE) {
            // Upstream writes ids as strings ("1500").
            return new AccountRef.Id(Integer.parseInt(name));
        }
        if (name.equals("0")) {
            problem(node, at, "must be a positive id, never 0 (root): " + name);
            return null;
        }
        try {
            return new AccountRef.Name(name);
        } catch (PolicyException e) {
            problem(node, at, "an account name must match [a-z_][a-z0-9_-]{0,31} and never be root: '" + name + "'");
            return null;
        }
    }

    private List<NetworkModel.Block> network(Node node) {
        String at = "network_policies";
        count(node);
        if (!(node instanceof MappingNode mn)) {
            problem(node, at, "expected a mapping of block names to blocks, got " + kind(node));
            return List.of();
        }
        if (mn.getValue().size() > Policy.MAX_NETWORK_POLICIES) {
            problem(node, at, "at most " + Policy.MAX_NETWORK_POLICIES + " blocks, got " + mn.getValue().size());
            return List.of();
        }
        Map<String, Node> blocks = mapping(node, at, null);
        if (blocks == null) {
            return List.of();
        }
        List<NetworkModel.Block> out = new ArrayList<>();
        for (Map.Entry<String, Node> e : blocks.entrySet()) {
            String name = e.getKey();
            String p = at + "." + name;
            if (name.length() > Policy.MAX_NAME_LENGTH || !BLOCK_NAME.matcher(name).matches()) {
                problem(e.getValue(), p, "a block key is 1 to " + Policy.MAX_NAME_LENGTH
                        + " characters of letters, digits, '_', '.' or '-', starting with a letter or digit"
                        + " (keys starting with '_provider_' are reserved upstream); put free text in name:");
                block(e.getValue(), p, name, out.size());
                continue;
            }
            NetworkModel.Block b = block(e.getValue(), p, name, out.size());
            if (b != null) {
                out.add(b);
            }
        }
        return out;
    }

    private NetworkModel.Block block(Node node, String at, String key, int index) {
        Map<String, Node> m = mapping(node, at, BLOCK_KEYS);
        if (m == null) {
            return null;
        }
        String display = m.containsKey("name") ? string(m.get("name"), at + ".name") : null;
        List<NetworkModel.Endpoint> endpoints = new ArrayList<>();
        List<NetworkModel.BinaryRule> binaries = new ArrayList<>();
        // Upstream: endpoints and binaries are optional, and an empty list matches nothing.
        if (m.containsKey("endpoints")) {
            List<Node> es = sequence(m.get("endpoints"), at + ".endpoints", Policy.MAX_ENDPOINTS);
            for (int i = 0; es != null && i < es.size(); i++) {
                NetworkModel.Endpoint e = endpoint(es.get(i), at + ".endpoints[" + i + "]", key, display, index, i);
                if (e != null) {
                    endpoints.add(e);
                }
            }
        }
        if (m.containsKey("binaries")) {
            List<Node> bs = sequence(m.get("binaries"), at + ".binaries", Policy.MAX_BINARIES);
            for (int i = 0; bs != null && i < bs.size(); i++) {
                NetworkModel.BinaryRule b = binary(bs.get(i), at + ".binaries[" + i + "]");
                if (b != null) {
                    binaries.add(b);
                }
            }
        }
        return new NetworkModel.Block(key, index, endpoints, binaries);
    }

    private NetworkModel.Endpoint endpoint(Node node, String at, String block, String blockDisplay, int blockIndex, int index) {
        Map<String, Node> m = mapping(node, at, ENDPOINT_KEYS);
        if (m == null) {
            return null;
        }
        int before = problems.size();
        HostNames.Pattern host = null;
        if (!m.containsKey("host")) {
            problem(node, at + ".host", "required: a host name, IP address or pattern such as '*.example.com'"
                    + " (a hostless endpoint needs allowed_ips, which this engine does not implement)");
        } else {
            String h = string(m.get("host"), at + ".host");
            if (h != null) {
                List<String> why = new ArrayList<>();
                host = HostNames.parsePattern(h, why);
                why.forEach(w -> problem(m.get("host"), at + ".host", w));
            }
        }
        int[] ports = ports(node, m, at);
        String display = m.containsKey("name") ? string(m.get("name"), at + ".name") : null;
        // null: protocol omitted, which upstream relays without request rules, as tcp is here.
        Boolean rest = Boolean.FALSE;
        boolean explicitTcp = false;
        boolean protocolOk = true;
        if (m.containsKey("protocol")) {
            String p = string(m.get("protocol"), at + ".protocol");
            if ("rest".equals(p)) {
                rest = true;
            } else if ("tcp".equals(p)) {
                explicitTcp = true;
            } else if (p != null && UPSTREAM_PROTOCOLS.contains(p)) {
                problem(m.get("protocol"), at + ".protocol", "protocol '" + p + "' is upstream OpenShell's but this engine does not"
                        + " inspect it; use protocol: rest (HTTP method, path and query rules) or tcp (no inspection)");
                protocolOk = false;
            } else if (p != null) {
                problem(m.get("protocol"), at + ".protocol", "expected rest or tcp, got '" + p + "'");
                protocolOk = false;
            } else {
                protocolOk = false;
            }
        }
        String hostText = host == null ? "?" : host.source();
        List<NetworkModel.HttpRule> allows = new ArrayList<>();
        List<NetworkModel.HttpRule> denies = new ArrayList<>();
        boolean enforce = true;
        if (!rest && protocolOk) {
            for (String k : List.of("access", "rules", "deny_rules", "enforcement")) {
                if (m.containsKey(k)) {
                    problem(m.get(k), at + "." + k, explicitTcp
                            ? "a tcp endpoint is never inspected at L7; '" + k + "' needs protocol: rest"
                            : "'" + k + "' needs protocol: rest (upstream ignores it without a protocol; here it is refused"
                                    + " so that no rule is silently unenforced)");
                }
            }
        }
        if (rest) {
            boolean hasAccess = m.containsKey("access");
            boolean hasRules = m.containsKey("rules");
            if (hasAccess && hasRules) {
                problem(m.get("rules"), at + ".rules", "give access or rules, not both: replace the preset by rules"
                        + " that list its methods (read-only is GET, HEAD and OPTIONS on path '**'), or drop rules");
            } else if (!hasAccess && !hasRules) {
                problem(node, at, "a rest endpoint needs access (read-only, read-write or full) or rules"
                        + (m.containsKey("deny_rules") ? "; deny_rules alone allow nothing" : ""));
            }
            if (m.containsKey("enforcement")) {
                String e = string(m.get("enforcement"), at + ".enforcement");
                if ("audit".equals(e)) {
                    enforce = false;
                } else if (e != null && !e.equals("enforce")) {
                    problem(m.get("enforcement"), at + ".enforcement", "expected enforce or audit, got '" + e + "'");
                }
            }
            if (hasAccess) {
                NetworkModel.HttpRule preset = access(m.get("access"), at + ".access", block, index, hostText);
                if (preset != null) {
                    allows.add(preset);
                }
            }
            if (hasRules) {
                rules(m.get("rules"), at + ".rules", block, index, hostText, RuleRef.Kind.RULE, allows);
            }
            if (m.containsKey("deny_rules")) {
                rules(m.get("deny_rules"), at + ".deny_rules", block, index, hostText, RuleRef.Kind.DENY_RULE, denies);
            }
        }
        if (problems.size() > before || host == null || ports == null || !protocolOk) {
            return null;
        }
        String description = (rest ? "rest " : explicitTcp ? "tcp " : "") + host.source() + ":" + java.util.Arrays.toString(ports)
                + (rest && !enforce ? " audit" : "") + named(blockDisplay, display);
        RuleRef ref = new RuleRef(block, index, host.source(), RuleRef.Kind.ENDPOINT, 0, at, line(node), description);
        return new NetworkModel.Endpoint(endpointOrdinal++, blockIndex, block, host, ports, rest, explicitTcp, enforce, allows,
                denies, ref);
    }

    /** Upstream's display names, kept in the description so audit lines and explain show them. */
    private static String named(String block, String endpoint) {
        if (block == null && endpoint == null) {
            return "";
        }
        return " \"" + (block == null ? "" : block) + (block != null && endpoint != null ? " / " : "")
                + (endpoint == null ? "" : endpoint) + "\"";
    }

    private int[] ports(Node node, Map<String, Node> m, String at) {
        boolean one = m.containsKey("port");
        boolean many = m.containsKey("ports");
        if (one == many) {
            problem(node, at + ".port", one ? "give port or ports, not both" : "required: port or ports");
            return null;
        }
        if (one) {
            Integer p = integer(m.get("port"), at + ".port", 1, 65535);
            return p == null ? null : new int[] {p};
        }
        List<Node> ps = sequence(m.get("ports"), at + ".ports", Policy.MAX_PORTS);
        if (ps == null) {
            return null;
        }
        if (ps.isEmpty()) {
            problem(m.get("ports"), at + ".ports", "at least one port");
            return null;
        }
        TreeSet<Integer> out = new TreeSet<>();
        boolean ok = true;
        for (int i = 0; i < ps.size(); i++) {
            Integer p = integer(ps.get(i), at + ".ports[" + i + "]", 1, 65535);
            if (p == null) {
                ok = false;
            } else if (!out.add(p)) {
                problem(ps.get(i), at + ".ports[" + i + "]", "port " + p + " is listed more than once");
                ok = false;
            }
        }
        return ok ? out.stream().mapToInt(Integer::intValue).toArray() : null;
    }

    private NetworkModel.HttpRule access(Node node, String at, String block, int endpoint, String host) {
        String v = string(node, at);
        if (v == null) {
            return null;
        }
        Set<String> methods = switch (v) {
            case "read-only" -> READ_ONLY;
            case "read-write" -> READ_WRITE;
            case "full" -> null;
            default -> {
                problem(node, at, "expected read-only, read-write or full, got '" + v + "'");
                yield Set.of();
            }
        };
        if (methods != null && methods.isEmpty()) {
            return null;
        }
        RuleRef ref = new RuleRef(block, endpoint, host, RuleRef.Kind.ACCESS, 0, at, line(node), "access " + v);
        return new NetworkModel.HttpRule(methods, SegmentGlob.of("**", "**"), List.of(), ref);
    }

    private void rules(Node node, String at, String block, int endpoint, String host, RuleRef.Kind kind,
                       List<NetworkModel.HttpRule> out) {
        List<Node> rs = sequence(node, at, Policy.MAX_RULES);
        if (rs == null) {
            return;
        }
        if (rs.isEmpty()) {
            problem(node, at, kind == RuleRef.Kind.RULE
                    ? "rules: [] allows nothing; list at least one rule (- allow: {method: GET, path: /v1/**}) or use access"
                    : "deny_rules: [] denies nothing; list a rule or drop deny_rules");
            return;
        }
        for (int i = 0; i < rs.size(); i++) {
            String p = at + "[" + i + "]";
            Node ruleNode = rs.get(i);
            Map<String, Node> m;
            if (kind == RuleRef.Kind.RULE && ruleNode instanceof MappingNode mn && mn.getValue().stream()
                    .anyMatch(t -> t.getKeyNode() instanceof ScalarNode k && k.getValue().equals("allow"))) {
                // Upstream's form: - allow: {method, path, query}.
                Map<String, Node> wrapper = mapping(ruleNode, p, Set.of("allow"));
                if (wrapper == null || !wrapper.containsKey("allow")) {
                    continue;
                }
                p = p + ".allow";
                ruleNode = wrapper.get("allow");
                m = mapping(ruleNode, p, RULE_KEYS);
            } else {
                m = mapping(ruleNode, p, RULE_KEYS);
            }
            if (m == null) {
                continue;
            }
            String rp = p;
            Node rn = ruleNode;
            Map<String, Node> rm = m;
            Set<String> methods = null;
            String methodText = null;
            boolean ok = true;
            if (!rm.containsKey("method")) {
                problem(rn, rp + ".method", "required: an HTTP method or '*'");
                ok = false;
            } else {
                methodText = string(rm.get("method"), rp + ".method");
                if (methodText == null) {
                    ok = false;
                } else if (!methodText.equals("*")) {
                    String upper = methodText.toUpperCase(Locale.ROOT);
                    if (!METHOD.matcher(methodText).matches()) {
                        problem(rm.get("method"), rp + ".method", "not an HTTP method: '" + methodText + "' (write one method, or '*')");
                        ok = false;
                    } else {
                        methods = Set.of(upper);
                        methodText = upper;
                    }
                }
            }
            SegmentGlob glob = null;
            if (!rm.containsKey("path")) {
                problem(rn, rp + ".path", "required: a path pattern such as /v1/** (or '**' for every path)");
                ok = false;
            } else {
                String pathText = string(rm.get("path"), rp + ".path");
                if (pathText == null) {
                    ok = false;
                } else {
                    List<String> why = new ArrayList<>();
                    glob = RequestPaths.parsePattern(pathText, why);
                    why.forEach(w -> problem(rm.get("path"), rp + ".path", w));
                    ok &= glob != null;
                }
            }
            List<QueryString.Condition> query = rm.containsKey("query") ? query(rm.get("query"), rp + ".query") : List.of();
            ok &= query != null;
            if (ok) {
                String description = methodText + " " + glob.source() + (query.isEmpty() ? "" : " ?"
                        + String.join("&", query.stream().map(QueryString.Condition::name).toList()));
                RuleRef ref = new RuleRef(block, endpoint, host, kind, i, rp, line(rn), description);
                out.add(new NetworkModel.HttpRule(methods, glob, query, ref));
            }
        }
    }

    private List<QueryString.Condition> query(Node node, String at) {
        count(node);
        if (!(node instanceof MappingNode)) {
            problem(node, at, "expected a mapping of query parameter names to globs, got " + kind(node));
            return null;
        }
        Map<String, Node> m = mapping(node, at, null);
        if (m == null) {
            return null;
        }
        if (m.size() > Policy.MAX_QUERY_CONDITIONS) {
            problem(node, at, "at most " + Policy.MAX_QUERY_CONDITIONS + " query parameters, got " + m.size());
            return null;
        }
        List<QueryString.Condition> out = new ArrayList<>();
        boolean ok = true;
        for (Map.Entry<String, Node> e : m.entrySet()) {
            String p = at + "." + e.getKey();
            List<Node> globs;
            Node v = e.getValue();
            if (v instanceof MappingNode) {
                Map<String, Node> matcher = mapping(v, p, Set.of("any", "glob"));
                if (matcher == null || matcher.size() != 1) {
                    if (matcher != null) {
                        problem(v, p, "give a glob, {glob: G} or {any: [G, ...]}");
                    }
                    ok = false;
                    continue;
                }
                if (matcher.containsKey("glob")) {
                    globs = List.of(matcher.get("glob"));
                } else {
                    globs = sequence(matcher.get("any"), p + ".any", Policy.MAX_RULES);
                    if (globs != null && globs.isEmpty()) {
                        problem(matcher.get("any"), p + ".any", "any: [] matches nothing; list at least one glob");
                        globs = null;
                    }
                }
            } else {
                globs = List.of(v);
            }
            if (globs == null) {
                ok = false;
                continue;
            }
            List<SegmentGlob> parsed = new ArrayList<>();
            for (Node g : globs) {
                String text = string(g, p);
                if (text == null) {
                    ok = false;
                    continue;
                }
                List<String> why = new ArrayList<>();
                SegmentGlob glob = QueryString.parseGlob(text, why);
                why.forEach(w -> problem(g, p, w));
                if (glob == null) {
                    ok = false;
                } else {
                    parsed.add(glob);
                }
            }
            out.add(new QueryString.Condition(e.getKey(), List.copyOf(parsed)));
        }
        return ok ? out : null;
    }

    private NetworkModel.BinaryRule binary(Node node, String at) {
        Map<String, Node> m = mapping(node, at, BINARY_KEYS);
        if (m == null) {
            return null;
        }
        boolean byPath = m.containsKey("path");
        boolean byAncestor = m.containsKey("ancestor");
        if (byPath == byAncestor) {
            problem(node, at, byPath ? "give path or ancestor, not both (path already matches an ancestor too)"
                    : "required: path (the executable or any ancestor) or ancestor (only an ancestor)");
            return null;
        }
        String key = byPath ? "path" : "ancestor";
        String path = string(m.get(key), at + "." + key);
        String sha = null;
        boolean ok = path != null;
        if (path != null) {
            String why = absolutePathProblem(path, true);
            if (why != null) {
                problem(m.get(key), at + "." + key, why);
                ok = false;
            }
        }
        if (m.containsKey("sha256")) {
            // Any scalar: a digest of only decimal digits would otherwise resolve as an integer.
            Node s = m.get("sha256");
            count(s);
            if (s instanceof ScalarNode sn && SHA256.matcher(sn.getValue()).matches()) {
                sha = sn.getValue().toLowerCase(Locale.ROOT);
            } else {
                problem(s, at + ".sha256", "expected exactly 64 hex digits");
                ok = false;
            }
        }
        if (!ok) {
            return null;
        }
        if (path.indexOf('*') < 0) {
            return NetworkModel.BinaryRule.literal(byAncestor, path, sha);
        }
        String[] raw = NetworkModel.BinaryRule.segments(path);
        List<String> tokens = new ArrayList<>(raw.length + 1);
        for (int i = 0; i < raw.length; i++) {
            // A trailing "/**" is a subtree (at least one component); a middle "/**/" zero or more directories.
            if (raw[i].equals("**") && i == raw.length - 1) {
                tokens.add("*");
            }
            tokens.add(raw[i]);
        }
        return NetworkModel.BinaryRule.glob(byAncestor, path, SegmentGlob.of(path, tokens.toArray(String[]::new)), sha);
    }

    /**
     * Refuses what upstream refuses as ambiguous: a {@code tcp} and a {@code rest} endpoint that
     * can match the same host and port, and inspected endpoints that disagree on enforcement.
     * Hosts overlap when some name matches both (exact names, patterns, through wildcards alike);
     * addresses when they are equal.
     */
    private void ambiguities(List<NetworkModel.Block> blocks) {
        List<NetworkModel.Endpoint> all = new ArrayList<>();
        blocks.forEach(b -> all.addAll(b.endpoints()));
        for (int j = 0; j < all.size(); j++) {
            NetworkModel.Endpoint later = all.get(j);
            for (int i = 0; i < j; i++) {
                NetworkModel.Endpoint earlier = all.get(i);
                if (!sharePort(earlier, later) || !overlap(earlier.host, later.host)) {
                    continue;
                }
                if ((earlier.explicitTcp && later.rest) || (earlier.rest && later.explicitTcp)) {
                    problems.add(new PolicyProblem(later.ref.path(), later.ref.line(), 0, "ambiguous: " + earlier.ref.path()
                            + " (line " + earlier.ref.line() + ") is a " + (earlier.rest ? "rest" : "tcp") + " endpoint for the same"
                            + " host and port, and a connection is either inspected or not; make both rest (put the"
                            + " rules on one), or give them different hosts or ports"));
                } else if (earlier.rest && later.rest && earlier.enforce != later.enforce) {
                    problems.add(new PolicyProblem(later.ref.path(), later.ref.line(), 0, "inconsistent: " + earlier.ref.path()
                            + " (line " + earlier.ref.line() + ") matches the same requests with enforcement: "
                            + (earlier.enforce ? "enforce" : "audit") + "; give both the same enforcement"));
                }
            }
        }
    }

    private static boolean sharePort(NetworkModel.Endpoint a, NetworkModel.Endpoint b) {
        for (int p : a.ports) {
            if (b.hasPort(p)) {
                return true;
            }
        }
        return false;
    }

    private static boolean overlap(HostNames.Pattern a, HostNames.Pattern b) {
        return switch (a) {
            case HostNames.Ip x -> b instanceof HostNames.Ip y && x.address().equals(y.address());
            case HostNames.Exact x -> switch (b) {
                case HostNames.Exact y -> x.name().equals(y.name());
                case HostNames.Wildcard y -> y.matches(x.name());
                case HostNames.Ip y -> false;
            };
            case HostNames.Wildcard x -> switch (b) {
                case HostNames.Exact y -> x.matches(y.name());
                case HostNames.Wildcard y -> x.glob().intersects(y.glob());
                case HostNames.Ip y -> false;
            };
        };
    }

    // ---- typed access to nodes; each records a problem and returns null on a mismatch ----

    private void count(Node node) {
        if (++nodes > Policy.MAX_NODES) {
            problems.add(new PolicyProblem("$", line(node), column(node), "more than " + Policy.MAX_NODES
                    + " nodes to read (aliases count each time they are reached)"));
            throw new Exhausted();
        }
    }

    /** Visible for the test of the node budget at its bound. */
    int countNodes(Node node, int times) {
        for (int i = 0; i < times; i++) {
            count(node);
        }
        return nodes;
    }

    /**
     * @param allowed the allowed keys, or null for any key
     * @return the entries in document order, or null on a type problem
     */
    private Map<String, Node> mapping(Node node, String at, Set<String> allowed) {
        count(node);
        if (!(node instanceof MappingNode mn)) {
            problem(node, at, "expected a mapping, got " + kind(node));
            return null;
        }
        Map<String, Node> out = new LinkedHashMap<>();
        Map<String, Node> firstKey = new HashMap<>();
        for (NodeTuple t : mn.getValue()) {
            Node k = t.getKeyNode();
            count(k);
            if (!(k instanceof ScalarNode ks) || !ks.getTag().equals(Tag.STR)) {
                problem(k, at, "keys must be plain strings" + (k.getTag().equals(Tag.MERGE) ? " (merge keys '<<' are not supported)" : ""));
                continue;
            }
            String key = ks.getValue();
            String p = at.equals("$") ? key : at + "." + key;
            if (firstKey.containsKey(key)) {
                problem(k, p, "duplicate key '" + key + "' (first at line " + line(firstKey.get(key)) + ")");
                continue;
            }
            firstKey.put(key, k);
            if (allowed != null && !allowed.contains(key)) {
                String upstream = UPSTREAM_ONLY.get(key);
                problem(k, p, upstream != null ? "'" + key + "' is upstream OpenShell's but this engine does not apply it, so"
                        + " it is refused rather than ignored: " + upstream
                        : "unknown key '" + key + "'; expected one of " + new TreeSet<>(allowed));
                continue;
            }
            out.put(key, t.getValueNode());
        }
        return out;
    }

    private List<Node> sequence(Node node, String at, int max) {
        count(node);
        if (!(node instanceof SequenceNode sn)) {
            problem(node, at, "expected a list, got " + kind(node));
            return null;
        }
        if (sn.getValue().size() > max) {
            problem(node, at, "at most " + max + " entries, got " + sn.getValue().size());
            return null;
        }
        return sn.getValue();
    }

    private String string(Node node, String at) {
        count(node);
        if (node instanceof ScalarNode s && s.getTag().equals(Tag.STR)) {
            if (s.getValue().isEmpty()) {
                problem(node, at, "must not be empty");
                return null;
            }
            return s.getValue();
        }
        problem(node, at, "expected a string, got " + kind(node));
        return null;
    }

    private Integer integer(Node node, String at, int min, int max) {
        count(node);
        if (node instanceof ScalarNode s && s.getTag().equals(Tag.INT) && s.getValue().matches("-?(0|[1-9][0-9]{0,9})")) {
            long v = Long.parseLong(s.getValue());
            if (v < min || v > max) {
                problem(node, at, "must be between " + min + " and " + max + ", got " + v);
                return null;
            }
            return (int) v;
        }
        problem(node, at, "expected a decimal integer, got " + kind(node));
        return null;
    }

    private Boolean bool(Node node, String at) {
        count(node);
        if (node instanceof ScalarNode s && s.getTag().equals(Tag.BOOL)
                && (s.getValue().equals("true") || s.getValue().equals("false"))) {
            return Boolean.valueOf(s.getValue());
        }
        problem(node, at, "expected true or false, got " + kind(node));
        return null;
    }

    private static String kind(Node node) {
        if (node instanceof MappingNode) {
            return "a mapping";
        }
        if (node instanceof SequenceNode) {
            return "a list";
        }
        ScalarNode s = (ScalarNode) node;
        Tag t = s.getTag();
        String v = s.getValue().length() > 40 ? s.getValue().substring(0, 40) + "..." : s.getValue();
        if (t.equals(Tag.NULL)) {
            return "nothing (null)";
        }
        if (t.equals(Tag.STR)) {
            return "the string '" + v + "'";
        }
        if (t.equals(Tag.INT) || t.equals(Tag.FLOAT)) {
            return "the number " + v;
        }
        if (t.equals(Tag.BOOL)) {
            return "the boolean " + v;
        }
        return "'" + v + "' (" + t + ")";
    }

    private void problem(Node node, String at, String message) {
        problems.add(new PolicyProblem(at, line(node), column(node), message));
    }

    private static int line(Node node) {
        return node.getStartMark() == null ? 0 : node.getStartMark().getLine() + 1;
    }

    private static int column(Node node) {
        return node.getStartMark() == null ? 0 : node.getStartMark().getColumn() + 1;
    }
}
