package openshell.perf.sandbox;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The {@code net.ipv4.tcp_tw_reuse} of the harness's network namespace (a sysctl of each
 * namespace; since 2026-12-03 the harness's own, loopback-only one, no longer the host's) set to 1
 * for a full run, and put back after it.
 *
 * <p>Why: every soak connect ends in TIME_WAIT (60 s) on the side that closes first, which for a
 * mediated connect is the supervisor's upstream socket and for a direct one the client's. With
 * the default (2: reuse on loopback only) a host reaches one destination at most about
 * 28,232 ports / 60 s = 470 new connections per second, however fast the proxy, and the kernel
 * spends most of that in the ephemeral-port search (perf: {@code __inet_hash_connect},
 * {@code __inet_check_established}: half the supervisor's CPU at 500/s). The 1,000/s for
 * 60 s to one destination needs reuse, as any client on the host would; and tcp-connect's 40,000
 * connects in about a minute (both sides) would otherwise time the port search instead of the mediation.
 */
record TimeWaitReuse(Path knob, String before, boolean changed, Thread onExit) implements AutoCloseable {
    static final Path KNOB = Path.of("/proc/sys/net/ipv4/tcp_tw_reuse");
    /** The value a full run uses: reuse a TIME_WAIT port for a new outgoing connection after 1 s. */
    static final String RUN_VALUE = "1";

    /**
     * Sets the knob to {@link #RUN_VALUE} unless it already is; fails loudly if it cannot. Until
     * {@link #close}, a shutdown hook puts the host's value back if the harness is stopped (Ctrl-C,
     * SIGTERM) meanwhile.
     */
    static TimeWaitReuse enable(Path knob) throws IOException {
        String before = Files.readString(knob).trim();
        Thread onExit = Thread.ofPlatform().unstarted(() -> restore(knob, before));
        if (before.equals(RUN_VALUE)) {
            return new TimeWaitReuse(knob, before, false, onExit);
        }
        Files.writeString(knob, RUN_VALUE + "\n");
        Runtime.getRuntime().addShutdownHook(onExit);
        return new TimeWaitReuse(knob, before, true, onExit);
    }

    /** The knob as the host has it, left alone (a smoke run). */
    static TimeWaitReuse asIs(Path knob) throws IOException {
        String before = Files.readString(knob).trim();
        return new TimeWaitReuse(knob, before, false, Thread.ofPlatform().unstarted(() -> { }));
    }

    /** @return what the results say: the value used, and the host's own value if it was changed */
    String describe() {
        return changed ? RUN_VALUE + " (the namespace's " + before + ", restored after the run)" : before + " (the namespace's own)";
    }

    @Override
    public void close() throws IOException {
        if (changed) {
            try {
                Runtime.getRuntime().removeShutdownHook(onExit);
            } catch (IllegalStateException shuttingDown) {
                // the hook runs (or ran) anyway; writing the same value twice is harmless
            }
            Files.writeString(knob, before + "\n");
        }
    }

    private static void restore(Path knob, String before) {
        try {
            Files.writeString(knob, before + "\n");
        } catch (IOException e) {
            System.err.println("SandboxBenchmark: could not put net.ipv4.tcp_tw_reuse back to " + before + ": " + e.getMessage());
        }
    }
}
