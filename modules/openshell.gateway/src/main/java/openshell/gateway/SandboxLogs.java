package openshell.gateway;

import java.time.Clock;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import openshell.gateway.store.SandboxStore;
import openshell.isolation.SandboxId;

/**
 * Writes a sandbox's log lines (the supervisor's and the gateway's own events) to the store
 * without ever ending a session over them, and without losing them silently: a batch the store
 * refuses (a row lock another writer held past the database's lock timeout, the database gone)
 * is tried again {@link #APPEND_ATTEMPTS} times; if it is still refused its lines are counted,
 * reported on the gateway's standard error, and the sandbox's next kept lines begin with a
 * gateway line that says how many were lost and why, so a reader of the log sees the gap.
 */
final class SandboxLogs {
    /** Log lines kept per sandbox (the oldest go first). */
    static final int MAX_LINES = 1000;
    /** Longest log line kept; longer ones are cut. */
    static final int MAX_LINE_CHARS = 4096;
    /** Tries at one batch before its lines count as lost; each waits out the database's lock timeout. */
    static final int APPEND_ATTEMPTS = 3;
    /**
     * Sandboxes whose losses are remembered for announcement at once (as many as the store holds);
     * a loss beyond it is still reported on standard error, only not announced in the log.
     */
    static final int MAX_REMEMBERED_LOSSES = SandboxStore.MAX_SANDBOXES;

    private final SandboxStore store;
    private final Clock clock;
    // Lines lost per sandbox since its last kept batch, and the last reason. An entry goes when a
    // batch of that sandbox is kept (a deleted sandbox's batch counts as kept: the store drops it).
    private final Map<String, Loss> lost = new ConcurrentHashMap<>();

    private final int maxRememberedLosses;

    private record Loss(long lines, String reason) {
    }

    SandboxLogs(SandboxStore store, Clock clock) {
        this(store, clock, MAX_REMEMBERED_LOSSES);
    }

    /** With another bound on remembered losses: a test at the bound needs no 10,000 sandboxes. */
    SandboxLogs(SandboxStore store, Clock clock, int maxRememberedLosses) {
        this.store = store;
        this.clock = clock;
        this.maxRememberedLosses = maxRememberedLosses;
    }

    /**
     * Appends the lines, each cut to {@link #MAX_LINE_CHARS}.
     *
     * @param sandbox the sandbox
     * @param lines   the lines
     * @return whether they were kept (when not, they are counted as lost and reported)
     */
    boolean append(SandboxId sandbox, List<String> lines) {
        if (lines.isEmpty()) {
            return true;
        }
        List<String> batch = new ArrayList<>(lines.size() + 1);
        Loss before = lost.get(sandbox.value());
        if (before != null) {
            batch.add(lossLine(before.lines(), before.reason()));
        }
        for (String line : lines) {
            batch.add(cut(line));
        }
        RuntimeException last = null;
        for (int attempt = 0; attempt < APPEND_ATTEMPTS; attempt++) {
            try {
                store.appendLogs(sandbox, batch, MAX_LINES, clock.instant());
                if (before != null) {
                    // What was lost meanwhile (another batch of the same sandbox) stays to be announced.
                    lost.computeIfPresent(sandbox.value(), (k, now) -> now.lines() <= before.lines() ? null
                            : new Loss(now.lines() - before.lines(), now.reason()));
                }
                return true;
            } catch (RuntimeException e) {
                last = e;
            }
        }
        lose(sandbox, lines.size(), "not kept after " + APPEND_ATTEMPTS + " tries", String.valueOf(last.getMessage()));
        return false;
    }

    /**
     * Counts lines that were never written, reports them on standard error and announces them
     * with the sandbox's next kept lines (as for a batch the store refused).
     *
     * @param sandbox the sandbox
     * @param lines   how many lines
     * @param what    what happened to them, for standard error
     * @param reason  why, for the announcement too
     */
    void lose(SandboxId sandbox, int lines, String what, String reason) {
        String tally;
        if (lost.containsKey(sandbox.value()) || lost.size() < maxRememberedLosses) {
            Loss now = lost.merge(sandbox.value(), new Loss(lines, reason),
                    (a, b) -> new Loss(a.lines() + b.lines(), b.reason()));
            tally = now.lines() + " so far";
        } else {
            tally = "not announced in its log: " + maxRememberedLosses + " sandboxes have losses to announce";
        }
        // Only the count and the reason: the lines themselves may be the agent's output.
        System.err.println("openshell gateway: " + lines + " log lines of sandbox " + sandbox.value() + " " + what
                + " (" + tally + "): " + reason);
    }

    /** @return the announcement of a loss, cut like every line: a long reason must not make its batch unstorable */
    String lossLine(long lines, String reason) {
        return cut(gatewayLine(lines + " log lines were lost before this one: " + reason));
    }

    private static String cut(String line) {
        return line.length() > MAX_LINE_CHARS ? line.substring(0, MAX_LINE_CHARS) : line;
    }

    /** @return a line in the gateway's own voice, as its events about a sandbox are written */
    String gatewayLine(String event) {
        return clock.instant().truncatedTo(ChronoUnit.SECONDS) + " gateway: " + event;
    }
}
