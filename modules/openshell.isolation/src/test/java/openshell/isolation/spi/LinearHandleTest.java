package openshell.isolation.spi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import openshell.isolation.BackendException;
import openshell.isolation.BackendException.Kind;

import org.junit.jupiter.api.Test;

class LinearHandleTest {
    private static void invalid(org.junit.jupiter.api.function.Executable call) {
        assertEquals(Kind.INVALID, assertThrows(BackendException.class, call).kind());
    }

    @Test
    void aSuccessfulTransitionConsumesTheHandleAndEveryLaterCallIsRefused() {
        LinearHandle handle = new LinearHandle("bound boundary");
        handle.checkLive();
        assertEquals("ready", handle.transition(() -> "ready"));
        assertFalse(handle.live());
        invalid(handle::checkLive);
        AtomicInteger ran = new AtomicInteger();
        invalid(() -> handle.transition(ran::incrementAndGet));
        assertEquals(0, ran.get(), "a consumed handle must not run a second transition");
        assertTrue(assertThrows(BackendException.class, handle::checkLive).getMessage().contains("bound boundary is consumed"));
    }

    @Test
    void aFailedTransitionLeavesTheHandleLiveAndPassesTheErrorOn() {
        LinearHandle handle = new LinearHandle("ready boundary");
        BackendException failure = new BackendException(Kind.FAILED, "agent did not start");
        assertSame(failure, assertThrows(BackendException.class, () -> handle.transition(() -> {
            throw failure;
        })));
        assertTrue(handle.live(), "an error never advances state");
        handle.checkLive();
        assertEquals(1, handle.transition(() -> 1));
        assertFalse(handle.live());
    }

    @Test
    void anErrorOtherThanBackendExceptionAlsoLeavesItLive() {
        LinearHandle handle = new LinearHandle("h");
        assertThrows(IllegalStateException.class, () -> handle.transition(() -> {
            throw new IllegalStateException("bug");
        }));
        assertTrue(handle.live());
    }

    @Test
    void consumeWithoutSuccessorRefusesEverything() {
        LinearHandle handle = new LinearHandle("running boundary");
        handle.consume();
        assertFalse(handle.live());
        invalid(handle::checkLive);
        invalid(() -> handle.transition(() -> "x"));
    }

    @Test
    void aCallDuringATransitionIsRefusedAndDoesNotRun() throws Exception {
        LinearHandle handle = new LinearHandle("bound boundary");
        // From inside the transition itself.
        AtomicReference<BackendException> nested = new AtomicReference<>();
        handle.transition(() -> {
            nested.set(assertThrows(BackendException.class, () -> handle.transition(() -> "nested")));
            return "outer";
        });
        assertEquals(Kind.INVALID, nested.get().kind());
        assertTrue(nested.get().getMessage().contains("in a transition"), nested.get().getMessage());

        // From another thread while the transition runs.
        LinearHandle other = new LinearHandle("ready boundary");
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        Thread first = Thread.ofVirtual().start(() -> other.transition(() -> {
            inside.countDown();
            try {
                return release.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        }));
        assertTrue(inside.await(30, TimeUnit.SECONDS));
        AtomicInteger ran = new AtomicInteger();
        invalid(() -> other.transition(ran::incrementAndGet));
        invalid(other::checkLive);
        assertFalse(other.live());
        release.countDown();
        assertTrue(first.join(java.time.Duration.ofSeconds(30)));
        assertEquals(0, ran.get());
        invalid(other::checkLive);
    }
}
