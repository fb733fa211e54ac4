package openshell.policy;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.IdentityResolution;

/**
 * One installed generation of a sandbox's policy: the decision engine. Immutable, so the supervisor
 * swaps generations atomically (one reference) and every decision sees exactly one generation.
 * Pure and deterministic: a decision depends only on the policy, the workload's symlinks as they
 * were when the generation was built ({@link WorkloadPaths}) and the arguments, never on time,
 * DNS or the command line.
 *
 * <p>Semantics, upstream OpenShell's: default deny; an unresolved identity denies; an endpoint and
 * a binary must match in the same block; a {@code path:} binary matches the executable or any
 * ancestor (exactly or by glob), and a pinned {@code sha256} must equal that executable's known
 * digest; L7 allows are the union over the matching blocks, and a deny rule in any of them wins,
 * while a block whose binaries do not match the caller contributes neither; the reported rule
 * comes from the lexicographically smallest block key, then document order. A {@code tcp}
 * endpoint is never inspected, and when a {@code rest} endpoint also matches, the connection is
 * inspected and the {@code tcp} endpoint grants no request. Under {@code enforcement: audit} a
 * request the rules refuse is allowed with {@link Decision.Allow#wouldDeny}. A connection's
 * address must also be {@linkplain AddressClass permitted}: private only when an allowing
 * endpoint names the exact host or address, loopback, link-local, metadata and the like never
 * (unless the destination is an operator's {@linkplain Destination#aliased alias}).
 */
public final class PolicyGeneration {
    private final long number;
    private final Policy policy;
    private final WorkloadPaths paths;
    private final List<NetworkModel.Block> blocks;
    private final EndpointIndex index;

    private PolicyGeneration(long number, Policy policy, WorkloadPaths paths) {
        if (number < 1) {
            throw new PolicyException("a generation number is positive: " + number);
        }
        this.number = number;
        this.policy = Objects.requireNonNull(policy, "policy");
        this.paths = Objects.requireNonNull(paths, "paths");
        List<NetworkModel.Block> expanded = new ArrayList<>();
        for (NetworkModel.Block b : policy.blocks()) {
            expanded.add(b.expanded(paths));
        }
        this.blocks = List.copyOf(expanded);
        this.index = new EndpointIndex(blocks);
    }

    /**
     * @param policy the policy a sandbox is created with
     * @return generation 1, matching binary paths as written
     */
    public static PolicyGeneration first(Policy policy) {
        return new PolicyGeneration(1, policy, WorkloadPaths.asWritten());
    }

    /**
     * @param policy the policy a sandbox is created with
     * @param paths  the workload's view of its files, to expand binary paths through symlinks
     * @return generation 1
     */
    public static PolicyGeneration first(Policy policy, WorkloadPaths paths) {
        return new PolicyGeneration(1, policy, paths);
    }

    /**
     * @param number the generation number, positive
     * @param policy the policy
     * @return the generation (for a supervisor resuming a known generation)
     */
    public static PolicyGeneration of(long number, Policy policy) {
        return new PolicyGeneration(number, policy, WorkloadPaths.asWritten());
    }

    /**
     * @param number the generation number, positive
     * @param policy the policy
     * @param paths  the workload's view of its files
     * @return the generation
     */
    public static PolicyGeneration of(long number, Policy policy, WorkloadPaths paths) {
        return new PolicyGeneration(number, policy, paths);
    }

    /**
     * The next generation, for a hot reload, expanding binary paths as this one did. Only the
     * network section may change.
     *
     * @param next the new, already validated policy
     * @return generation {@code number() + 1}
     * @throws PolicyException if a static section differs
     */
    public PolicyGeneration successor(Policy next) {
        return successor(next, paths);
    }

    /**
     * @param next  the new, already validated policy
     * @param paths the workload's view of its files now (a reload expands symlinks again)
     * @return generation {@code number() + 1}
     * @throws PolicyException if a static section differs
     */
    public PolicyGeneration successor(Policy next, WorkloadPaths paths) {
        Objects.requireNonNull(next, "next");
        if (!policy.sameStaticSections(next)) {
            throw new PolicyException("filesystem_policy, landlock and process are fixed at creation; only "
                    + "network_policies may change in a reload");
        }
        return new PolicyGeneration(Math.addExact(number, 1), next, paths);
    }

