package openshell.cli;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import com.google.protobuf.ByteString;
import io.grpc.Channel;
import io.grpc.stub.StreamObserver;
import io.helidon.common.tls.Tls;
import io.helidon.webclient.grpc.GrpcClient;
import openshell.protocol.exec.ExecClientFrame;
import openshell.protocol.exec.ExecServerFrame;
import openshell.protocol.exec.ExecStart;
import openshell.protocol.exec.SandboxExecGrpc;
import openshell.protocol.exec.TerminalSize;

/**
 * One streamed exec against the gateway's {@code SandboxExec} stream: stdin is read and sent as
 * it comes, within the stdin credit the gateway returns ({@link StdinCredit}); output is written
 * as it arrives and credit for it is granted only after it was written, so a slow terminal or
 * pipe slows the remote process down instead of filling memory ({@link #OUTPUT_WINDOW}). End of
 * the local stdin half-closes the remote stdin. The exit code arrives after all output.
 */
final class ExecStream {
    /**
     * Output bytes the CLI accepts before it has written them out. Kept well inside HTTP/2's
     * 64 KiB window: Helidon 4.1.7's gRPC client (this end) cannot parse a message that the
     * gateway had to split across DATA frames when the window ran short.
     */
    static final int OUTPUT_WINDOW = 16 * 1024;
    /** Largest stdin chunk per frame (the gateway splits larger ones for its supervisor hop anyway). */
    static final int STDIN_CHUNK = 8 * 1024;
    /** How long the CLI waits for the gateway to accept the stream. */
    static final long START_TIMEOUT_SECONDS = 60;
    /** After the CLI ends the stream itself, the longest wait for the gateway to end it too (the exec terminated). */
    static final java.time.Duration CANCEL_WAIT = java.time.Duration.ofSeconds(2);
    /**
     * Heartbeat intervals a gateway that announced heartbeats ({@code ExecStarted.heartbeat_millis})
     * may stay silent before the CLI takes the connection as lost and ends the exec with an error.
     */
    static final int MAX_MISSED_HEARTBEATS = 6;
    /** How often {@link #await()} looks for a lost connection. */
    static final java.time.Duration SILENCE_CHECK = java.time.Duration.ofSeconds(1);

    /**
     * Helidon's gRPC client logs a routine read-poll timeout as SEVERE; the CLI's stderr belongs
     * to the remote command. Held strongly, since java.util.logging keeps loggers weakly.
     */
    private static final java.util.logging.Logger SOCKET_LOG = java.util.logging.Logger.getLogger(
            "io.helidon.webclient.grpc");

    static {
        SOCKET_LOG.setLevel(java.util.logging.Level.OFF);
    }

    /** What the caller learns from the stream's end. */
    record Outcome(Optional<Integer> exitCode, Optional<String> error) {
    }

    private final StreamObserver<ExecClientFrame> requests;
    private final StdinCredit stdinCredit = new StdinCredit();
    private final CompletableFuture<Integer> started = new CompletableFuture<>();
    private final CompletableFuture<Outcome> outcome = new CompletableFuture<>();
    /** The gateway's announced heartbeat interval in nanoseconds; 0 while none was announced. */
    private volatile long heartbeatNanos;
    /** When a frame last arrived or was last written out ({@link System#nanoTime()}). */
    private volatile long lastFrame = System.nanoTime();
    /** Whether a frame is being written out: a slow local reader is no silence of the gateway's. */
    private volatile boolean handling;

    private ExecStream(Channel channel, ExecStart start, OutputStream stdout, OutputStream stderr) {
        StreamObserver<ExecServerFrame> responses = new StreamObserver<>() {
            @Override
            public void onNext(ExecServerFrame f) {
                handling = true;
                lastFrame = System.nanoTime();
                try {
                    switch (f.getKindCase()) {
                        case STARTED -> {
                            heartbeatNanos = TimeUnit.MILLISECONDS.toNanos(Integer.toUnsignedLong(f.getStarted().getHeartbeatMillis()));
                            stdinCredit.grant(f.getStarted().getStdinWindow());
                            started.complete(f.getStarted().getStdinWindow());
                        }
                        case STDOUT -> write(stdout, f.getStdout());
                        case STDERR -> write(stderr, f.getStderr());
                        case STDIN_CREDIT -> stdinCredit.grant(f.getStdinCredit());
                        case EXIT_CODE -> end(new Outcome(Optional.of(f.getExitCode()), Optional.empty()));
                        case ERROR -> end(new Outcome(Optional.empty(), Optional.of(f.getError())));
                        case HEARTBEAT, KIND_NOT_SET -> { }
                    }
                } catch (IOException e) {
                    end(new Outcome(Optional.empty(), Optional.of("cannot write output: " + e.getMessage())));
                    cancel();
                } finally {
                    lastFrame = System.nanoTime();
                    handling = false;
                }
            }

            @Override
            public void onError(Throwable t) {
                end(new Outcome(Optional.empty(), Optional.of("the exec stream broke: " + t.getMessage())));
            }

            @Override
            public void onCompleted() {
                end(new Outcome(Optional.empty(), Optional.of("the exec stream ended without an exit status")));
            }
        };
        this.requests = SandboxExecGrpc.newStub(channel).exec(responses);
        send(ExecClientFrame.newBuilder().setStart(start).build());
    }

