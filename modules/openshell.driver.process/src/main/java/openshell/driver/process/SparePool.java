package openshell.driver.process;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Optional;
import jakarta.json.JsonObjectBuilder;
import jakarta.json.spi.JsonProvider;

import openshell.driver.DriverException;

/**
 * Warm spares for the process driver: holders, runtimes and supervisors started before the
 * sandboxes that will take them, so a create does not wait for two JVMs to start. A create takes
 * the oldest idle spare ({@link ProcessDriver#claim}); a spare that died is removed and the create
 * launches cold. One keeper thread starts spares until {@code size} are idle. After a spare is
 * taken the keeper waits until the sandbox it became is ready (its supervisor's ready line), at
 * most {@link #REFILL_WAIT}, so the refill's two JVM starts do not compete with that create for
 * the cores, and {@link #REFILL_DELAY} more, past a first exec. A spare that fails to start holds
 * the keeper back {@link #FAILURE_BACKOFF}. Closing
 * the pool removes the idle spares; a gateway that died with spares idle leaves them to the next
 * pool on the same state root, which sweeps them first.
 */
final class SparePool implements AutoCloseable {
    /** Longest wait after a spare was taken before the keeper starts the next. */
    static final Duration REFILL_WAIT = Duration.ofSeconds(10);
    /**
     * How long after the sandbox that took a spare is ready the next one starts: a user's first
     * exec comes right after Running, and a niced start still shares the cores' caches and wake-ups.
     */
    static final Duration REFILL_DELAY = Duration.ofSeconds(1);
    /** How long the keeper waits after a spare failed to start before it tries again. */
    static final Duration FAILURE_BACKOFF = Duration.ofSeconds(30);
    /** Longest wait for a new spare's programs to wait for their sandbox before it is reniced anyway. */
    static final Duration SETTLE_WAIT = Duration.ofSeconds(30);
    /** How often the keeper looks for the ready line of the sandbox a spare became. */
    static final Duration READY_POLL = Duration.ofMillis(50);
    /** The most of a supervisor's log read when looking for its ready line. */
    static final int MAX_LOG_READ = 64 * 1024;
    /** The start of the ready line of a supervisor. */
    static final String READY = "{\"ready\":true";
    /** The line each of a spare's programs prints once it waits for its sandbox. */
    static final String WAITING = "{\"spare\":\"waiting\"}";
    /** Looked up once: each lookup through ServiceLoader builds a new provider. */
    private static final JsonProvider JSON = JsonProvider.provider();

    private final ProcessDriver driver;
    private final int size;
    private final Deque<ProcessDriver.Spare> idle = new ArrayDeque<>();
    private final Thread keeper;
    /** Guarded by this: the supervisor log of the last sandbox made from a spare, until it is ready. */
    private Path lastClaimed;
    private long lastClaimedAt;
    /** When the sandbox that took the last spare was seen ready; -1 until then. */
    private long readyAt = -1;
    /** The keeper starts no spare before this {@link System#nanoTime()}: a failure's backoff. */
    private long notBefore = System.nanoTime();
    private boolean closed;
    private int started;

    SparePool(ProcessDriver driver, int size) {
        this.driver = driver;
        this.size = size;
        int swept = driver.sweepSpares();
        if (swept > 0) {
            System.err.println(statusLine("swept", null, "removed " + swept + " warm spare(s) an earlier gateway left"));
        }
        this.keeper = Thread.ofPlatform().daemon().name("openshell-spare-keeper").start(this::keep);
    }

    /** @return the oldest idle spare, if any */
    synchronized Optional<ProcessDriver.Spare> take() {
        return Optional.ofNullable(idle.pollFirst());
    }

    /**
     * Notes that a spare became a sandbox: the next one starts once that sandbox's supervisor is
     * ready, or after {@link #REFILL_WAIT}.
     *
     * @param supervisorLog where that supervisor writes its ready line
     */
    synchronized void claimed(Path supervisorLog) {
        lastClaimed = supervisorLog;
        lastClaimedAt = System.nanoTime();
        readyAt = -1;
        notifyAll();
    }

    /** @return spares idle now */
    synchronized int idle() {
        return idle.size();
    }

    /** @return spares the keeper has started, taken or not */
    synchronized int started() {
        return started;
    }