    /** @return the generation number */
    public long number() {
        return number;
    }

    /** @return the policy */
    public Policy policy() {
        return policy;
    }

    /**
     * Decides a pending TCP open.
     *
     * @param who   the caller's identity, or why it is unknown
     * @param where the destination
     * @return allow with the endpoint and how to relay, or deny with the cause
     */
    public Decision decideConnection(IdentityResolution who, Destination where) {
        Objects.requireNonNull(where, "where");
        BinaryIdentity id = identity(who);
        if (id == null) {
            return unresolved(who);
        }
        Matched m = admit(id, where, where.port());
        if (m.deny != null) {
            return m.deny;
        }
        boolean inspect = false;
        for (NetworkModel.Endpoint ep : m.endpoints) {
            inspect |= ep.rest;
        }
        NetworkModel.Endpoint chosen = null;
        for (NetworkModel.Endpoint ep : m.endpoints) {
            // An inspected connection is admitted by a rest endpoint that allows something.
            if (ep.grants() && (!inspect || ep.rest) && (chosen == null || NetworkModel.Endpoint.reportOrder(ep, chosen) < 0)) {
                chosen = ep;
            }
        }
        if (chosen == null) {
            return Decision.Deny.lazily(DenyCause.NO_RULE, () -> where + " is inspected, and no matching rest endpoint allows any request");
        }
        return chosen.allow(inspect ? Inspection.HTTP : Inspection.OPAQUE, m.declaredExactly);
    }

    /**
     * Decides one HTTP request on a connection to the destination.
     *
     * @param who    the caller's identity, or why it is unknown
     * @param where  the destination
     * @param method the request method (case-insensitive; a GET rule also covers HEAD); empty for
     *               no request, which is the connection decision
     * @param target the request target in origin-form; the query is split off, and only rules
     *               with a {@code query} condition read it
     * @return allow with the rule, or deny with the cause (and the deny rule, if one matched)
     */
    public Decision decideRequest(IdentityResolution who, Destination where, String method, String target) {
        Objects.requireNonNull(where, "where");
        Objects.requireNonNull(method, "method");
        Objects.requireNonNull(target, "target");
        if (method.isEmpty()) {
            return decideConnection(who, where);
        }
        BinaryIdentity id = identity(who);
        if (id == null) {
            return unresolved(who);
        }
        String m = HttpMethods.canonical(method);
        if (m == null) {
            return Decision.Deny.of(DenyCause.MALFORMED_REQUEST, "not an HTTP method: '" + printable(method) + "'");
        }
        String[] segments;
        try {
            segments = RequestPaths.segments(target);
        } catch (RequestPaths.Refused e) {
            return Decision.Deny.of(DenyCause.MALFORMED_REQUEST, "request target refused: " + e.getMessage());
        }
        Matched matched = admit(id, where, where.port());
        if (matched.deny != null) {
            return matched.deny;
        }
        List<NetworkModel.Endpoint> rest = new ArrayList<>(matched.endpoints.size());
        boolean readsQuery = false;
        boolean enforce = false;
        for (NetworkModel.Endpoint ep : matched.endpoints) {
            if (ep.rest) {
                rest.add(ep);
                readsQuery |= ep.readsQuery;
                enforce |= ep.enforce;
            }
        }
        if (rest.isEmpty()) {
            NetworkModel.Endpoint chosen = null;
            for (NetworkModel.Endpoint ep : matched.endpoints) {
                if (ep.grants() && (chosen == null || NetworkModel.Endpoint.reportOrder(ep, chosen) < 0)) {
                    chosen = ep;
                }
            }
            return chosen == null ? Decision.Deny.of(DenyCause.NO_RULE, "no endpoint grants " + where)
                    : chosen.allow(Inspection.OPAQUE, matched.declaredExactly);
        }
        if (rest.size() > 1) {
            rest.sort(NetworkModel.Endpoint::reportOrder);
        }
        Map<String, List<String>> query = null;
        if (readsQuery) {
            try {
                query = QueryString.parse(QueryString.rawQuery(target));
            } catch (RequestPaths.Refused e) {
                return Decision.Deny.of(DenyCause.MALFORMED_REQUEST, "request target refused: " + e.getMessage());
            }
        }
        Decision.Deny refused = null;
        search:
        for (NetworkModel.Endpoint ep : rest) {
            for (NetworkModel.HttpRule r : ep.denies) {
                if (r.matches(m, segments, query, true)) {
                    refused = Decision.Deny.byRule(r.ref(), request(m, segments) + " refused by deny rule " + r.ref());
                    break search;
                }
            }
        }
        if (refused == null) {
            for (NetworkModel.Endpoint ep : rest) {
                for (NetworkModel.HttpRule r : ep.allows) {
                    if (r.matches(m, segments, query, false)) {
                        return r.allow(matched.declaredExactly);
                    }
                }
            }
            refused = Decision.Deny.lazily(DenyCause.NO_RULE, () -> "no rule allows " + request(m, segments) + " to " + where);
        }
        // Overlapping endpoints must agree on enforcement (checked at load); if two wildcards still disagree, enforce wins.
        return enforce ? refused : Decision.Allow.audited(rest.getFirst().ref, matched.declaredExactly, refused);
    }

