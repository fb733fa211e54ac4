package openshell.sandbox;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import openshell.isolation.BackendException;
import openshell.isolation.DenyReason;
import openshell.isolation.IdentityResolution;
import openshell.isolation.PendingDnsQuery;
import openshell.isolation.dns.DnsMessage;

/** One DNS query received by the relay, waiting for the decision side's answer. */
final class DnsQuery implements PendingDnsQuery {
    private final byte[] query;
    private final IdentityResolution identity;
    private final Consumer<byte[]> reply;
    private final AtomicBoolean decided = new AtomicBoolean();
    private final CompletableFuture<Void> settled = new CompletableFuture<>();

    /**
     * @param query    the query message
     * @param identity who asked, or why that is unknown
     * @param reply    sends a response to the asker
     */
    DnsQuery(byte[] query, IdentityResolution identity, Consumer<byte[]> reply) {
        this.query = query.clone();
        this.identity = identity;
        this.reply = reply;
    }

    void onSettled(Runnable action) {
        settled.thenRun(action);
    }

    @Override
    public byte[] query() {
        return query.clone();
    }

    @Override
    public IdentityResolution identity() {
        return identity;
    }

    @Override
    public void answer(byte[] response) {
        if (response == null || response.length > MAX_MESSAGE_BYTES) {
            throw new BackendException(BackendException.Kind.INVALID, "a response of 1.." + MAX_MESSAGE_BYTES + " bytes is required");
        }
        if (!decided.compareAndSet(false, true)) {
            throw new BackendException(BackendException.Kind.INVALID, "this query was already answered");
        }
        try {
            reply.accept(response.clone());
        } finally {
            settled.complete(null);
        }
    }

    @Override
    public void refuse(DenyReason reason) {
        if (!decided.compareAndSet(false, true)) {
            throw new BackendException(BackendException.Kind.INVALID, "this query was already answered");
        }
        try {
            // REFUSED for a decision (policy, identity), SERVFAIL for what may pass (unavailable, exhausted,
            // timeout): either way the resolver stops at once instead of retrying.
            reply.accept(DnsMessage.refusal(query, reason == DenyReason.POLICY || reason == DenyReason.IDENTITY_UNRESOLVED
                    ? DnsMessage.RCODE_REFUSED : DnsMessage.RCODE_SERVFAIL));
        } finally {
            settled.complete(null);
        }
    }
}
