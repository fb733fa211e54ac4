package openshell.supervisor;

import java.io.IOException;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import openshell.isolation.BackendException;
import openshell.isolation.DenyReason;
import openshell.isolation.IdentityResolution;
import openshell.isolation.PendingDnsQuery;
import openshell.isolation.dns.DnsMessage;
import openshell.policy.AddressClass;
import openshell.policy.Decision;
import openshell.policy.DenyCause;
import openshell.policy.PolicyGeneration;

/**
 * The sandbox's DNS: answers A and AAAA only for names some endpoint could allow for the caller,
 * resolves them on the host (or through an operator alias), drops addresses of refused classes,
 * and pins every answer so the following dial is decided on the name and goes only to an address
 * checked here. Other names get NXDOMAIN, an unresolved caller REFUSED.
 */
final class DnsPlane {
    /** Most addresses in one answer. */
    static final int MAX_ANSWERS = 16;
    /** Most queries being answered at once; beyond it a query is refused EXHAUSTED. */
    static final int MAX_IN_FLIGHT = 64;
    /** TTL of every answer; the pin lives this long plus {@link DnsPins#PIN_GRACE}. */
    static final Duration ANSWER_TTL = Duration.ofSeconds(60);
    /** Attempts at resolving a name on the host before answering SERVFAIL. */
    static final int RESOLVE_ATTEMPTS = 3;
    /** Wait before the first retry; doubled each time. */
    static final Duration RETRY_BACKOFF = Duration.ofMillis(100);
    /** Longest wait for one host resolution. */
    static final Duration RESOLVE_TIMEOUT = Duration.ofSeconds(5);
    /**
     * How long a host resolution is reused for the same name. Each resolution runs on a virtual
     * thread of its own, so that a hung lookup can be timed out; a name asked again within this
     * time (a client's retries, a build's many lookups) skips that hand-off. Short, so a change on
     * the host's DNS reaches the sandbox within seconds of the host's own cache.
     */
    static final Duration RESOLVED_TTL = Duration.ofSeconds(5);
    /** Most names whose resolution is kept; a full table keeps no more until some expire. */
    static final int MAX_RESOLVED_NAMES = 1024;

    private final SandboxMediation mediation;
    private final HostResolver resolver;
    private final Semaphore inFlight;
    private final int maxInFlight;
    private final ConcurrentHashMap<String, Resolved> resolved = new ConcurrentHashMap<>();

    /** A host resolution and when it stops being reused. */
    private record Resolved(List<InetAddress> addresses, Instant expires) {
    }

    DnsPlane(SandboxMediation mediation, HostResolver resolver, int maxInFlight) {
        this.mediation = mediation;
        this.resolver = resolver;
        this.inFlight = new Semaphore(maxInFlight);
        this.maxInFlight = maxInFlight;
    }

    void acceptLoop() {
        try {
            while (mediation.liveLoop()) {
                Optional<PendingDnsQuery> next = mediation.source().acceptDns(SandboxMediation.ACCEPT_POLL);
                if (next.isEmpty()) {
                    continue;
                }
                arrived(next.get());
            }
        } catch (BackendException e) {
            // TERMINATED: the boundary is gone.
        } finally {
            mediation.loopEnded();
        }
    }

    /**
     * One query to answer, from the accept loop or straight from the lane's reader: admitted (an
     * in-flight slot taken) or refused here. An admitted one is answered on the caller's thread
     * when nothing can block it (a denial, an alias, a name resolved within {@link #RESOLVED_TTL}),
     * else on a virtual thread of its own, so the caller never waits for the host's resolver; a
     * refused one on a thread of its own while fewer than {@link SandboxMediation#MAX_REFUSING}
     * refusals are under way.
     */
    void arrived(PendingDnsQuery query) {
        if (!mediation.liveLoop()) {
            mediation.refuse(() -> refuseQuietly(query, DenyReason.MEDIATION_UNAVAILABLE));
        } else if (!inFlight.tryAcquire()) {
            mediation.refuse(() -> {
                mediation.metrics().dnsQuery("exhausted");
                mediation.auditSupervisor("dns", query.identity(), null, null, "deny", "EXHAUSTED",
                        maxInFlight + " DNS queries are in flight, the most allowed", 0);
                refuseQuietly(query, DenyReason.EXHAUSTED);
            });
        } else {
            boolean settled = true;
            try {
                settled = answer(query, true);
            } catch (RuntimeException e) {
                refuseQuietly(query, DenyReason.MEDIATION_UNAVAILABLE);
            } finally {
                if (settled) {
                    inFlight.release();
                }
            }
        }
    }