    private static String request(String method, String[] segments) {
        return method + " " + RequestPaths.render(segments);
    }

    /**
     * Answers the DNS plane's question: could any endpoint allow this name for this caller?
     *
     * @param who  the caller's identity, or why it is unknown
     * @param host the queried name
     * @return allow naming an endpoint ({@link Decision.Allow#hostDeclaredExactly} tells whether
     *         private answers may be kept), or deny
     */
    public Decision decideName(IdentityResolution who, String host) {
        Objects.requireNonNull(host, "host");
        BinaryIdentity id = identity(who);
        if (id == null) {
            return unresolved(who);
        }
        String name = HostNames.canonical(host);
        if (name == null || HostNames.ipLiteral(host) != null) {
            return Decision.Deny.of(DenyCause.MALFORMED_REQUEST, "not a DNS host name: '" + printable(host) + "'");
        }
        Matched m = admitByName(id, name);
        if (m.deny != null) {
            return m.deny;
        }
        NetworkModel.Endpoint chosen = null;
        for (NetworkModel.Endpoint ep : m.endpoints) {
            if (!ep.grants()) {
                continue;
            }
            if (chosen == null) {
                chosen = ep;
                continue;
            }
            boolean epExact = ep.declaresExactly(name, null);
            boolean chosenExact = chosen.declaresExactly(name, null);
            if ((epExact && !chosenExact) || (epExact == chosenExact && NetworkModel.Endpoint.reportOrder(ep, chosen) < 0)) {
                chosen = ep;
            }
        }
        if (chosen == null) {
            return Decision.Deny.of(DenyCause.NO_RULE, "the endpoints for " + name + " only deny");
        }
        return chosen.allow(chosen.rest ? Inspection.HTTP : Inspection.OPAQUE, m.declaredExactly);
    }

    /**
     * Re-checks a connection an earlier generation admitted; the supervisor closes its relay
     * unless this allows it.
     *
     * @param admitted the admission
     * @return allow (possibly under another rule), or deny: the connection is no longer allowed,
     *         or it would now be relayed differently ({@link DenyCause#INSPECTION_CHANGED})
     */
    public Decision recheck(Admission admitted) {
        Objects.requireNonNull(admitted, "admitted");
        Decision now = decideConnection(admitted.identity(), admitted.destination());
        if (now instanceof Decision.Deny d) {
            return Decision.Deny.of(d.cause(), "generation " + number + " no longer allows it: " + d.reason());
        }
        Decision.Allow a = (Decision.Allow) now;
        if (a.inspection() != admitted.decision().inspection()) {
            return Decision.Deny.of(DenyCause.INSPECTION_CHANGED, "generation " + number + " relays it as "
                    + a.inspection() + ", it was admitted as " + admitted.decision().inspection());
        }
        return a;
    }

