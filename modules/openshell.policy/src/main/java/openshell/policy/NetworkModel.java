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
    record HttpRule(Set<String> methods, SegmentGlob path, RuleRef ref) {
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
            boolean pathMatches = exact != null ? exact.equals(p) : glob.matches(segments(p));
            if (!pathMatches) {
                return BinaryMatch.NONE;
            }
            if (sha256 == null) {
                return BinaryMatch.MATCH;
            }
            // A pinned digest needs a known, equal digest: an unknown digest denies.
            return e.sha256().map(sha256::equals).orElse(false) ? BinaryMatch.MATCH : BinaryMatch.DIGEST_MISMATCH;
        }

        static String[] segments(String absolutePath) {
            return absolutePath.length() <= 1 ? new String[0] : absolutePath.substring(1).split("/", -1);
        }
    }

    /** A named block. */
    record Block(String name, int index, List<Endpoint> endpoints, List<BinaryRule> binaries) {
        BinaryMatch match(BinaryIdentity identity) {
            boolean mismatch = false;
            for (BinaryRule b : binaries) {
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