    /**
     * @param inline whether the caller must not wait for the host's resolver: a name without a
     *               fresh resolution is then answered on a virtual thread, which frees the slot
     * @return whether the query was settled here (false: that thread settles it)
     */
    private boolean answer(PendingDnsQuery query, boolean inline) {
        long started = System.nanoTime();
        DnsMessage.Question q;
        try {
            q = DnsMessage.parse(query.query());
        } catch (DnsMessage.Malformed e) {
            mediation.metrics().dnsQuery("malformed");
            mediation.auditSupervisor("dns", query.identity(), null, null, "deny", "MALFORMED_REQUEST", e.getMessage(),
                    System.nanoTime() - started);
            if (e.id() < 0) {
                refuseQuietly(query, DenyReason.POLICY);
            } else {
                answerQuietly(query, DnsMessage.error(e.id(), e.rcode()));
            }
            return true;
        }
        IdentityResolution who = query.identity();
        Optional<PolicyGeneration> generation = mediation.policies().current();
        Decision decision = generation.isEmpty() ? mediation.policies().denyAll() : generation.get().decideName(who, q.name());
        long generationNumber = mediation.policies().number();
        // Built after the answer went out: the asker does not wait for the audit line.
        java.util.function.Supplier<AuditLine> line = () -> AuditLine.of(mediation.clock().instant(), mediation.sandbox(), "dns",
                generationNumber).decision(decision).identity(who).destination(q.name(), null, 0)
                .field("qtype", String.valueOf(q.type()));
        if (decision instanceof Decision.Deny deny) {
            mediation.metrics().dnsQuery("denied");
            mediation.metrics().decision("dns", "deny", System.nanoTime() - started);
            int rcode = deny.cause() == DenyCause.IDENTITY_UNRESOLVED || deny.cause() == DenyCause.MALFORMED_REQUEST
                    ? DnsMessage.RCODE_REFUSED : DnsMessage.RCODE_NXDOMAIN;
            answerQuietly(query, DnsMessage.response(q, rcode));
            mediation.audit(line.get());
            return true;
        }
        Decision.Allow allow = (Decision.Allow) decision;
        mediation.metrics().decision("dns", "allow", System.nanoTime() - started);
        if (q.qclass() != DnsMessage.CLASS_IN || (q.type() != DnsMessage.TYPE_A && q.type() != DnsMessage.TYPE_AAAA)) {
            // An allowed name has no other records here: an empty answer, so clients fall back to A/AAAA.
            mediation.metrics().dnsQuery("empty");
            answerQuietly(query, DnsMessage.response(q, DnsMessage.RCODE_NOERROR));
            mediation.audit(line.get().field("answer", "empty"));
            return true;
        }
        Optional<InetAddress> alias = mediation.aliases().lookup(q.name());
        Optional<List<InetAddress>> fresh = alias.isPresent() ? Optional.empty() : freshResolution(q.name());
        if (inline && alias.isEmpty() && fresh.isEmpty()) {
            // The host's resolver is to be asked: not on the caller's thread.
            DnsMessage.Question question = q;
            Thread.ofVirtual().name("mediation-dns").start(() -> {
                try {
                    answerResolved(query, question, allow, alias, Optional.empty(), line);
                } catch (RuntimeException e) {
                    refuseQuietly(query, DenyReason.MEDIATION_UNAVAILABLE);
                } finally {
                    inFlight.release();
                }
            });
            return false;
        }
        answerResolved(query, q, allow, alias, fresh, line);
        return true;
    }