    /**
     * The endpoints that match a destination and whose blocks list the caller; or, when there are
     * none or the address is refused, the denial (then {@code endpoints} is empty).
     */
    private record Matched(List<NetworkModel.Endpoint> endpoints, boolean declaredExactly, Decision.Deny deny) {
        static Matched denied(Decision.Deny deny) {
            return new Matched(List.of(), false, deny);
        }
    }

    private Matched admit(BinaryIdentity id, Destination where, int port) {
        String host = where.hostOrNull();
        InetAddress address = where.addressOrNull();
        List<NetworkModel.Endpoint> candidates = index.candidates(host, address, port);
        if (candidates.isEmpty()) {
            return Matched.denied(Decision.Deny.lazily(DenyCause.NO_ENDPOINT, () -> "no endpoint declares " + where));
        }
        Matched matched = byBinary(id, candidates, where, host, address);
        if (matched.deny != null) {
            return matched;
        }
        if (address != null && !where.aliased()) {
            AddressClass c = AddressClass.of(address);
            if (!c.permitted(matched.declaredExactly)) {
                return Matched.denied(Decision.Deny.lazily(DenyCause.ADDRESS_REFUSED, () -> address.getHostAddress() + " is " + c
                        + (c == AddressClass.PRIVATE ? " and no allowing endpoint declares this exact host"
                                : ", which is never dialled")));
            }
        }
        return matched;
    }

    private Matched admitByName(BinaryIdentity id, String name) {
        List<NetworkModel.Endpoint> candidates = index.candidates(name, null, 0);
        if (candidates.isEmpty()) {
            return Matched.denied(Decision.Deny.lazily(DenyCause.NO_ENDPOINT, () -> "no endpoint declares " + name));
        }
        return byBinary(id, candidates, name, name, null);
    }

    /** @param where a Destination or a host name, rendered only when denying */
    private Matched byBinary(BinaryIdentity id, List<NetworkModel.Endpoint> candidates, Object where, String host,
                            InetAddress address) {
        List<NetworkModel.Endpoint> matched = new ArrayList<>(candidates.size());
        boolean mismatch = false;
        int lastBlock = -1;
        NetworkModel.BinaryMatch last = NetworkModel.BinaryMatch.NONE;
        for (NetworkModel.Endpoint ep : candidates) {
            if (ep.blockIndex != lastBlock) {
                lastBlock = ep.blockIndex;
                last = blocks.get(lastBlock).match(id);
            }
            if (last == NetworkModel.BinaryMatch.MATCH) {
                matched.add(ep);
            } else {
                mismatch |= last == NetworkModel.BinaryMatch.DIGEST_MISMATCH;
            }
        }
        if (matched.isEmpty()) {
            boolean digest = mismatch;
            return Matched.denied(Decision.Deny.lazily(digest ? DenyCause.DIGEST_MISMATCH : DenyCause.BINARY_NOT_ALLOWED, () -> {
                List<String> names = new ArrayList<>();
                for (NetworkModel.Endpoint ep : candidates) {
                    String n = blocks.get(ep.blockIndex).name();
                    if (!names.contains(n)) {
                        names.add(n);
                    }
                }
                return digest ? "the digest of " + id.path() + " is unknown or differs from the sha256 pinned in " + names
                        : where + " is declared in " + names + ", which do not list " + id.path();
            }));
        }
        boolean exactly = false;
        for (NetworkModel.Endpoint ep : matched) {
            exactly |= ep.grants() && ep.declaresExactly(host, address);
        }
        return new Matched(matched, exactly, null);
    }

    private static BinaryIdentity identity(IdentityResolution who) {
        Objects.requireNonNull(who, "who");
        return who instanceof IdentityResolution.Resolved(BinaryIdentity id) ? id : null;
    }

    private static Decision.Deny unresolved(IdentityResolution who) {
        return Decision.Deny.of(DenyCause.IDENTITY_UNRESOLVED, "the caller's identity is unresolved: "
                + ((IdentityResolution.Unresolved) who).reason());
    }

    private static String printable(String s) {
        String t = s.length() > 64 ? s.substring(0, 64) + "..." : s;
        return t.replaceAll("[^\\x20-\\x7e]", "?");
    }

    @Override
    public String toString() {
        return "PolicyGeneration[" + number + ", " + policy + "]";
    }
}
