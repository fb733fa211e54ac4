package openshell.linux;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.IntSupplier;

/**
 * Runs code on a fresh platform thread that first installs a seccomp filter with a listener.
 * Filters are per-thread, so the rest of the test JVM stays unfiltered; the thread ends after.
 */
final class FilteredThread {
    static final Duration WAIT = Duration.ofSeconds(30);

    final SeccompListener listener;
    final CompletableFuture<long[]> result;

    private FilteredThread(SeccompListener listener, CompletableFuture<long[]> result) {
        this.listener = listener;
        this.result = result;
    }

    /** The body returns {rc, errno} pairs via {@link #call}. */
    interface Body {
        long[] run();
    }

    static FilteredThread start(BpfProgram program, Body body) throws Exception {
        CompletableFuture<SeccompListener> installed = new CompletableFuture<>();
        CompletableFuture<long[]> result = new CompletableFuture<>();
        Thread.ofPlatform().name("filtered").daemon(true).start(() -> {
            try {
                ProcessControl.setNoNewPrivileges();
                installed.complete(Seccomp.installWithListener(program));
            } catch (Throwable t) {
                installed.completeExceptionally(t);
                return;
            }
            try {
                result.complete(body.run());
            } catch (Throwable t) {
                result.completeExceptionally(t);
            }
        });
        return new FilteredThread(installed.get(WAIT.toSeconds(), TimeUnit.SECONDS), result);
    }

    long[] await() throws Exception {
        return result.get(WAIT.toSeconds(), TimeUnit.SECONDS);
    }

    /** {rc, errno} of a call made on the filtered thread. */
    static long[] call(IntSupplier syscall) {
        int rc = syscall.getAsInt();
        return new long[] {rc, rc < 0 ? LibC.errno() : 0};
    }
}
