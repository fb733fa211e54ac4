package openshell.protocol;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import io.grpc.stub.StreamObserver;

import static org.junit.jupiter.api.Assertions.assertTrue;

/** Collects a response stream for assertions; every wait is bounded. */
class StreamProbe<T> implements StreamObserver<T> {
    final List<T> received = new CopyOnWriteArrayList<>();
    private final CountDownLatch done = new CountDownLatch(1);
    private final CountDownLatch first = new CountDownLatch(1);
    volatile Throwable error;

    @Override
    public void onNext(T value) {
        if (value instanceof openshell.protocol.wire.RelayDown down && down.hasGrant()) {
            // Credit grants are the stream's bookkeeping (CreditedStream), not relayed bytes.
            return;
        }
        received.add(value);
        first.countDown();
    }

    T awaitFirst(Duration timeout) {
        try {
            assertTrue(first.await(timeout.toMillis(), TimeUnit.MILLISECONDS), "nothing arrived within " + timeout);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
        return received.get(0);
    }

    @Override
    public void onError(Throwable t) {
        error = t;
        done.countDown();
    }

    @Override
    public void onCompleted() {
        done.countDown();
    }

    StreamProbe<T> await(Duration timeout) {
        try {
            assertTrue(done.await(timeout.toMillis(), TimeUnit.MILLISECONDS), "stream did not end within " + timeout);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
        return this;
    }
}
