package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import openshell.isolation.BackendException;
import org.junit.jupiter.api.Test;

/** The control pool's bound: MAX_CONTROL_THREADS operations run, the next is refused and never runs. */
class ControlThreadsTest {

    @Test
    void atTheBoundTheNextOperationIsRefusedUnavailableWithoutRunning() throws Exception {
        ControlThreads threads = new ControlThreads(ControlThreads.MAX_CONTROL_THREADS);
        CountDownLatch started = new CountDownLatch(ControlThreads.MAX_CONTROL_THREADS);
        CountDownLatch release = new CountDownLatch(1);
        List<Thread> callers = new ArrayList<>();
        try {
            for (int i = 0; i < ControlThreads.MAX_CONTROL_THREADS; i++) {
                callers.add(Thread.ofVirtual().start(() -> threads.run(() -> {
                    started.countDown();
                    try {
                        return release.await(TestSandbox.WAIT.toMillis(), TimeUnit.MILLISECONDS);
                    } catch (InterruptedException e) {
                        throw new IllegalStateException(e);
                    }
                })));
            }
            assertTrue(started.await(TestSandbox.WAIT.toMillis(), TimeUnit.MILLISECONDS), "every slot runs");
            assertEquals(ControlThreads.MAX_CONTROL_THREADS, threads.active());
            AtomicBoolean ran = new AtomicBoolean();
            BackendException refused = assertThrows(BackendException.class, () -> threads.run(() -> ran.getAndSet(true)));
            assertEquals(BackendException.Kind.UNAVAILABLE, refused.kind());
            assertTrue(refused.getMessage().contains("MAX_CONTROL_THREADS"), refused.getMessage());
            assertTrue(!ran.get(), "the refused operation never ran");
        } finally {
            release.countDown();
            for (Thread t : callers) {
                t.join(TestSandbox.WAIT.toMillis());
            }
        }
        // A pool thread counts as active until its task has returned, a moment after the caller's join.
        long deadline = System.nanoTime() + TestSandbox.WAIT.toNanos();
        while (threads.active() == ControlThreads.MAX_CONTROL_THREADS && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertEquals(Boolean.TRUE, threads.run(() -> true), "a slot frees once an operation ends");
    }

    @Test
    void anOperationsOwnExceptionReachesTheCaller() {
        ControlThreads threads = new ControlThreads(1);
        BackendException e = assertThrows(BackendException.class, () -> threads.run(() -> {
            throw new BackendException(BackendException.Kind.INVALID, "out of order");
        }));
        assertEquals(BackendException.Kind.INVALID, e.kind());
        assertThrows(IllegalArgumentException.class, () -> new ControlThreads(ControlThreads.MAX_CONTROL_THREADS + 1));
    }
}