    /** The rest of an allowed A or AAAA query: the addresses (the alias, the fresh ones, or resolved now), filtered, pinned, answered. */
    private void answerResolved(PendingDnsQuery query, DnsMessage.Question q, Decision.Allow allow, Optional<InetAddress> alias,
                                Optional<List<InetAddress>> fresh, java.util.function.Supplier<AuditLine> line) {
        List<InetAddress> addresses;
        boolean aliased = alias.isPresent();
        if (aliased) {
            addresses = List.of(alias.get());
        } else if (fresh.isPresent()) {
            addresses = fresh.get();
        } else {
            try {
                addresses = resolveReusing(q.name());
            } catch (UnknownHostException e) {
                mediation.metrics().dnsQuery("nxdomain");
                answerQuietly(query, DnsMessage.response(q, DnsMessage.RCODE_NXDOMAIN));
                mediation.audit(line.get().field("answer", "nxdomain"));
                return;
            } catch (IOException e) {
                mediation.metrics().dnsQuery("servfail");
                answerQuietly(query, DnsMessage.response(q, DnsMessage.RCODE_SERVFAIL));
                mediation.audit(line.get().field("answer", "servfail"));
                return;
            }
        }
        List<InetAddress> answers = new ArrayList<>();
        int refused = 0;
        for (InetAddress a : addresses) {
            if (!DnsMessage.family(a, q.type()) || answers.size() == MAX_ANSWERS) {
                continue;
            }
            if (aliased || AddressClass.permits(a, allow.hostDeclaredExactly())) {
                answers.add(a);
            } else {
                refused++;
            }
        }
        for (InetAddress a : answers) {
            mediation.pins().pin(q.name(), a, aliased, ANSWER_TTL);
        }
        if (aliased) {
            // A loopback target is answered as its stand-in (the sandbox's loopback is its own); both are pinned.
            InetAddress standIn = mediation.aliases().answerFor(q.name()).orElseThrow();
            if (!answers.isEmpty() && !standIn.equals(answers.getFirst())) {
                mediation.pins().pin(q.name(), standIn, true, ANSWER_TTL);
                answers = List.of(standIn);
            }
        }
        mediation.metrics().dnsQuery("answered");
        // The answer goes out first (its pins are in place above); the asker does not wait for the audit line.
        answerQuietly(query, DnsMessage.response(q, DnsMessage.RCODE_NOERROR, answers, (int) ANSWER_TTL.toSeconds()));
        mediation.audit(line.get().field("answer", answers.size() + " addresses" + (aliased ? " (operator alias)" : "")
                + (refused > 0 ? ", " + refused + " of a refused class dropped" : "")));
    }

    /** @return the resolution of the last {@link #RESOLVED_TTL} of this name, if there is one */
    private Optional<List<InetAddress>> freshResolution(String name) {
        Resolved kept = resolved.get(name);
        return kept != null && mediation.clock().instant().isBefore(kept.expires()) ? Optional.of(kept.addresses())
                : Optional.empty();
    }

    /**
     * A resolution of the last {@link #RESOLVED_TTL}, or a new one (kept if the table has room
     * once expired entries are dropped). Failures are never kept.
     */
    private List<InetAddress> resolveReusing(String name) throws IOException {
        Instant now = mediation.clock().instant();
        Resolved kept = resolved.get(name);
        if (kept != null && now.isBefore(kept.expires())) {
            return kept.addresses();
        }
        List<InetAddress> addresses = List.copyOf(resolve(name));
        if (resolved.size() >= MAX_RESOLVED_NAMES) {
            resolved.values().removeIf(r -> !now.isBefore(r.expires()));
        }
        if (resolved.size() < MAX_RESOLVED_NAMES || resolved.containsKey(name)) {
            resolved.put(name, new Resolved(addresses, now.plus(RESOLVED_TTL)));
        }
        return addresses;
    }

    /** @return how many names have a kept resolution, expired or not (for tests of the bound) */
    int resolvedNames() {
        return resolved.size();
    }

    /** Resolves with bounded retries of transient failures; a name that does not exist is not retried. */
    private List<InetAddress> resolve(String name) throws IOException {
        IOException last = null;
        Duration backoff = RETRY_BACKOFF;
        for (int attempt = 1; attempt <= RESOLVE_ATTEMPTS; attempt++) {
            CompletableFuture<List<InetAddress>> f = new CompletableFuture<>();
            Thread.ofVirtual().name("mediation-resolve").start(() -> {
                try {
                    f.complete(resolver.resolve(name));
                } catch (IOException | RuntimeException e) {
                    f.completeExceptionally(e);
                }
            });
            try {
                return f.get(RESOLVE_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            } catch (ExecutionException e) {
                if (e.getCause() instanceof UnknownHostException u) {
                    throw u;
                }
                last = e.getCause() instanceof IOException io ? io : new IOException("the resolver failed", e.getCause());
            } catch (TimeoutException e) {
                last = new IOException("resolving took longer than " + RESOLVE_TIMEOUT);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted while resolving", e);
            }
            if (attempt < RESOLVE_ATTEMPTS) {
                try {
                    Thread.sleep(backoff);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted while resolving", e);
                }
                backoff = backoff.multipliedBy(2);
            }
        }
        throw last;
    }

    private static void answerQuietly(PendingDnsQuery query, byte[] response) {
        try {
            query.answer(response);
        } catch (BackendException e) {
            // Already answered or the caller went away.
        }
    }

    private static void refuseQuietly(PendingDnsQuery query, DenyReason reason) {
        try {
            query.refuse(reason);
        } catch (BackendException e) {
            // Already answered or the caller went away.
        }
    }
}
