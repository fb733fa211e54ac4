package openshell.tests.e2e;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;

import io.grpc.stub.StreamObserver;

/**
 * A gRPC response observer for tests that speak the gateway's streams raw: it keeps what arrives,
 * each with when it arrived, and how the stream ended.
 *
 * @param <T> the stream's message type
 */
final class StreamRecorder<T> implements StreamObserver<T> {
    /** One message and its {@link System#nanoTime()} on arrival. */
    record Arrival<T>(long at, T message) {
    }

    private final List<Arrival<T>> arrivals = new CopyOnWriteArrayList<>();
    private final CompletableFuture<Throwable> ended = new CompletableFuture<>();

    @Override
    public void onNext(T message) {
        arrivals.add(new Arrival<>(System.nanoTime(), message));
    }

    @Override
    public void onError(Throwable t) {
        ended.complete(t);
    }

    @Override
    public void onCompleted() {
        ended.complete(null);
    }

    /** @return what arrived so far, in order, with when */
    List<Arrival<T>> arrivals() {
        return List.copyOf(arrivals);
    }

    /** @return what arrived so far, in order */
    List<T> messages() {
        return arrivals.stream().map(Arrival::message).toList();
    }

    /** @return completed with the stream's error, or with null once the stream completed */
    CompletableFuture<Throwable> ended() {
        return ended;
    }
}
