package openshell.policy;

import java.net.InetAddress;
import java.util.Arrays;
import java.util.List;
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
     * An allow or deny rule over method and path.
     *
     * @param methods upper-case methods, or null for any method; HEAD never appears (it follows GET)
     */
    record HttpRule(Set<String> methods, SegmentGlob path, RuleRef ref, Decision.Allow[] allows) {
        HttpRule(Set<String> methods, SegmentGlob path, RuleRef ref) {
            this(methods, path, ref, new Decision.Allow[] {new Decision.Allow(ref, Inspection.HTTP, false),
                new Decision.Allow(ref, Inspection.HTTP, true)});
        }

        /** Decisions are immutable, so each rule keeps its two possible allows instead of allocating one per request. */
        Decision.Allow allow(boolean declaredExactly) {
            return allows[declaredExactly ? 1 : 0];
        }

        boolean matches(String method, String[] segments) {
            return (methods == null || methods.contains(method)) && path.matches(segments);
        }
    }

    /** One entry of {@code binaries}. */
    record BinaryRule(boolean ancestor, String exact, SegmentGlob glob, String sha256) {
        BinaryMatch match(BinaryIdentity identity) {
            boolean mismatch = false;
            if (ancestor) {
                for (Executable e : identity.ancestors()) {
                    BinaryMatch m = match(e);
                    if (m == BinaryMatch.MATCH) {
                        return m;
                    }
                    mismatch |= m == BinaryMatch.DIGEST_MISMATCH;
                }
                return mismatch ? BinaryMatch.DIGEST_MISMATCH : BinaryMatch.NONE;
            }
            return match(identity.executable());
        }

        private BinaryMatch match(Executable e) {
            String p = e.path();
            boolean pathMatches = exact != null ? exact.equals(p)
                    : p.startsWith(globPrefix()) && glob.matches(segments(p));
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

    /** A named block; exact, unpinned executable paths are also kept in a set for a one-probe match. */
    record Block(String name, int index, List<Endpoint> endpoints, List<BinaryRule> binaries, Set<String> exactPaths,
                 List<BinaryRule> others) {
        Block(String name, int index, List<Endpoint> endpoints, List<BinaryRule> binaries) {
            this(name, index, endpoints, binaries, exactPaths(binaries), others(binaries));
        }

        private static Set<String> exactPaths(List<BinaryRule> binaries) {
            Set<String> out = new java.util.HashSet<>();
            for (BinaryRule b : binaries) {
                if (!b.ancestor() && b.exact() != null && b.sha256() == null) {
                    out.add(b.exact());
                }
            }
            return Set.copyOf(out);
        }

        private static List<BinaryRule> others(List<BinaryRule> binaries) {
            return binaries.stream().filter(b -> b.ancestor() || b.exact() == null || b.sha256() != null).toList();
        }

        BinaryMatch match(BinaryIdentity identity) {
            if (exactPaths.contains(identity.path())) {
                return BinaryMatch.MATCH;
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
        final HostNames.Pattern host;
        final int[] ports;
        final boolean rest;
        final List<HttpRule> allows;
        final List<HttpRule> denies;
        final RuleRef ref;
        private final Decision.Allow[] allowDecisions = new Decision.Allow[4];

        Endpoint(int ordinal, int blockIndex, HostNames.Pattern host, int[] ports, boolean rest,
                 List<HttpRule> allows, List<HttpRule> denies, RuleRef ref) {
            this.ordinal = ordinal;
            this.blockIndex = blockIndex;
            this.host = host;
            this.ports = ports.clone();
            Arrays.sort(this.ports);
            this.rest = rest;
            this.allows = List.copyOf(allows);
            this.denies = List.copyOf(denies);
            this.ref = ref;
            for (int i = 0; i < 4; i++) {
                allowDecisions[i] = new Decision.Allow(ref, i < 2 ? Inspection.OPAQUE : Inspection.HTTP, (i & 1) == 1);
            }
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

        /** A tcp endpoint grants the connection; a rest endpoint only if it has an allow rule. */
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
