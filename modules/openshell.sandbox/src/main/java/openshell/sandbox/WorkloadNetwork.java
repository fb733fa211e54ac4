package openshell.sandbox;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import openshell.linux.NamespaceType;
import openshell.linux.Namespaces;
import openshell.linux.OwnedFd;

/**
 * Where the runtime's own loopback sockets (relay listeners, the DNS relay) are created: inside
 * the workload's network namespace. In production the runtime already lives there; a test (or a
 * runtime that keeps its own namespace) names the namespace file, and sockets are then created
 * on one platform thread that has entered it. A socket keeps the namespace it was created in, so
 * it may be used from any thread afterwards.
 */
final class WorkloadNetwork implements AutoCloseable {
    private final ExecutorService thread;

    private WorkloadNetwork(ExecutorService thread) {
        this.thread = thread;
    }

    /** @return the runtime's own network namespace */
    static WorkloadNetwork current() {
        return new WorkloadNetwork(null);
    }

    /**
     * Enters a namespace on a dedicated thread and brings its loopback up.
     *
     * @param namespaceFile for example {@code /proc/<pid>/ns/net}
     * @return the network
     */
    static WorkloadNetwork enter(String namespaceFile) {
        ExecutorService executor = Executors.newSingleThreadExecutor(r -> Thread.ofPlatform().daemon(true)
                .name("workload-netns").unstarted(r));
        WorkloadNetwork network = new WorkloadNetwork(executor);
        network.run(() -> {
            try (OwnedFd ns = Namespaces.openPath(namespaceFile)) {
                Namespaces.enter(NamespaceType.NET, ns);
            }
            if (!Namespaces.loopbackUp()) {
                Namespaces.bringLoopbackUp();
            }
            return null;
        });
        return network;
    }

    /**
     * Runs an action in the workload's network namespace.
     *
     * @param action creates sockets
     * @param <T>    its result
     * @return the result
     */
    <T> T run(Callable<T> action) {
        try {
            if (thread == null) {
                return action.call();
            }
            Future<T> result = thread.submit(action);
            return result.get();
        } catch (ExecutionException e) {
            throw rethrow(e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        } catch (Exception e) {
            throw rethrow(e);
        }
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof IOException io) {
            return new UncheckedIOException(io);
        }
        return new IllegalStateException(t);
    }

    @Override
    public void close() {
        if (thread != null) {
            thread.shutdownNow();
        }
    }
}
