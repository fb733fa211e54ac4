package openshell.protocol;

import java.time.Duration;
import java.util.Objects;
import java.util.OptionalInt;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;

import openshell.protocol.wire.ProcessInput;
import openshell.protocol.wire.ProcessOutput;
import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;

/**
 * One end of a bidirectional byte stream (a mediated TCP relay, or a process's stdin and
 * output) under per-stream message credits, on top of HTTP/2 flow control.
 *
 * <p>Why: Helidon 4.1.7's HTTP/2 server hands each inbound DATA frame from the connection's
 * single reader thread to the stream's queue of 32 frames and blocks while it is full; the
 * stream's window is returned only when the stream's thread takes a frame. A stream whose
 * handler blocks (a workload that stops reading, or a handler waiting for a WINDOW_UPDATE that
 * only the blocked reader could read) therefore froze the whole link: control calls, DNS and
 * every other relay. Here the handler never runs on Helidon's stream thread: inbound messages
 * go to a queue of at most {@link #MAX_IN_FLIGHT} and are delivered on this stream's own
 * thread, and a sender never has more than {@link #MAX_IN_FLIGHT} messages unacknowledged.
 * The receiver acknowledges delivered messages with grant messages on the reverse direction of
 * the same stream; grants themselves need no credit. A peer that sends beyond its credit, or
 * grants more than was sent, fails the stream (closed, never buffered without bound).
 *
 * @param <I> inbound message type
 * @param <O> outbound message type
 */
public final class CreditedStream<I, O> {
    /** Messages a sender may have sent and not yet had granted back, per stream and direction. */
    public static final int MAX_IN_FLIGHT = 31;
    /** Largest payload of one credited message (bytes): a relay or stdio chunk. */
    public static final int MAX_CHUNK_BYTES = 16 * 1024;
    /**
     * Largest chunk a bulk sender reads for one message (bytes): with the gRPC prefix (5 bytes) and
     * the protobuf tag (1) and length (2) the message fills one HTTP/2 frame of
     * {@link ProtocolLimits#MAX_FRAME_BYTES} exactly; a {@link #MAX_CHUNK_BYTES} chunk takes a
     * second frame of 9 bytes (a TLS record, a write and a wake-up of the peer's reader more).
     */
    public static final int FRAME_CHUNK_BYTES = ProtocolLimits.MAX_FRAME_BYTES - 8;
    /** A receiver grants back at once when this many delivered messages are unacknowledged. */
    static final int GRANT_BATCH = 8;
    private static final Duration POLL = Duration.ofMillis(200);
    private static final Object END = new Object();

    private final Kind<I, O> kind;
    private final StreamObserver<I> delivery;
    private final Semaphore credits = new Semaphore(MAX_IN_FLIGHT);
    private final BlockingQueue<Object> inbound = new ArrayBlockingQueue<>(MAX_IN_FLIGHT + 1);
    private final CompletableFuture<StreamObserver<O>> outbound = new CompletableFuture<>();
    // The peer completed or failed its direction; the end marker is queued.
    private final AtomicBoolean ended = new AtomicBoolean();
    // Failed, cancelled, or (at the caller) completed by the runtime: nothing more is sent.
    private final AtomicBoolean dead = new AtomicBoolean();
    private final AtomicBoolean outboundClosed = new AtomicBoolean();
    private final Object sendLock = new Object();
    private final Object accounting = new Object();
    private volatile String endReason = "the stream ended";
    private volatile Throwable failure;
    // guarded by accounting
    private long sent;
    private long granted;
    private long received;
    private long grantedBack;
    // only the delivery thread
    private long delivered;

    private CreditedStream(Kind<I, O> kind, StreamObserver<I> delivery, ThreadFactory threads) {
        this.kind = kind;
        this.delivery = delivery;
        threads.newThread(this::deliver).start();
    }

