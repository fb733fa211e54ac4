package openshell.linux;

import com.sun.jna.Memory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * Relays bytes between pairs of connected stream sockets inside the kernel. The supervisor holds
 * both ends of an allowed opaque TCP connection (the workload's loopback socket and the upstream
 * socket it dialled); moving the bytes through Java streams or gRPC costs copies and thread
 * hand-offs on every round trip, so this class moves them with {@code splice(2)} through one pipe
 * per direction (no copy to user space) on a single platform thread running an edge-triggered
 * {@code epoll} loop, with no thread per connection.
 *
 * <p>Besides the sockets' own buffers, a relay holds at most one pipe per direction
 * ({@link #PIPE_BYTES}, the same order as one socket's own buffer limit; 2 MiB a relay, and the
 * supervisor's relay bound keeps that below 2 GiB of in-flight pages), and nothing on the
 * Java heap: while a destination cannot take more, its source is not read, so a slow reader
 * slows its writer instead of growing memory. An end of stream read from one socket is passed on
 * as {@code shutdown(SHUT_WR)} of the other once that direction's pipe is empty, and the other
 * direction keeps flowing (TCP half-close). A relay ends when both directions have ended that
 * way, on the first error, or when it is closed. A relay that stops early (error or close)
 * resets both connections ({@code SO_LINGER} 0), so that neither peer mistakes a cut stream for
 * a complete one. Then both sockets and the pipes are closed and the relay's callback runs.
 *
 * <p>Callbacks run on the loop thread, exactly once per relay, after the descriptors are
 * closed: they must not block (every other relay waits). One that throws is reported to the
 * thread's uncaught-exception handler and the loop carries on.
 *
 * <p>Things to know: {@link #add} sets {@code O_NONBLOCK} on the sockets' open file descriptions,
 * which any other holder of them (for example the sender of an {@code SCM_RIGHTS} copy) shares,
 * and closing a relay releases only this process's reference. A write to a socket whose peer
 * has gone raises {@code SIGPIPE}, which the JVM ignores; the write fails with EPIPE and ends
 * the relay. Pipes count against {@code /proc/sys/fs/pipe-user-pages-soft} for a user without
 * CAP_SYS_RESOURCE or CAP_SYS_ADMIN: beyond it (about 512 relays at the default) new pipes hold two pages, which
 * lowers throughput but not correctness.
 */
public final class SpliceRelay implements AutoCloseable {
    /** Most relays one loop holds at once; one more is refused with EAGAIN (and its sockets closed). */
    public static final int MAX_RELAYS = 4096;
    /**
     * Capacity asked for each pipe ({@code F_SETPIPE_SZ}; the default {@code pipe-max-size}): a
     * pipe holds one socket buffer fragment per slot, and with the default 16 slots a splice
     * moved as little as a few KiB per call. If the kernel refuses (a user over
     * {@code pipe-user-pages-soft}), the pipe keeps its default size.
     */
    static final int PIPE_BYTES = 1 << 20;
    /** Largest {@code splice} per call: the pipe's capacity, so one call can fill an empty pipe. */
    public static final int CHUNK_BYTES = PIPE_BYTES;
    /** Most bytes one direction moves before other ready relays get a turn (fairness on one thread). */
    static final int TURN_BYTES = 4 * CHUNK_BYTES;
    /** Most events one {@code epoll_wait} returns; more stay ready for the next call. */
    static final int EVENTS_PER_WAIT = 256;
    /** Longest {@link #close()} waits for the loop to end its relays and stop. */
    static final Duration CLOSE_WAIT = Duration.ofSeconds(10);

    static final String CLOSED_BY_HANDLE = "closed";
    static final String CLOSED_WITH_LOOP = "relay loop closed";

    private static final int O_NONBLOCK = 0x800;
    static final int F_SETPIPE_SZ = 1031;
    private static final int O_CLOEXEC = 0x80000;
    private static final int F_GETFL = 3;
    private static final int F_SETFL = 4;
    private static final int EPOLL_CTL_ADD = 1;
    private static final int EPOLL_CTL_DEL = 2;
    private static final int EPOLLIN = 0x1;
    private static final int EPOLLOUT = 0x4;
    private static final int EPOLLERR = 0x8;
    private static final int EPOLLHUP = 0x10;
    private static final int EPOLLET = 1 << 31;
    private static final int EPOLL_EVENT_BYTES = 12;
    private static final int SPLICE_F_MOVE = 1;
    private static final int SPLICE_F_NONBLOCK = 2;
    private static final int SPLICE_FLAGS = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
    private static final int SHUT_WR = 1;
    private static final int SOL_SOCKET = 1;
    private static final int SO_ERROR = 4;
    private static final int SO_LINGER = 13;
    private static final int IPPROTO_TCP = 6;
    private static final int TCP_NODELAY = 1;
    private static final long WAKE_KEY = -1L;

    /**
     * One relay, to end it early.
     */
    public interface Handle extends AutoCloseable {
        /**
         * Ends the relay (both connections are reset) unless it has ended already. Callable from any
         * thread, including callbacks; returns at once, and the callback follows on the loop thread.
         */
        @Override
        void close();

        /** @return whether the relay's sockets are still open (false once its callback is due) */
        boolean isOpen();
    }

    /**
     * How a relay ended.
     *
     * @param bytesAtoB bytes written to B that were read from A
     * @param bytesBtoA bytes written to A that were read from B
     * @param error     why it stopped early, for a log line, empty if both directions ended
     *                  cleanly: the socket and errno ({@code "b: ECONNRESET"}), the failed call
     *                  ({@code "splice(a->b): EPIPE"}), {@code "closed"} by its handle, or
     *                  {@code "relay loop closed"}
     */
    public record Outcome(long bytesAtoB, long bytesBtoA, Optional<String> error) {
        /** Checks the record. */
        public Outcome {
            Objects.requireNonNull(error, "error");
        }
    }

    private final int maxRelays;
    private final Duration closeWait;
    private final OwnedFd epoll;
    private final OwnedFd wakeFd;
    private final Memory wakeValue = new Memory(8);
    private final Object lock = new Object();
    private volatile boolean closing;
    private boolean wakeClosed;
    private final ConcurrentLinkedQueue<Relay> added = new ConcurrentLinkedQueue<>();
    private final ConcurrentLinkedQueue<Relay> cancelled = new ConcurrentLinkedQueue<>();
    private final AtomicInteger open = new AtomicInteger();
    private final Thread thread;
    private volatile long wakeups;

    // Loop-thread state below (set up before the thread starts).
    private final Relay[] slots;
    private final int[] generations;
    private final int[] freeSlots;
    private int freeCount;
    private final ArrayDeque<Direction> deferred = new ArrayDeque<>();
    private final Memory events = new Memory((long) EVENTS_PER_WAIT * EPOLL_EVENT_BYTES);
    private final ByteBuffer eventsView = events.getByteBuffer(0, events.size()).order(ByteOrder.nativeOrder());
    private final Memory scratch = new Memory(16);

    private SpliceRelay(String threadName, int maxRelays, Duration closeWait) {
        this.maxRelays = maxRelays;
        this.closeWait = closeWait;
        this.slots = new Relay[maxRelays];
        this.generations = new int[maxRelays];
        this.freeSlots = new int[maxRelays];
        for (int i = 0; i < maxRelays; i++) {
            freeSlots[i] = maxRelays - 1 - i;
        }
        this.freeCount = maxRelays;
        wakeValue.setLong(0, 1);
        this.epoll = OwnedFd.adopt(LibC.check(LibC.epoll_create1(O_CLOEXEC), "epoll_create1"));
        try {
            this.wakeFd = OwnedFd.adopt(LibC.check(LibC.eventfd(0, O_CLOEXEC | O_NONBLOCK), "eventfd"));
            try {
                control(EPOLL_CTL_ADD, wakeFd.value(), EPOLLIN, WAKE_KEY, "epoll_ctl(ADD, eventfd)");
            } catch (LinuxException e) {
                wakeFd.close();
                throw e;
            }
        } catch (LinuxException e) {
            epoll.close();
            throw e;
        }
        this.thread = Thread.ofPlatform().name(threadName).daemon(true).unstarted(this::run);
    }

    /**
     * Starts a loop on a new daemon thread.
     *
     * @param threadName the loop thread's name (it shows in thread dumps and CPU accounting)
     * @return the running loop
     */
    public static SpliceRelay start(String threadName) {
        return start(threadName, MAX_RELAYS, CLOSE_WAIT);
    }

    /** As {@link #start(String)} with smaller bounds, so tests can reach them. */
    static SpliceRelay start(String threadName, int maxRelays, Duration closeWait) {
        Objects.requireNonNull(threadName, "threadName");
        Objects.requireNonNull(closeWait, "closeWait");
        if (maxRelays < 1 || maxRelays > MAX_RELAYS) {
            throw new LinuxException("splice relay", Errno.EINVAL, "maxRelays " + maxRelays + " (1.." + MAX_RELAYS + ")");
        }
        SpliceRelay relay = new SpliceRelay(threadName, maxRelays, closeWait);
        relay.thread.start();
        return relay;
    }

    /**
     * Relays between two connected stream sockets until both directions end, an error, or a close.
     * Takes ownership of both descriptors at once: the caller's {@link OwnedFd}s read as closed
     * afterwards, and on refusal the sockets are closed.
     *
     * <p>The sockets become non-blocking and, if TCP, get {@code TCP_NODELAY}: the relay forwards
     * what arrives, so the sender's own coalescing has already happened and a second Nagle delay
     * would only add latency.
     *
     * @param a        one socket (by convention the workload's side)
     * @param b        the other (by convention the upstream side)
     * @param onClosed told once, on the loop thread, how the relay ended; must not block
     * @return the relay's handle
     * @throws LinuxException EAGAIN if {@link #MAX_RELAYS} relays are open, ECANCELED if this loop
     *                        is closed, EBADF if a descriptor is closed, EINVAL if both are the
     *                        same, or what {@code fcntl} or {@code pipe2} reported
     */
    public Handle add(OwnedFd a, OwnedFd b, Consumer<Outcome> onClosed) {
        if (a == null || b == null || onClosed == null) {
            closeQuietly(a);
            closeQuietly(b);
            throw new NullPointerException("a, b and onClosed are required");
        }
        OwnedFd ownA = null;
        OwnedFd ownB = null;
        int[] ab = {-1, -1};
        int[] ba = {-1, -1};
        boolean counted = false;
        try {
            ownA = OwnedFd.adopt(a.release());
            ownB = OwnedFd.adopt(b.release());
            if (ownA.value() == ownB.value()) {
                ownB.release();
                throw new LinuxException("splice relay", Errno.EINVAL, "both sides are " + ownA);
            }
            if (closing) {
                throw new LinuxException("splice relay", Errno.ECANCELED, "relay loop closed");
            }
            if (open.incrementAndGet() > maxRelays) {
                open.decrementAndGet();
                throw new LinuxException("splice relay", Errno.EAGAIN, maxRelays + " relays open");
            }
            counted = true;
            prepare(ownA.value());
            prepare(ownB.value());
            LibC.check(LibC.pipe2(ab, O_CLOEXEC | O_NONBLOCK), "pipe2");
            LibC.check(LibC.pipe2(ba, O_CLOEXEC | O_NONBLOCK), "pipe2");
            // Best effort: a refused size leaves the default, slower but correct.
            LibC.fcntl(ab[1], F_SETPIPE_SZ, PIPE_BYTES);
            LibC.fcntl(ba[1], F_SETPIPE_SZ, PIPE_BYTES);
            Relay relay = new Relay(ownA, ownB, ab, ba, onClosed);
            synchronized (lock) {
                if (closing) {
                    throw new LinuxException("splice relay", Errno.ECANCELED, "relay loop closed");
                }
                added.add(relay);
            }
            wake();
            return relay;
        } catch (RuntimeException e) {
            if (counted) {
                open.decrementAndGet();
            }
            for (int fd : new int[] {ab[0], ab[1], ba[0], ba[1]}) {
                if (fd >= 0) {
                    LibC.close(fd);
                }
            }
            closeQuietly(ownA);
            closeQuietly(ownB);
            a.close();
            b.close();
            throw e;
        }
    }

    /** @return relays added and not yet ended (their callbacks may still be running) */
    public int open() {
        return open.get();
    }

    /**
     * Ends every relay (each callback runs once, reporting {@code "relay loop closed"}) and stops
     * the loop thread, waiting for it unless called on it. Idempotent; later {@link #add} calls are
     * refused.
     *
     * @throws LinuxException ETIMEDOUT if the loop did not stop within {@link #CLOSE_WAIT} (a
     *                        callback blocked), EINTR if interrupted while waiting
     */
    @Override
    public void close() {
        synchronized (lock) {
            closing = true;
        }
        wake();
        if (Thread.currentThread() == thread) {
            return;
        }
        try {
            if (!thread.join(closeWait)) {
                throw new LinuxException("splice relay close", Errno.ETIMEDOUT, "loop still running after " + closeWait);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new LinuxException("splice relay close", Errno.EINTR, "interrupted waiting for the loop");
        }
    }

    /** The loop thread, for tests. */
    Thread thread() {
        return thread;
    }

    /** How many times {@code epoll_wait} has returned, for tests that look for a busy loop. */
    long wakeups() {
        return wakeups;
    }

    private void wake() {
        synchronized (lock) {
            if (!wakeClosed) {
                // EAGAIN means the counter is saturated: a wake-up is pending anyway.
                LibC.write(wakeFd.value(), LibC.address(wakeValue), 8);
            }
        }
    }

    private void control(int op, int fd, int mask, long key, String call) {
        scratch.setInt(0, mask);
        scratch.setLong(4, key);
        LibC.check(LibC.epoll_ctl(epoll.value(), op, fd, LibC.address(scratch)), call);
    }

    /** Non-blocking, and no Nagle delay on TCP (a relay forwards what arrives; the sender coalesced already). */
    private static void prepare(int fd) {
        int flags = LibC.check(LibC.fcntl(fd, F_GETFL, 0), "fcntl(F_GETFL)");
        if ((flags & O_NONBLOCK) == 0) {
            LibC.check(LibC.fcntl(fd, F_SETFL, flags | O_NONBLOCK), "fcntl(F_SETFL, O_NONBLOCK)");
        }
        try (Memory one = new Memory(4)) {
            one.setInt(0, 1);
            // Fails with EOPNOTSUPP on a Unix socket, which has no Nagle delay to turn off.
            LibC.setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, LibC.address(one), 4);
        }
    }

    private static void closeQuietly(OwnedFd fd) {
        if (fd != null) {
            fd.close();
        }
    }

    private void run() {
        Throwable failure = null;
        try {
            loop();
        } catch (Throwable t) {
            failure = t;
            throw t;
        } finally {
            stop(failure == null ? CLOSED_WITH_LOOP : "relay loop failed: " + failure);
        }
    }

    private void loop() {
        while (true) {
            int n = LibC.epoll_wait(epoll.value(), LibC.address(events), EVENTS_PER_WAIT, deferred.isEmpty() ? -1 : 0);
            if (n < 0) {
                int errno = LibC.errno();
                if (errno == Errno.EINTR) {
                    continue;
                }
                throw LinuxException.of("epoll_wait", errno);
            }
            wakeups++;
            boolean woken = false;
            for (int i = 0; i < n; i++) {
                int mask = eventsView.getInt(i * EPOLL_EVENT_BYTES);
                long key = eventsView.getLong(i * EPOLL_EVENT_BYTES + 4);
                if (key == WAKE_KEY) {
                    woken = true;
                    continue;
                }
                int slot = (int) ((key & 0xffffffffL) >>> 1);
                Relay relay = slots[slot];
                if (relay != null && (generations[slot] & 0x7fffffff) == (int) (key >>> 32)) {
                    relay.onEvent((int) (key & 1), mask);
                }
            }
            if (woken) {
                LibC.read(wakeFd.value(), LibC.address(scratch), 8);
                Relay relay;
                while ((relay = added.poll()) != null) {
                    register(relay);
                }
                while ((relay = cancelled.poll()) != null) {
                    relay.end(Optional.of(CLOSED_BY_HANDLE));
                }
                if (closing) {
                    return;
                }
            }
            for (int turns = deferred.size(); turns > 0; turns--) {
                Direction direction = deferred.poll();
                direction.deferred = false;
                direction.pump();
            }
        }
    }

    /** Ends every relay and releases the loop's descriptors; runs last on the loop thread. */
    private void stop(String reason) {
        synchronized (lock) {
            closing = true;
        }
        Relay relay;
        while ((relay = added.poll()) != null) {
            relay.end(Optional.of(reason));
        }
        for (Relay held : slots) {
            if (held != null) {
                held.end(Optional.of(reason));
            }
        }
        cancelled.clear();
        deferred.clear();
        synchronized (lock) {
            wakeClosed = true;
            wakeFd.close();
        }
        epoll.close();
    }

    private void register(Relay relay) {
        if (freeCount == 0) {
            // Unreachable while open() bounds the relays; ends the relay rather than the loop.
            relay.end(Optional.of("no free slot"));
            return;
        }
        int slot = freeSlots[--freeCount];
        slots[slot] = relay;
        relay.slot = slot;
        long key = ((long) (generations[slot] & 0x7fffffff) << 32) | ((long) slot << 1);
        try {
            control(EPOLL_CTL_ADD, relay.a.value(), EPOLLIN | EPOLLOUT | EPOLLET, key, "epoll_ctl(ADD, a)");
            control(EPOLL_CTL_ADD, relay.b.value(), EPOLLIN | EPOLLOUT | EPOLLET, key | 1, "epoll_ctl(ADD, b)");
        } catch (LinuxException e) {
            relay.end(Optional.of(e.getMessage()));
            return;
        }
        // Edge-triggered: whatever is already buffered is moved now.
        relay.aToB.pump();
        relay.bToA.pump();
    }

    private void report(RuntimeException e) {
        try {
            thread.getUncaughtExceptionHandler().uncaughtException(thread, e);
        } catch (RuntimeException ignored) {
            // A handler that throws changes nothing: the loop carries on.
        }
    }

    /** Both sockets of one connection, their two pipes, and how the relay ends. */
    private final class Relay implements Handle {
        final OwnedFd a;
        final OwnedFd b;
        final OwnedFd[] pipes;
        final Direction aToB;
        final Direction bToA;
        final Consumer<Outcome> onClosed;
        final AtomicBoolean closeRequested = new AtomicBoolean();
        volatile boolean live = true;
        boolean ended;
        int slot = -1;

        Relay(OwnedFd a, OwnedFd b, int[] ab, int[] ba, Consumer<Outcome> onClosed) {
            this.a = a;
            this.b = b;
            this.pipes = new OwnedFd[] {OwnedFd.adopt(ab[0]), OwnedFd.adopt(ab[1]), OwnedFd.adopt(ba[0]), OwnedFd.adopt(ba[1])};
            this.aToB = new Direction(this, "a->b", a.value(), b.value(), ab[1], ab[0]);
            this.bToA = new Direction(this, "b->a", b.value(), a.value(), ba[1], ba[0]);
            this.onClosed = onClosed;
        }

        @Override
        public void close() {
            if (live && closeRequested.compareAndSet(false, true)) {
                cancelled.add(this);
                wake();
            }
        }

        @Override
        public boolean isOpen() {
            return live;
        }

        void onEvent(int side, int mask) {
            if ((mask & EPOLLERR) != 0) {
                int errno = socketError(side == 0 ? a.value() : b.value());
                if (errno != 0) {
                    end(Optional.of((side == 0 ? "a: " : "b: ") + Errno.name(errno)));
                    return;
                }
            }
            Direction from = side == 0 ? aToB : bToA;
            Direction to = side == 0 ? bToA : aToB;
            // An edge reports the socket's whole readiness; only what a direction waits for moves it:
            // input while its pipe is empty, output while it is not. Hang-ups and errors move both.
            boolean broken = (mask & (EPOLLHUP | EPOLLERR)) != 0;
            if (broken || ((mask & EPOLLIN) != 0 && from.inPipe == 0)) {
                from.pump();
            }
            if (broken || ((mask & EPOLLOUT) != 0 && to.inPipe > 0)) {
                to.pump();
            }
        }

        private int socketError(int fd) {
            scratch.setInt(0, 0);
            scratch.setInt(8, 4);
            if (LibC.getsockopt(fd, SOL_SOCKET, SO_ERROR, LibC.address(scratch), LibC.address(scratch) + 8) < 0) {
                return LibC.errno();
            }
            return scratch.getInt(0);
        }

        /** Closes everything once; an early end resets both connections. Loop thread only. */
        void end(Optional<String> error) {
            if (ended) {
                return;
            }
            ended = true;
            if (slot >= 0) {
                // Explicitly: another holder of the same file description would keep it registered.
                LibC.epoll_ctl(epoll.value(), EPOLL_CTL_DEL, a.value(), 0);
                LibC.epoll_ctl(epoll.value(), EPOLL_CTL_DEL, b.value(), 0);
                slots[slot] = null;
                generations[slot]++;
                freeSlots[freeCount++] = slot;
                slot = -1;
            }
            if (error.isPresent()) {
                scratch.setInt(0, 1);
                scratch.setInt(4, 0);
                LibC.setsockopt(a.value(), SOL_SOCKET, SO_LINGER, LibC.address(scratch), 8);
                LibC.setsockopt(b.value(), SOL_SOCKET, SO_LINGER, LibC.address(scratch), 8);
            }
            a.close();
            b.close();
            for (OwnedFd pipe : pipes) {
                pipe.close();
            }
            live = false;
            open.decrementAndGet();
            try {
                onClosed.accept(new Outcome(aToB.moved, bToA.moved, error));
            } catch (RuntimeException e) {
                report(e);
            }
        }
    }

    /** One way through a relay: socket, pipe, socket. Loop thread only. */
    private final class Direction {
        final Relay relay;
        final String name;
        final int source;
        final int destination;
        final int pipeIn;
        final int pipeOut;
        long inPipe;
        long moved;
        boolean endOfStream;
        boolean finished;
        boolean deferred;

        Direction(Relay relay, String name, int source, int destination, int pipeIn, int pipeOut) {
            this.relay = relay;
            this.name = name;
            this.source = source;
            this.destination = destination;
            this.pipeIn = pipeIn;
            this.pipeOut = pipeOut;
        }

        /**
         * Moves bytes until the source has none, the destination takes no more, or this turn's
         * share is used (then it queues itself to continue after other ready relays). Stopping
         * only at EAGAIN is what makes edge-triggered wake-ups sufficient.
         */
        void pump() {
            if (relay.ended || finished) {
                return;
            }
            long budget = TURN_BYTES;
            while (true) {
                if (inPipe > 0) {
                    long n = LibC.splice(pipeOut, 0, destination, 0, inPipe, SPLICE_FLAGS);
                    if (n > 0) {
                        inPipe -= n;
                        moved += n;
                        budget -= n;
                        continue;
                    }
                    if (n == 0) {
                        relay.end(Optional.of("splice(" + name + ") moved nothing"));
                        return;
                    }
                    if (!retry(LibC.errno())) {
                        return;
                    }
                    continue;
                }
                if (endOfStream) {
                    if (LibC.shutdown(destination, SHUT_WR) < 0) {
                        relay.end(Optional.of("shutdown(" + name.substring(3) + "): " + Errno.name(LibC.errno())));
                        return;
                    }
                    finished = true;
                    if (relay.aToB.finished && relay.bToA.finished) {
                        relay.end(Optional.empty());
                    }
                    return;
                }
                if (budget <= 0) {
                    if (!deferred) {
                        deferred = true;
                        SpliceRelay.this.deferred.add(this);
                    }
                    return;
                }
                long n = LibC.splice(source, 0, pipeIn, 0, CHUNK_BYTES, SPLICE_FLAGS);
                if (n > 0) {
                    inPipe += n;
                } else if (n == 0) {
                    endOfStream = true;
                } else if (!retry(LibC.errno())) {
                    return;
                }
            }
        }

        /** @return true to try again (EINTR); false when waiting (EAGAIN) or after ending on an error */
        private boolean retry(int errno) {
            if (errno == Errno.EINTR) {
                return true;
            }
            if (errno != Errno.EAGAIN) {
                relay.end(Optional.of("splice(" + name + "): " + Errno.name(errno)));
            }
            return false;
        }
    }
}
