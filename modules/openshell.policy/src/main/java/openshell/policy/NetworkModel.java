package openshell.policy;

import java.net.InetAddress;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.Executable;

/** The validated, immutable network section: blocks of endpoints and binaries. */
final class NetworkModel {
    private NetworkModel() {
    }

    /** How a block's binaries relate to a caller. */
    enum BinaryMatch {
        MATCH, DIGEST_MISMATCH, NONE
    }

    /**
     * An allow or deny rule over method, path and query.
     *
     * @param methods upper-case methods, or null for any method; a GET rule also covers HEAD
     * @param query   the rule's query conditions, all of which must hold (empty: the query is ignored)
     */
    record HttpRule(Set<String> methods, SegmentGlob path, List<QueryString.Condition> query, RuleRef ref,
                    Decision.Allow[] allows) {
        HttpRule(Set<String> methods, SegmentGlob path, List<QueryString.Condition> query, RuleRef ref) {
            this(methods, path, List.copyOf(query), ref, new Decision.Allow[] {Decision.Allow.of(ref, Inspection.HTTP, false),
                Decision.Allow.of(ref, Inspection.HTTP, true)});
        }

        /** Decisions are immutable, so each rule keeps its two possible allows instead of allocating one per request. */
        Decision.Allow allow(boolean declaredExactly) {
            return allows[declaredExactly ? 1 : 0];
        }

        /** @param queryParameters the decoded query, or null when no rule of the endpoint needs it */
        boolean matches(String method, String[] segments, Map<String, List<String>> queryParameters, boolean deny) {
            if (!HttpMethods.covers(methods, method) || !path.matches(segments)) {
                return false;
            }
            for (QueryString.Condition c : query) {
                if (deny ? !c.denies(queryParameters) : !c.allows(queryParameters)) {
                    return false;
                }
            }
            return true;
        }
    }

    /**
     * One entry of {@code binaries}. A {@code path:} entry matches the executable or any of its
     * ancestors; an {@code ancestor:} entry (this project's explicit form) only an ancestor.
     *
     * @param exacts the literal path and, once a generation expanded it, the targets of its symlinks
     */
    record BinaryRule(boolean ancestorOnly, String source, Set<String> exacts, SegmentGlob glob, String sha256) {
        static BinaryRule literal(boolean ancestorOnly, String path, String sha256) {
            return new BinaryRule(ancestorOnly, path, Set.of(path), null, sha256);
        }

        static BinaryRule glob(boolean ancestorOnly, String source, SegmentGlob glob, String sha256) {
            return new BinaryRule(ancestorOnly, source, Set.of(), glob, sha256);
        }

        /** @return this rule with the symlink targets of its literal path added, as the workload sees them */
        BinaryRule expanded(WorkloadPaths paths) {
            if (glob != null) {
                return this;
            }
            Set<String> out = new java.util.LinkedHashSet<>(exacts);
            paths.resolve(source).filter(t -> t.startsWith("/")).ifPresent(out::add);
            return out.size() == exacts.size() ? this : new BinaryRule(ancestorOnly, source, Set.copyOf(out), null, sha256);
        }

        BinaryMatch match(BinaryIdentity identity) {
            boolean mismatch = false;
            if (!ancestorOnly) {
                BinaryMatch m = match(identity.executable());
                if (m == BinaryMatch.MATCH) {
                    return m;
                }
                mismatch = m == BinaryMatch.DIGEST_MISMATCH;
            }
            for (Executable e : identity.ancestors()) {
                BinaryMatch m = match(e);
                if (m == BinaryMatch.MATCH) {
                    return m;
                }
                mismatch |= m == BinaryMatch.DIGEST_MISMATCH;
            }
            return mismatch ? BinaryMatch.DIGEST_MISMATCH : BinaryMatch.NONE;
        }

        private BinaryMatch match(Executable e) {
            String p = e.path();
            // An empty or relative path (an unresolved executable) never matches, not even "/**".
            boolean pathMatches = p.length() > 1 && p.charAt(0) == '/' && (glob == null ? exacts.contains(p)
                    : p.startsWith(globPrefix()) && glob.matches(segments(p)));
            if (!pathMatches) {
                return BinaryMatch.NONE;
            }
            if (sha256 == null) {
                return BinaryMatch.MATCH;
            }
            // A pinned digest needs a known, equal digest: an unknown digest denies.
            return e.sha256().map(sha256::equals).orElse(false) ? BinaryMatch.MATCH : BinaryMatch.DIGEST_MISMATCH;
        }

        /** The glob's characters before its first '*': a cheap filter before splitting the path. */
        private String globPrefix() {
            String source = glob.source();
            return source.substring(0, source.indexOf('*'));
        }

        static String[] segments(String absolutePath) {
            return absolutePath.length() <= 1 ? new String[0] : absolutePath.substring(1).split("/", -1);
        }
    }