    /**
     * A credited stream end whose inbound messages (grants excepted) reach {@code delivery}, in
     * order, on a thread of {@code threads}; connect the outbound observer before sending.
     *
     * @param kind     which stream and which end
     * @param delivery the application's handler of inbound messages (it may block)
     * @param threads  makes this stream's delivery thread (a platform thread if the handler
     *                 blocks in native code)
     * @param <I>      inbound message type
     * @param <O>      outbound message type
     * @return the stream end
     */
    public static <I, O> CreditedStream<I, O> create(Kind<I, O> kind, StreamObserver<I> delivery, ThreadFactory threads) {
        return new CreditedStream<>(Objects.requireNonNull(kind), Objects.requireNonNull(delivery), threads);
    }

    /**
     * The observer gRPC delivers inbound messages to (the service's return value, or the
     * response observer given to the stub). It never blocks.
     *
     * @return the inbound observer
     */
    public StreamObserver<I> inbound() {
        return new StreamObserver<>() {
            @Override
            public void onNext(I message) {
                received(message);
            }

            @Override
            public void onError(Throwable t) {
                end(t, "the stream failed: " + Status.fromThrowable(t));
            }

            @Override
            public void onCompleted() {
                end(null, "the peer completed the stream");
            }
        };
    }

    /**
     * Attaches the raw outbound observer (the service's response observer, or what the stub returned).
     *
     * @param observer the outbound observer
     */
    public void connect(StreamObserver<O> observer) {
        if (observer instanceof ServerCallStreamObserver<O> call) {
            // A reset stream reaches a service only through these handlers (Helidon 4.1.7 calls the
            // listener's onComplete on RST_STREAM): without them the delivery would wait forever.
            // Nothing more is written on a reset stream: Helidon 4.1.7's client drops the link on
            // HEADERS for a stream it already forgot, and a late status would be such HEADERS.
            Runnable reset = () -> {
                outboundClosed.set(true);
                end(Status.CANCELLED.withDescription("the caller reset the stream").asRuntimeException(),
                        "the caller reset the stream");
            };
            call.setOnCancelHandler(reset);
            call.setOnCloseHandler(reset);
        }
        outbound.complete(Objects.requireNonNull(observer));
    }

    /**
     * Sends one credited message, waiting while {@link #MAX_IN_FLIGHT} are unacknowledged.
     *
     * @param message the message
     * @throws ProtocolException TRANSPORT_FAILED once the stream has ended
     */
    public void send(O message) {
        try {
            while (!credits.tryAcquire(POLL.toMillis(), TimeUnit.MILLISECONDS)) {
                if (dead.get()) {
                    throw new ProtocolException(Refusal.TRANSPORT_FAILED, endReason);
                }
                if (ended.get()) {
                    // A caller that ended its side can grant no more; HTTP/2 flow control alone
                    // bounds the rest of this direction, which the caller's own thread reads.
                    break;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "interrupted while waiting for stream credit");
        }
        if (dead.get() || outboundClosed.get()) {
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, endReason);
        }
        synchronized (accounting) {
            sent++;
        }
        write(message);
    }

    /** Completes the outbound direction (once). */
    public void complete() {
        if (outboundClosed.compareAndSet(false, true)) {
            synchronized (sendLock) {
                try {
                    outbound().onCompleted();
                } catch (RuntimeException e) {
                    // already closed underneath
                }
            }
        }
    }

    /**
     * Fails the stream: the peer sees {@code status}, later sends and deliveries stop.
     *
     * @param status why
     */
    public void fail(Status status) {
        if (outboundClosed.compareAndSet(false, true)) {
            synchronized (sendLock) {
                try {
                    StreamObserver<O> out = outbound();
                    if (out instanceof ClientCallStreamObserver<O> call) {
                        call.cancel(status.getDescription(), status.getCause());
                    } else {
                        out.onError(status.asRuntimeException());
                    }
                } catch (RuntimeException e) {
                    // already closed underneath
                }
            }
        } else if (!dead.get() && outbound.getNow(null) instanceof ClientCallStreamObserver<O> call) {
            // A caller that completed its upload can still cut the call (the peer's side stays open otherwise).
            synchronized (sendLock) {
                try {
                    call.cancel(status.getDescription(), status.getCause());
                } catch (RuntimeException e) {
                    // already closed underneath
                }
            }
        }
        end(status.asRuntimeException(), "the stream was failed: " + status);
    }

