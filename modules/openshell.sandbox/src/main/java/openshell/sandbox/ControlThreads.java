package openshell.sandbox;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import openshell.isolation.BackendException;

/**
 * The platform threads control operations run on. Launches, waits and kills block in native calls
 * through JNA, which would pin a virtual thread's carrier (with as many carriers as cores, a slow
 * launch under load once froze the link's reader until keepalive declared the link lost), so each
 * runs on a platform thread while the calling stream thread parks.
 *
 * <p>The pool is bounded: a Wait call may hold its thread up to {@code RuntimeService.MAX_WAIT_CALL},
 * and a supervisor (compromised or buggy) must not be able to make the runtime start threads
 * without limit. At the bound the operation is refused UNAVAILABLE before it runs, so it is not
 * recorded in the ledger and the same request id may be retried later.
 */
final class ControlThreads {
    /** Most control operations running at once; the next is refused without running. */
    static final int MAX_CONTROL_THREADS = 256;
    /** How long an idle control thread lingers before it ends. */
    static final long IDLE_SECONDS = 60;

    private final ThreadPoolExecutor pool;
    private final int bound;

    ControlThreads(int bound) {
        if (bound < 1 || bound > MAX_CONTROL_THREADS) {
            throw new IllegalArgumentException("control threads must be in 1.." + MAX_CONTROL_THREADS);
        }
        this.bound = bound;
        this.pool = new ThreadPoolExecutor(0, bound, IDLE_SECONDS, TimeUnit.SECONDS, new SynchronousQueue<>(),
                Thread.ofPlatform().daemon(true).name("runtime-control-", 0).factory());
    }

    /**
     * Runs the operation on a control thread and returns its result.
     *
     * @throws BackendException UNAVAILABLE when {@link #MAX_CONTROL_THREADS} operations already run;
     *                          otherwise what the operation threw
     */
    <R> R run(Supplier<R> operation) {
        CompletableFuture<R> result;
        try {
            result = CompletableFuture.supplyAsync(operation, pool);
        } catch (RejectedExecutionException e) {
            throw new BackendException(BackendException.Kind.UNAVAILABLE, "the runtime already runs " + bound
                    + " control operations (MAX_CONTROL_THREADS); retry when one ends");
        }
        try {
            return result.join();
        } catch (CompletionException e) {
            if (e.getCause() instanceof RuntimeException cause) {
                throw cause;
            }
            throw new BackendException(BackendException.Kind.FAILED, "control operation failed: " + e.getCause());
        }
    }

    /** @return control operations running now */
    int active() {
        return pool.getActiveCount();
    }
}
