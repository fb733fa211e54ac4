package openshell.sandbox;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import openshell.isolation.BackendException;
import openshell.isolation.BoundaryProcess;
import openshell.isolation.ExecSession;
import openshell.isolation.ExitStatus;
import openshell.isolation.ProcessSignal;
import openshell.isolation.TerminalSize;
import openshell.linux.ChildExit;
import openshell.linux.ChildProcess;
import openshell.linux.LinuxException;
import openshell.linux.OwnedFd;
import openshell.linux.Pty;

/**
 * One workload process the runtime started (the agent or an exec): its standard streams (pipes,
 * or a terminal whose output merges stdout and stderr), signals, and its exit status, which is
 * reported only after its output was read to the end (or {@link #OUTPUT_DRAIN_WAIT} passed, for
 * a process that left a descendant holding the stream open). Output nobody has taken is not
 * waited for, and neither is the output of a tree the runtime kills (supervisor loss,
 * terminateBoundary): its exit is reported when it is gone, not a drain wait later (the
 * supervisor-loss bound counted that wait too).
 */
final class WorkloadProcess implements ExecSession, BoundaryProcess {
    /** After exit, the longest wait for the output streams to be read to their end. */
    static final Duration OUTPUT_DRAIN_WAIT = Duration.ofSeconds(10);
    /** How long one blocking read of an output stream waits before checking again. */
    static final Duration READ_SLICE = Duration.ofSeconds(1);

    private final ChildProcess process;
    private final Enclosure leaf;
    private final OwnedFd stdin;
    private final OwnedFd stdout;
    private final Optional<OwnedFd> stderr;
    private final Optional<Pty> terminal;
    private final CountDownLatch drained;
    private final CompletableFuture<ExitStatus> exit = new CompletableFuture<>();
    private final java.util.concurrent.atomic.AtomicBoolean outputTaken = new java.util.concurrent.atomic.AtomicBoolean();
    private volatile Optional<OutputJournal.Pair> retained = Optional.empty();

    WorkloadProcess(Enclosure leaf, ChildProcess process, OwnedFd stdin, OwnedFd stdout, Optional<OwnedFd> stderr,
                    Optional<Pty> terminal) {
        this.leaf = leaf;
        this.process = process;
        this.stdin = stdin;
        this.stdout = stdout;
        this.stderr = stderr;
        this.terminal = terminal;
        this.drained = new CountDownLatch(stderr.isPresent() ? 2 : 1);
    }

    /**
     * Waits for the exit on a platform thread (the pidfd wait is bounded and repeated). Not a
     * virtual thread: the wait is a native poll through JNA, which pins its carrier for as long
     * as the process lives, and the virtual-thread scheduler has only as many carriers as cores,
     * so two live processes on two cores froze every virtual thread of the runtime (protocol
     * streams, the broker's pending connects).
     */
    void watch() {
        Thread.ofPlatform().daemon(true).name("workload-exit-" + process.pid()).start(() -> {
            Optional<ChildExit> e = Optional.empty();
            while (e.isEmpty()) {
                try {
                    e = process.awaitExit(Duration.ofSeconds(5));
                } catch (LinuxException x) {
                    exit.completeExceptionally(x);
                    return;
                }
            }
            ChildExit done = e.get();
            try {
                if (outputTaken.get()) {
                    drained.await(OUTPUT_DRAIN_WAIT.toMillis(), TimeUnit.MILLISECONDS);
                }
            } catch (InterruptedException x) {
                Thread.currentThread().interrupt();
            }
            // What a descendant still holding the pipes writes after this is not the process's output.
            retained.ifPresent(pair -> {
                pair.stdout().finish();
                pair.stderr().finish();
            });
            exit.complete(done.exited() ? new ExitStatus.Exited(done.exitCode()) : new ExitStatus.Signaled(done.signal()));
        });
    }

    /**
     * The runtime is killing the whole tree: the exit is reported as soon as the process is gone,
     * not after a drain wait. Whatever it wrote is still in its pipes for the readers; nothing of
     * the tree is left to write more, so waiting could only wait for a holder outside the tree.
     */
    void killedWithTheTree() {
        while (drained.getCount() > 0) {
            drained.countDown();
        }
    }

