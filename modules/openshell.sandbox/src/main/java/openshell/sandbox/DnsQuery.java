package openshell.sandbox;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import openshell.isolation.BackendException;
import openshell.isolation.DenyReason;
import openshell.isolation.IdentityResolution;
import openshell.isolation.PendingDnsQuery;

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
            reply.accept(DnsMessages.refusal(query, reason));
        } finally {
            settled.complete(null);
        }
    }
}