    /**
     * Opens a gRPC channel to the gateway.
     *
     * @param url the gateway's URL ({@code http://} means HTTP/2 without TLS, prior knowledge)
     * @return the channel
     */
    static Channel channel(String url) {
        boolean tls = url.startsWith("https://");
        return GrpcClient.builder().baseUri(url)
                .tls(tls ? Tls.builder().build() : Tls.builder().enabled(false).build()).build().channel();
    }

    /**
     * Starts an exec.
     *
     * @param channel  to the gateway
     * @param token    the API token (sent in the first frame, never printed)
     * @param sandbox  name or id
     * @param argv     the command
     * @param env      extra environment
     * @param terminal initial terminal size, if it runs on a PTY
     * @param stdout   where stdout (or the merged terminal output) goes
     * @param stderr   where stderr goes
     * @return the running stream
     * @throws CliException FAILED if the gateway refuses it
     */
    static ExecStream start(Channel channel, String token, String sandbox, List<String> argv, Map<String, String> env,
                            Optional<int[]> terminal, OutputStream stdout, OutputStream stderr) {
        ExecStart.Builder start = ExecStart.newBuilder().setApiToken(token).setSandbox(sandbox).addAllArgv(argv).putAllEnvironment(env)
                .setOutputWindow(OUTPUT_WINDOW);
        terminal.ifPresent(size -> start.setTerminal(TerminalSize.newBuilder().setColumns(size[0]).setRows(size[1])));
        return open(channel, start.build(), stdout, stderr);
    }

    /**
     * Opens one forwarded connection: what {@link #pumpStdin} sends goes to {@code port} on the
     * sandbox's loopback, what comes back is written to {@code back}; exit code 0 means the
     * sandbox side ended the connection.
     *
     * @param channel to the gateway
     * @param token   the API token
     * @param sandbox name or id
     * @param port    1..65535 inside the sandbox
     * @param back    where the connection's bytes go
     * @return the open relay
     * @throws CliException FAILED if the gateway refuses it
     */
    static ExecStream forward(Channel channel, String token, String sandbox, int port, OutputStream back) {
        return open(channel, ExecStart.newBuilder().setApiToken(token).setSandbox(sandbox).setForwardPort(port)
                .setOutputWindow(OUTPUT_WINDOW).build(), back, OutputStream.nullOutputStream());
    }