    private void keep() {
        while (true) {
            try {
                if (!awaitWanted()) {
                    return;
                }
            } catch (InterruptedException e) {
                return;
            }
            ProcessDriver.Spare spare;
            try {
                spare = driver.launchSpare();
            } catch (DriverException e) {
                System.err.println(statusLine("not-started", null, "cannot start a warm spare (" + e.getMessage()
                        + "); next try in " + FAILURE_BACKOFF.toSeconds() + " s"));
                synchronized (this) {
                    notBefore = System.nanoTime() + FAILURE_BACKOFF.toNanos();
                }
                continue;
            }
            boolean keep;
            synchronized (this) {
                keep = !closed;
                if (keep) {
                    idle.addLast(spare);
                    started++;
                }
            }
            if (!keep) {
                driver.discard(spare);
                return;
            }
            settle(spare);
        }
    }

    /**
     * Waits until both programs of a new spare wait for their sandbox (at most
     * {@link #SETTLE_WAIT}), then puts it back to niceness 0: only the JVMs' starts run niced, and
     * what they leave queued (compilations) finishes at normal priority before a create takes the
     * spare. A spare taken meanwhile is its claim's to renice.
     */
    private void settle(ProcessDriver.Spare spare) {
        long deadline = System.nanoTime() + SETTLE_WAIT.toNanos();
        while (System.nanoTime() - deadline < 0) {
            synchronized (this) {
                if (closed || !idle.contains(spare)) {
                    return;
                }
            }
            if (driver.spareWaiting(spare)) {
                break;
            }
            try {
                Thread.sleep(READY_POLL.toMillis());
            } catch (InterruptedException e) {
                return;
            }
        }
        synchronized (this) {
            if (closed || !idle.contains(spare)) {
                return;
            }
        }
        try {
            ProcessDriver.unnice(spare.pair());
        } catch (DriverException e) {
            System.err.println(statusLine("not-unniced", spare.name().value(), String.valueOf(e.getMessage())));
        }
    }

    /**
     * Waits until the keeper should start a spare: fewer than {@code size} idle, no failure backoff,
     * and the sandbox that took the last spare ready {@link #REFILL_DELAY} ago (or taken
     * {@link #REFILL_WAIT} ago). The ready line is read outside the lock, so a create taking a
     * spare never waits on a file read.
     *
     * @return false once the pool is closed
     */
    private boolean awaitWanted() throws InterruptedException {
        while (true) {
            Path unready = null;
            synchronized (this) {
                if (closed) {
                    return false;
                }
                long now = System.nanoTime();
                if (idle.size() < size && now - notBefore >= 0) {
                    if (lastClaimed == null) {
                        return true;
                    }
                    if (readyAt < 0 && now - lastClaimedAt >= REFILL_WAIT.toNanos()) {
                        readyAt = now;
                    }
                    if (readyAt < 0) {
                        unready = lastClaimed;
                    } else if (now - readyAt >= REFILL_DELAY.toNanos()) {
                        lastClaimed = null;
                        return true;
                    }
                }
                if (unready == null) {
                    wait(READY_POLL.toMillis());
                    continue;
                }
            }
            boolean ready = printed(unready, READY);
            synchronized (this) {
                if (ready && lastClaimed == unready && readyAt < 0) {
                    readyAt = System.nanoTime();
                } else if (!ready && !closed) {
                    wait(READY_POLL.toMillis());
                }
            }
        }
    }

    /**
     * Whether the first {@link #MAX_LOG_READ} bytes of a log hold a line; true if there is no log
     * (the sandbox was deleted at once: nothing to wait for).
     */
    static boolean printed(Path log, String line) {
        try (InputStream in = Files.newInputStream(log)) {
            return new String(in.readNBytes(MAX_LOG_READ), StandardCharsets.ISO_8859_1).contains(line);
        } catch (IOException e) {
            return true;
        }
    }

    /** Stops the keeper and removes every idle spare. */
    @Override
    public void close() {
        Deque<ProcessDriver.Spare> left;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            left = new ArrayDeque<>(idle);
            idle.clear();
            notifyAll();
        }
        // Not interrupted: a spare it is starting finishes, and is then removed by the keeper itself.
        try {
            keeper.join(ProcessDriver.SUPERVISOR_KILL_TIMEOUT.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        for (ProcessDriver.Spare spare : left) {
            try {
                driver.discard(spare);
            } catch (DriverException e) {
                System.err.println(statusLine("not-removed", spare.name().value(), "cannot remove: " + e.getMessage()));
            }
        }
    }

    /**
     * One status line of the pool, every value escaped by the JSON library: an exception's text
     * may hold a path with quotes or newlines, which must not end the line or forge another.
     *
     * @param spare the spare's name, or null when the line is about the pool
     */
    static String statusLine(String event, String spare, String detail) {
        JsonObjectBuilder line = JSON.createObjectBuilder().add("driver", "process").add("pool", event);
        if (spare != null) {
            line.add("spare", spare);
        }
        return line.add("detail", String.valueOf(detail)).build().toString();
    }
}
