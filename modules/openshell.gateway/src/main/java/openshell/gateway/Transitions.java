package openshell.gateway;

import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.function.Supplier;

import openshell.isolation.SandboxId;

/**
 * Which sandboxes a lifecycle operation (create, stop, start, delete) is changing right now, and
 * when each last changed, so that the observer never records a sandbox FAILED from what it saw
 * while an operation was killing or launching its processes. Operations never wait for each
 * other here; only the observer's final write is ordered against their start.
 */
final class Transitions {
    private final Map<String, Integer> active = new HashMap<>();
    private final Map<String, Long> lastChange = new HashMap<>();
    private long clock;

    /**
     * Marks an operation on the sandbox as begun.
     *
     * @return to run when it ended, whatever way
     */
    synchronized Runnable begin(SandboxId id) {
        active.merge(id.value(), 1, Integer::sum);
        lastChange.put(id.value(), ++clock);
        return () -> end(id);
    }

    private synchronized void end(SandboxId id) {
        active.computeIfPresent(id.value(), (k, n) -> n == 1 ? null : n - 1);
        lastChange.put(id.value(), ++clock);
    }

    /** @return a mark to observe the sandbox against, or empty while an operation changes it */
    synchronized OptionalLong quiet(SandboxId id) {
        return active.containsKey(id.value()) ? OptionalLong.empty() : OptionalLong.of(clock);
    }

    /**
     * Runs the action only if no operation on the sandbox runs or began since the mark; none can
     * begin while it runs.
     *
     * @return the action's result, or empty if the sandbox was changed meanwhile
     */
    synchronized <T> Optional<T> ifQuietSince(SandboxId id, long mark, Supplier<Optional<T>> action) {
        if (active.containsKey(id.value()) || lastChange.getOrDefault(id.value(), 0L) > mark) {
            return Optional.empty();
        }
        return action.get();
    }

    /** @return whether an operation on the sandbox runs now */
    synchronized boolean busy(SandboxId id) {
        return active.containsKey(id.value());
    }

    /** Forgets the sandboxes no longer recorded (deleted), unless an operation on them runs. */
    synchronized void retainOnly(Set<String> recorded) {
        lastChange.keySet().removeIf(id -> !recorded.contains(id) && !active.containsKey(id));
    }
}