    /** @return whether the stream is over for sending (failed, cancelled, or the call completed) */
    public boolean isEnded() {
        return dead.get();
    }

    /** @return credits the sender holds right now (for tests and metrics) */
    public int availableCredits() {
        return credits.availablePermits();
    }

    private void write(O message) {
        synchronized (sendLock) {
            if (outboundClosed.get()) {
                if (kind.isGrant(message)) {
                    return;
                }
                throw new ProtocolException(Refusal.TRANSPORT_FAILED, endReason);
            }
            try {
                outbound().onNext(message);
            } catch (RuntimeException e) {
                end(e, "sending failed: " + e.getMessage());
                throw new ProtocolException(Refusal.TRANSPORT_FAILED, "sending failed: " + e.getMessage(), e);
            }
        }
    }

    private StreamObserver<O> outbound() {
        StreamObserver<O> out = outbound.getNow(null);
        if (out != null) {
            return out;
        }
        try {
            // The first inbound message can come before the stub's call returned the observer.
            return outbound.get(POLL.toMillis() * 50, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "the stream's outbound side was never connected");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "interrupted");
        }
    }

    private void received(I message) {
        if (ended.get()) {
            return;
        }
        OptionalInt grant = kind.grant(message);
        if (grant.isPresent()) {
            int n = grant.getAsInt();
            boolean valid;
            synchronized (accounting) {
                valid = n > 0 && n <= sent - granted;
                if (valid) {
                    granted += n;
                }
            }
            if (!valid) {
                fail(Status.FAILED_PRECONDITION.withDescription("INVALID: a grant of " + n + " exceeds what was sent"));
                return;
            }
            credits.release(n);
            return;
        }
        if (kind.payloadBytes(message) > MAX_CHUNK_BYTES) {
            fail(Status.RESOURCE_EXHAUSTED.withDescription("INVALID: a stream message above " + MAX_CHUNK_BYTES + " bytes"));
            return;
        }
        boolean within;
        synchronized (accounting) {
            received++;
            within = received - grantedBack <= MAX_IN_FLIGHT;
        }
        if (!within || !inbound.offer(message)) {
            fail(Status.RESOURCE_EXHAUSTED.withDescription("INVALID: more than " + MAX_IN_FLIGHT
                    + " unacknowledged stream messages"));
        }
    }

    private void end(Throwable cause, String reason) {
        if (cause != null || kind.caller()) {
            if (dead.compareAndSet(false, true)) {
                endReason = reason;
            }
        }
        if (ended.compareAndSet(false, true)) {
            endReason = reason;
            failure = cause;
            // Room is reserved for the marker: the queue holds at most MAX_IN_FLIGHT messages.
            inbound.offer(END);
        }
    }

    @SuppressWarnings("unchecked")
    private void deliver() {
        try {
            while (true) {
                Object next = inbound.take();
                if (next == END) {
                    if (kind.caller()) {
                        // The caller's END_STREAM lets the runtime's stream thread finish.
                        complete();
                    }
                    Throwable t = failure;
                    if (t == null) {
                        delivery.onCompleted();
                    } else {
                        delivery.onError(t);
                    }
                    return;
                }
                delivery.onNext((I) next);
                delivered++;
                int owed;
                synchronized (accounting) {
                    owed = (int) (delivered - grantedBack);
                    if (owed >= GRANT_BATCH || (owed > 0 && inbound.isEmpty())) {
                        grantedBack += owed;
                    } else {
                        owed = 0;
                    }
                }
                if (owed > 0) {
                    write(kind.grantMessage(owed));
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (RuntimeException e) {
            fail(Status.INTERNAL.withDescription("FAILED: " + e.getMessage()));
        }
    }

    /**
     * Which messages of a stream are grants, and how a grant is written.
     *
     * @param <I> inbound message type
     * @param <O> outbound message type
     */
    public interface Kind<I, O> {
        /** The runtime's end of a relay. */
        Kind<RelayUp, RelayDown> RUNTIME_RELAY = new Kind<>() {
            @Override
            public OptionalInt grant(RelayUp message) {
                return message.hasGrant() ? OptionalInt.of(message.getGrant()) : OptionalInt.empty();
            }

            @Override
            public RelayDown grantMessage(int credits) {
                return RelayDown.newBuilder().setGrant(credits).build();
            }

            @Override
            public boolean isGrant(RelayDown message) {
                return message.hasGrant();
            }

            @Override
            public int payloadBytes(RelayUp message) {
                return message.getData().size();
            }
        };
        /** The supervisor's end of a relay. */
        Kind<RelayDown, RelayUp> SUPERVISOR_RELAY = new Kind<>() {
            @Override
            public boolean caller() {
                return true;
            }

            @Override
            public OptionalInt grant(RelayDown message) {
                return message.hasGrant() ? OptionalInt.of(message.getGrant()) : OptionalInt.empty();
            }

            @Override
            public RelayUp grantMessage(int credits) {
                return RelayUp.newBuilder().setGrant(credits).build();
            }

            @Override
            public boolean isGrant(RelayUp message) {
                return message.hasGrant();
            }

            @Override
            public int payloadBytes(RelayDown message) {
                return message.getData().size();
            }
        };
        /** The runtime's end of a process's I/O. */
        Kind<ProcessInput, ProcessOutput> RUNTIME_PROCESS = new Kind<>() {
            @Override
            public OptionalInt grant(ProcessInput message) {
                return message.hasGrant() ? OptionalInt.of(message.getGrant()) : OptionalInt.empty();
            }

            @Override
            public ProcessOutput grantMessage(int credits) {
                return ProcessOutput.newBuilder().setGrant(credits).build();
            }

            @Override
            public boolean isGrant(ProcessOutput message) {
                return message.hasGrant();
            }

            @Override
            public int payloadBytes(ProcessInput message) {
                return message.getStdin().size();
            }
        };
        /** The supervisor's end of a process's I/O. */
        Kind<ProcessOutput, ProcessInput> SUPERVISOR_PROCESS = new Kind<>() {
            @Override
            public boolean caller() {
                return true;
            }

            @Override
            public OptionalInt grant(ProcessOutput message) {
                return message.hasGrant() ? OptionalInt.of(message.getGrant()) : OptionalInt.empty();
            }

            @Override
            public ProcessInput grantMessage(int credits) {
                return ProcessInput.newBuilder().setGrant(credits).build();
            }

            @Override
            public boolean isGrant(ProcessInput message) {
                return message.hasGrant();
            }

            @Override
            public int payloadBytes(ProcessOutput message) {
                return Math.max(message.getStdout().size(), message.getStderr().size());
            }
        };

        /**
         * @return whether this is the calling (supervisor) end, which completes its side once the
         *         runtime completed the call
         */
        default boolean caller() {
            return false;
        }

        /**
         * @param message an inbound message
         * @return the credits it grants, if it is a grant
         */
        OptionalInt grant(I message);

        /**
         * @param credits credits to grant the peer
         * @return the grant message
         */
        O grantMessage(int credits);

        /**
         * @param message an outbound message
         * @return whether it is a grant (grants need no credit)
         */
        boolean isGrant(O message);

        /**
         * @param message an inbound message
         * @return its payload size, checked against {@link #MAX_CHUNK_BYTES}
         */
        int payloadBytes(I message);
    }
}