    /**
     * Drains the output into journals from now on (the agent's, before it can write anything):
     * the process never blocks on a pipe nobody reads, and a client that attaches later or again
     * gets what is kept ({@link OutputJournal}). Its exit waits for the journals to hold
     * everything, as it waits for an attached reader otherwise.
     *
     * @return the journals
     */
    OutputJournal.Pair retainOutput() {
        synchronized (this) {
            if (retained.isPresent()) {
                return retained.get();
            }
            outputTaken.set(true);
            OutputJournal.Pair pair = new OutputJournal.Pair(new OutputJournal(), new OutputJournal());
            retained = Optional.of(pair);
            journal(stdout, pair.stdout(), "stdout");
            if (stderr.isPresent()) {
                journal(stderr.get(), pair.stderr(), "stderr");
            } else {
                pair.stderr().finish();
            }
            return pair;
        }
    }

    /** @return the journals, if this process's output is retained */
    Optional<OutputJournal.Pair> retained() {
        return retained;
    }

    // A platform thread: the read is a native poll through JNA that would pin a virtual thread's carrier.
    private void journal(OwnedFd fd, OutputJournal journal, String name) {
        InputStream in = read(fd);
        Thread.ofPlatform().daemon(true).name("workload-" + process.pid() + "-" + name).start(() -> {
            byte[] buffer = new byte[OutputJournal.BLOCK_BYTES];
            try (in) {
                int n;
                while ((n = in.read(buffer, 0, buffer.length)) >= 0) {
                    journal.append(buffer, 0, n);
                }
            } catch (IOException | InterruptedException | RuntimeException e) {
                NetworkBroker.audit("workload-output", "ended", name + " of " + process.pid() + ": " + e.getMessage());
            } finally {
                journal.finish();
            }
        });
    }

    /** @return the process id (for the runtime's bookkeeping; never a handle given out) */
    int pid() {
        return process.pid();
    }

    CompletableFuture<ExitStatus> exitFuture() {
        return exit;
    }

    @Override
    public BoundaryProcess process() {
        return this;
    }

    @Override
    public OutputStream stdin() {
        return new OutputStream() {
            @Override
            public void write(int b) throws IOException {
                write(new byte[] {(byte) b}, 0, 1);
            }

            @Override
            public void write(byte[] b, int off, int len) throws IOException {
                try {
                    stdin.write(java.util.Arrays.copyOfRange(b, off, off + len));
                } catch (LinuxException e) {
                    throw new IOException(e.getMessage(), e);
                }
            }

            /** Half-closes: the process reads end of file (with a terminal: sends EOT). */
            @Override
            public void close() {
                if (terminal.isPresent()) {
                    if (stdin.isOpen()) {
                        stdin.write(new byte[] {4});
                    }
                } else {
                    stdin.close();
                }
            }
        };
    }

    /** A retained output reads from its journal (from the oldest byte kept; a gap is skipped silently). */
    @Override
    public InputStream stdout() {
        return retained.map(pair -> journalStream(pair.stdout())).orElseGet(() -> stream(stdout));
    }

    @Override
    public InputStream stderr() {
        return retained.map(pair -> journalStream(pair.stderr()))
                .orElseGet(() -> stderr.map(this::stream).orElseGet(InputStream::nullInputStream));
    }

    private static InputStream journalStream(OutputJournal journal) {
        OutputJournal.Reader reader = journal.reader(0);
        return new ChunkedInput() {
            private byte[] pending = new byte[0];
            private int at;

            @Override
            public int read(byte[] b, int off, int len) throws IOException {
                if (len == 0) {
                    return 0;
                }
                while (at == pending.length) {
                    OutputJournal.Chunk chunk;
                    try {
                        chunk = reader.next(len, READ_SLICE);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new java.io.InterruptedIOException("interrupted");
                    }
                    switch (chunk) {
                        case OutputJournal.Bytes bytes -> {
                            pending = bytes.bytes();
                            at = 0;
                        }
                        case OutputJournal.End end -> {
                            return -1;
                        }
                        case null, default -> {
                            // nothing yet, or a gap: read on
                        }
                    }
                }
                int n = Math.min(len, pending.length - at);
                System.arraycopy(pending, at, b, off, n);
                at += n;
                return n;
            }

            @Override
            public void close() {
                reader.close();
            }
        };
    }

