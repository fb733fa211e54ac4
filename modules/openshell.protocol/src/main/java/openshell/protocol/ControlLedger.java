package openshell.protocol;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.function.Supplier;

import com.google.protobuf.ByteString;
import com.google.protobuf.Message;

import openshell.protocol.wire.RequestHeader;

/**
 * The idempotency ledger of one runtime generation: request id to (digest, outcome).
 * The same id and digest returns the recorded outcome (a result or a refusal) without
 * running the operation again; the same id with another digest is refused. Bounded by
 * {@link ProtocolLimits#LEDGER_CAPACITY}; the oldest entry is forgotten first. A new
 * runtime generation starts with a new ledger.
 */
public final class ControlLedger {
    private final long runtimeGeneration;
    private final int capacity;
    private final Map<String, Recorded> entries;

    /**
     * A ledger for one generation with the default capacity.
     *
     * @param runtimeGeneration the generation it belongs to
     */
    public ControlLedger(long runtimeGeneration) {
        this(runtimeGeneration, ProtocolLimits.LEDGER_CAPACITY);
    }

    ControlLedger(long runtimeGeneration, int capacity) {
        this.runtimeGeneration = runtimeGeneration;
        this.capacity = capacity;
        this.entries = new LinkedHashMap<>(16, 0.75f, false) {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Recorded> eldest) {
                return size() > ControlLedger.this.capacity;
            }
        };
    }

    /**
     * The generation this ledger belongs to.
     *
     * @return generation
     */
    public long runtimeGeneration() {
        return runtimeGeneration;
    }

    /**
     * Number of remembered requests.
     *
     * @return size
     */
    public synchronized int size() {
        return entries.size();
    }

    /**
     * Runs a control operation at most once per request id.
     *
     * @param request   the stamped request
     * @param operation runs the request; may throw {@link ProtocolException}, which is recorded too
     * @param <R>       the result type
     * @return the (possibly recorded) result
     * @throws ProtocolException {@link Refusal#DIGEST_INVALID} when the digest does not match the
     *                           request, {@link Refusal#DIGEST_MISMATCH} when the id was used with
     *                           another digest, or the recorded refusal
     */
    public <R extends Message> R execute(Message request, Supplier<R> operation) {
        RequestHeader header = RequestDigest.headerOf(request);
        if (header.getRequestId().isEmpty()) {
            throw new ProtocolException(Refusal.INVALID_ARGUMENT, "control request without a request id");
        }
        ByteString digest = RequestDigest.of(request);
        if (!digest.equals(header.getDigest())) {
            throw new ProtocolException(Refusal.DIGEST_INVALID, "digest does not match the request encoding");
        }
        CompletableFuture<Message> outcome;
        boolean first = false;
        synchronized (this) {
            Recorded entry = entries.get(header.getRequestId());
            if (entry == null) {
                entry = new Recorded(digest, new CompletableFuture<>());
                entries.put(header.getRequestId(), entry);
                first = true;
            } else if (!entry.digest().equals(digest)) {
                throw new ProtocolException(Refusal.DIGEST_MISMATCH,
                        "request id '" + header.getRequestId() + "' was used with another request");
            }
            outcome = entry.outcome();
        }
        if (first) {
            try {
                outcome.complete(operation.get());
            } catch (RuntimeException e) {
                outcome.completeExceptionally(e);
            }
        }
        try {
            @SuppressWarnings("unchecked")
            R result = (R) outcome.get();
            return result;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "interrupted waiting for a recorded outcome", e);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof RuntimeException runtime) {
                throw runtime;
            }
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "operation failed", e.getCause());
        }
    }

    private record Recorded(ByteString digest, CompletableFuture<Message> outcome) {
    }
}
