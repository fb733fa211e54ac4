package openshell.sandbox;

import java.util.concurrent.atomic.AtomicInteger;
import openshell.linux.SeccompListener;

/**
 * A listener kept open while anyone may still answer through it: the serving loop, and every
 * pending decision taken from it. Closed when the last of them lets go, so a decision made after
 * the workload process exited is answered "caller gone", never with a closed descriptor.
 */
final class SharedListener {
    private final SeccompListener listener;
    private final AtomicInteger holders = new AtomicInteger(1);

    SharedListener(SeccompListener listener) {
        this.listener = listener;
    }

    SeccompListener listener() {
        return listener;
    }

    /** Adds a holder; only called by a current holder, so the listener is still open. */
    void acquire() {
        holders.incrementAndGet();
    }

    void release() {
        if (holders.decrementAndGet() == 0) {
            listener.close();
        }
    }
}