    private InputStream stream(OwnedFd fd) {
        outputTaken.set(true);
        return read(fd);
    }

    private InputStream read(OwnedFd fd) {
        return new ChunkedInput() {
            private boolean ended;

            @Override
            public int read(byte[] b, int off, int len) throws IOException {
                if (ended) {
                    return -1;
                }
                byte[] chunk = new byte[Math.min(len, 64 * 1024)];
                while (true) {
                    int n;
                    try {
                        n = fd.read(chunk, READ_SLICE);
                    } catch (LinuxException e) {
                        // A terminal's master reads EIO once the last slave user is gone: that is its end of file.
                        n = 0;
                    }
                    if (n == 0) {
                        ended = true;
                        drained.countDown();
                        return -1;
                    }
                    if (n > 0) {
                        System.arraycopy(chunk, 0, b, off, n);
                        return n;
                    }
                }
            }
        };
    }

    @Override
    public Optional<Terminal> terminal() {
        return terminal.map(pty -> size -> pty.resize(new Pty.WindowSize(size.rows(), size.columns())));
    }

    @Override
    public ExitStatus awaitExit() {
        return exit.join();
    }

    @Override
    public Optional<ExitStatus> awaitExit(Duration timeout) {
        try {
            return Optional.of(exit.get(timeout.toMillis(), TimeUnit.MILLISECONDS));
        } catch (java.util.concurrent.TimeoutException e) {
            return Optional.empty();
        } catch (java.util.concurrent.ExecutionException e) {
            throw new BackendException(BackendException.Kind.FAILED, "waiting failed: " + e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new BackendException(BackendException.Kind.FAILED, "interrupted");
        }
    }

    @Override
    public void signal(ProcessSignal signal) {
        if (exit.isDone()) {
            throw new BackendException(BackendException.Kind.TERMINATED, "process " + process.pid() + " has exited");
        }
        process.pidfd().signal(signal.number());
    }

    /**
     * Kills this process and everything it started (its own cgroup leaf: descendants that escaped
     * by setsid or a double fork included), and nothing else of the workload.
     */
    @Override
    public void terminate() {
        leaf.killAll();
        long deadline = System.nanoTime() + ProcessTree.KILL_WAIT.toNanos();
        while (leaf.populated() && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
    }

    /** Resizes the terminal, if there is one. */
    void resize(TerminalSize size) {
        if (exit.isDone()) {
            throw new BackendException(BackendException.Kind.TERMINATED, "process " + process.pid() + " has exited");
        }
        terminal.ifPresent(pty -> pty.resize(new Pty.WindowSize(size.rows(), size.columns())));
    }

    /** @return the pids in this process's cgroup leaf (it and what it started) */
    java.util.List<Integer> members() {
        try {
            return leaf.members();
        } catch (LinuxException e) {
            return java.util.List.of();
        }
    }

    /** Removes this process's cgroup leaf once it is empty (the runtime's end). */
    void removeLeaf() {
        try {
            if (!leaf.populated()) {
                leaf.remove();
            }
        } catch (LinuxException e) {
            NetworkBroker.audit("cgroup", "not-removed", e.getMessage());
        }
    }

    @Override
    public void close() {
        stdin.close();
        stdout.close();
        stderr.ifPresent(OwnedFd::close);
        terminal.ifPresent(Pty::close);
    }

    /** An input stream that reads in chunks; a single byte is a chunk of one. */
    private abstract static class ChunkedInput extends InputStream {
        @Override
        public int read() throws IOException {
            byte[] one = new byte[1];
            int n = read(one, 0, 1);
            return n < 0 ? -1 : one[0] & 0xff;
        }
    }
}