    private static ExecStream open(Channel channel, ExecStart start, OutputStream stdout, OutputStream stderr) {
        ExecStream stream;
        try {
            stream = new ExecStream(channel, start, stdout, stderr);
        } catch (java.io.UncheckedIOException e) {
            throw new CliException(CliException.NO_GATEWAY, "the gateway does not answer: " + e.getMessage()
                    + "; is it running? (openshell gateway status)");
        }
        try {
            CompletableFuture.anyOf(stream.started, stream.outcome).get(START_TIMEOUT_SECONDS, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            stream.cancel();
            throw new CliException(CliException.FAILED, "the gateway did not start the exec within "
                    + START_TIMEOUT_SECONDS + " s");
        } catch (ExecutionException e) {
            throw new CliException(CliException.FAILED, "the exec stream failed: " + e.getCause().getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CliException(CliException.FAILED, "interrupted");
        }
        return stream;
    }

    /**
     * Sends {@code in} as the remote stdin until it ends, then half-closes; runs on the caller's thread.
     * Returns early (without closing) once the exec has ended.
     */
    void pumpStdin(InputStream in) {
        byte[] buffer = new byte[STDIN_CHUNK];
        try {
            while (!outcome.isDone()) {
                int allowed = stdinCredit.take(STDIN_CHUNK, outcome);
                if (allowed <= 0) {
                    return;
                }
                int n = in.read(buffer, 0, allowed);
                if (n < 0) {
                    stdinCredit.giveBack(allowed);
                    send(ExecClientFrame.newBuilder().setStdinClose(true).build());
                    return;
                }
                stdinCredit.giveBack(allowed - n);
                if (n > 0) {
                    send(ExecClientFrame.newBuilder().setStdin(ByteString.copyFrom(buffer, 0, n)).build());
                }
            }
        } catch (IOException e) {
            send(ExecClientFrame.newBuilder().setStdinClose(true).build());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    void resize(int columns, int rows) {
        send(ExecClientFrame.newBuilder().setResize(TerminalSize.newBuilder().setColumns(columns).setRows(rows)).build());
    }

    void signal(int number) {
        send(ExecClientFrame.newBuilder().setSignal(number).build());
    }

    /**
     * @return the exit code or the error, once the stream ended; an error, and the exec ended from
     *         this side, once a gateway that announced heartbeats stayed silent longer than
     *         {@link #MAX_MISSED_HEARTBEATS} of them (the connection is lost, the command's end unknown)
     */
    Outcome await() throws InterruptedException {
        while (true) {
            Optional<Outcome> ended = await(SILENCE_CHECK);
            if (ended.isPresent()) {
                return ended.get();
            }
            long heartbeat = heartbeatNanos;
            if (!handling && lost(lastFrame, heartbeat, System.nanoTime())) {
                end(new Outcome(Optional.empty(), Optional.of("the gateway sent nothing for "
                        + TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - lastFrame) + " s, though it sends a heartbeat every "
                        + TimeUnit.NANOSECONDS.toMillis(heartbeat) + " ms: the connection is lost and how the command ended is unknown")));
            }
        }
    }

    /**
     * @return whether a gateway that announced a heartbeat every {@code heartbeatNanos} (0: none)
     *         and last sent a frame at {@code lastFrame} has missed more than
     *         {@link #MAX_MISSED_HEARTBEATS} of them by {@code now}
     */
    static boolean lost(long lastFrame, long heartbeatNanos, long now) {
        return heartbeatNanos > 0 && now - lastFrame > MAX_MISSED_HEARTBEATS * heartbeatNanos;
    }

    /**
     * @param wait longest wait
     * @return the exit code or the error, if the stream ended within {@code wait}
     */
    Optional<Outcome> await(java.time.Duration wait) throws InterruptedException {
        try {
            return Optional.of(outcome.get(wait.toMillis(), TimeUnit.MILLISECONDS));
        } catch (ExecutionException e) {
            return Optional.of(new Outcome(Optional.empty(), Optional.of(e.getCause().getMessage())));
        } catch (TimeoutException e) {
            return Optional.empty();
        }
    }

    /**
     * Ends the stream from this side, and waits up to {@link #CANCEL_WAIT} for the gateway to end
     * it too: the gateway takes the caller's half-close before the exit as the caller gone and
     * terminates the exec. A reset (gRPC cancel) would not do: Helidon 4.1.7's server marks a
     * reset stream closed without telling the call, so the exec kept running whenever the reset
     * reached the gateway before the CLI's exit closed the connection.
     */
    void cancel() {
        synchronized (requests) {
            try {
                requests.onCompleted();
            } catch (RuntimeException ignored) {
                // Already ended.
            }
        }
        try {
            outcome.get(CANCEL_WAIT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (ExecutionException | TimeoutException e) {
            // The connection's close when the CLI exits is the gateway's last word on it.
        }
    }

    private void write(OutputStream to, ByteString bytes) throws IOException {
        bytes.writeTo(to);
        to.flush();
        // Written out: the gateway may send as much again.
        send(ExecClientFrame.newBuilder().setOutputCredit(bytes.size()).build());
    }

    private void end(Outcome o) {
        if (outcome.complete(o)) {
            stdinCredit.wake();
            synchronized (requests) {
                try {
                    requests.onCompleted();
                } catch (RuntimeException ignored) {
                    // Already ended.
                }
            }
        }
    }

    private void send(ExecClientFrame frame) {
        synchronized (requests) {
            if (outcome.isDone()) {
                return;
            }
            try {
                requests.onNext(frame);
            } catch (RuntimeException e) {
                end(new Outcome(Optional.empty(), Optional.of("the exec stream broke: " + e.getMessage())));
            }
        }
    }

    /** Stdin bytes the gateway allows in flight; the pump waits for more. */
    static final class StdinCredit {
        private long available;

        synchronized void grant(long bytes) {
            available += bytes;
            notifyAll();
        }

        synchronized void giveBack(int bytes) {
            available += bytes;
        }

        synchronized void wake() {
            notifyAll();
        }

        /** @return up to {@code max} bytes of credit (at least 1), or 0 once {@code ended} is done */
        synchronized int take(int max, CompletableFuture<?> ended) throws InterruptedException {
            while (available == 0 && !ended.isDone()) {
                wait();
            }
            if (ended.isDone()) {
                return 0;
            }
            int n = (int) Math.min(max, available);
            available -= n;
            return n;
        }
    }
}