    /**
     * A named block; literal, unpinned {@code path:} entries are also kept in a set for a one-probe
     * match per executable.
     *
     * @param name the block's key (what decisions report; ties go to the lexicographically smallest)
     */
    record Block(String name, int index, List<Endpoint> endpoints, List<BinaryRule> binaries, Set<String> exactPaths,
                 List<BinaryRule> others) {
        Block(String name, int index, List<Endpoint> endpoints, List<BinaryRule> binaries) {
            this(name, index, List.copyOf(endpoints), List.copyOf(binaries), exactPaths(binaries), others(binaries));
        }

        private static Set<String> exactPaths(List<BinaryRule> binaries) {
            Set<String> out = new java.util.HashSet<>();
            for (BinaryRule b : binaries) {
                if (!b.ancestorOnly() && b.glob() == null && b.sha256() == null) {
                    out.addAll(b.exacts());
                }
            }
            return Set.copyOf(out);
        }

        private static List<BinaryRule> others(List<BinaryRule> binaries) {
            return binaries.stream().filter(b -> b.ancestorOnly() || b.glob() != null || b.sha256() != null).toList();
        }

        /** @return this block with every literal binary path expanded through the workload's symlinks */
        Block expanded(WorkloadPaths paths) {
            List<BinaryRule> out = binaries.stream().map(b -> b.expanded(paths)).toList();
            return new Block(name, index, endpoints, out);
        }

        BinaryMatch match(BinaryIdentity identity) {
            if (!exactPaths.isEmpty()) {
                if (exactPaths.contains(identity.path())) {
                    return BinaryMatch.MATCH;
                }
                for (Executable a : identity.ancestors()) {
                    if (exactPaths.contains(a.path())) {
                        return BinaryMatch.MATCH;
                    }
                }
            }
            boolean mismatch = false;
            for (BinaryRule b : others) {
                BinaryMatch m = b.match(identity);
                if (m == BinaryMatch.MATCH) {
                    return m;
                }
                mismatch |= m == BinaryMatch.DIGEST_MISMATCH;
            }
            return mismatch ? BinaryMatch.DIGEST_MISMATCH : BinaryMatch.NONE;
        }
    }

    /** One endpoint; {@code ordinal} is its position in the whole document, the tie-breaker everywhere. */
    static final class Endpoint {
        final int ordinal;
        final int blockIndex;
        final String blockName;
        final HostNames.Pattern host;
        final int[] ports;
        final boolean rest;
        /** Written {@code protocol: tcp} (not omitted): then a rest endpoint on the same host and port is ambiguous. */
        final boolean explicitTcp;
        /** {@code enforcement: enforce} (this project's default) rather than {@code audit}. */
        final boolean enforce;
        final List<HttpRule> allows;
        final List<HttpRule> denies;
        /** Whether any rule has a query condition, so the query is decoded only when a rule reads it. */
        final boolean readsQuery;
        final RuleRef ref;
        private final Decision.Allow[] allowDecisions = new Decision.Allow[4];

        Endpoint(int ordinal, int blockIndex, String blockName, HostNames.Pattern host, int[] ports, boolean rest,
                 boolean explicitTcp, boolean enforce, List<HttpRule> allows, List<HttpRule> denies, RuleRef ref) {
            this.ordinal = ordinal;
            this.blockIndex = blockIndex;
            this.blockName = blockName;
            this.host = host;
            this.ports = ports.clone();
            Arrays.sort(this.ports);
            this.rest = rest;
            this.explicitTcp = explicitTcp;
            this.enforce = enforce;
            this.allows = List.copyOf(allows);
            this.denies = List.copyOf(denies);
            boolean q = false;
            for (HttpRule r : this.allows) {
                q |= !r.query().isEmpty();
            }
            for (HttpRule r : this.denies) {
                q |= !r.query().isEmpty();
            }
            this.readsQuery = q;
            this.ref = ref;
            for (int i = 0; i < 4; i++) {
                allowDecisions[i] = Decision.Allow.of(ref, i < 2 ? Inspection.OPAQUE : Inspection.HTTP, (i & 1) == 1);
            }
        }

        /** Orders endpoints as decisions report them: by block key, then document order. */
        static int reportOrder(Endpoint a, Endpoint b) {
            int c = a.blockName.compareTo(b.blockName);
            return c != 0 ? c : Integer.compare(a.ordinal, b.ordinal);
        }

        Decision.Allow allow(Inspection inspection, boolean declaredExactly) {
            return allowDecisions[(inspection == Inspection.HTTP ? 2 : 0) + (declaredExactly ? 1 : 0)];
        }

        boolean hasPort(int port) {
            int[] p = ports;
            if (p.length <= 8) {
                for (int x : p) {
                    if (x == port) {
                        return true;
                    }
                }
                return false;
            }
            return Arrays.binarySearch(p, port) >= 0;
        }

        /** A tcp endpoint grants the connection; a rest endpoint if it has an allow rule (the reader requires one). */
        boolean grants() {
            return !rest || !allows.isEmpty();
        }

        boolean declaresExactly(String name, InetAddress address) {
            return switch (host) {
                case HostNames.Exact e -> e.name().equals(name);
                case HostNames.Ip ip -> ip.address().equals(address);
                case HostNames.Wildcard w -> false;
            };
        }
    }
}
