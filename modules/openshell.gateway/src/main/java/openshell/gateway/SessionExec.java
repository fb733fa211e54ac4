package openshell.gateway;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import com.google.protobuf.ByteString;
import openshell.protocol.wire.GatewayMessage;
import openshell.protocol.wire.RemoteExecControl;
import openshell.protocol.wire.RemoteExecEvent;
import openshell.protocol.wire.RemoteExecInput;
import openshell.protocol.wire.RemoteTerminalSize;

/**
 * One exec relayed over a supervisor session, with credit flow control on the session hop: the
 * supervisor sends at most {@link #OUTPUT_WINDOW} output bytes that the API side has not yet
 * passed on ({@link #grantOutput}), and the gateway sends at most {@link #STDIN_WINDOW} stdin
 * bytes that the supervisor has not yet written to the process (its {@code stdin_credit}).
 * Events are queued here, never blocking the session's inbound thread; the window bounds the
 * queue, and a supervisor that exceeds it loses the exec (it is terminated). Empty output
 * events are dropped, so the queue holds at most one event per byte of window.
 */
final class SessionExec {
    /** Output bytes in flight from the supervisor per exec (what this gateway may hold for a slow reader). */
    static final int OUTPUT_WINDOW = 256 * 1024;
    /**
     * Stdin bytes in flight to the supervisor per exec. Small on purpose: Helidon 4.1.7's gRPC
     * client (the supervisor's end) cannot parse a message split across DATA frames, and the
     * server splits one whenever the HTTP/2 window (64 KiB) has less room than the message; so the
     * bytes in flight to a Helidon client must stay well inside that window.
     */
    static final int STDIN_WINDOW = 16 * 1024;
    /**
     * Largest stdin piece per session message. Helidon 4.1.7's gRPC client (the supervisor's end)
     * fails with "Invalid protobuf byte sequence" on a message that spans two HTTP/2 DATA frames
     * (16 KiB by default), so every message to a Helidon client stays well inside one frame.
     */
    static final int MAX_STDIN_PIECE = 8 * 1024;

    final String execId;
    private final Consumer<GatewayMessage> session;
    private final BlockingQueue<RemoteExecEvent> events = new LinkedBlockingQueue<>();
    private volatile Runnable onDone = () -> { };
    private volatile String lost;
    private long outputHeld;
    private long stdinInFlight;
    private boolean stdinClosed;
    private boolean ended;

    /**
     * @param execId  the exec's id on the session
     * @param session sends a message on the session (may throw {@link GatewayException} once it ended)
     */
    SessionExec(String execId, Consumer<GatewayMessage> session) {
        this.execId = execId;
        this.session = session;
    }

    void onDone(Runnable action) {
        onDone = action;
    }

    /**
     * An event from the supervisor; never blocks.
     *
     * @return false if the supervisor broke the window (the exec is then lost and terminated)
     */
    boolean deliver(RemoteExecEvent e) {
        synchronized (this) {
            if (ended) {
                return true;
            }
            switch (e.getKindCase()) {
                case STDOUT, STDERR -> {
                    int n = e.getKindCase() == RemoteExecEvent.KindCase.STDOUT ? e.getStdout().size() : e.getStderr().size();
                    if (n == 0) {
                        return true;
                    }
                    if (outputHeld + n > OUTPUT_WINDOW) {
                        ended = true;
                        lost = "the supervisor sent more output than the window of " + OUTPUT_WINDOW + " bytes";
                        terminateQuietly();
                        return false;
                    }
                    outputHeld += n;
                }
                case STDIN_CREDIT -> stdinInFlight = Math.max(0, stdinInFlight - Integer.toUnsignedLong(e.getStdinCredit()));
                case EXIT_CODE, ERROR -> ended = true;
                case KIND_NOT_SET -> {
                    return true;
                }
            }
        }
        events.add(e);
        return true;
    }

    /**
     * @param wait how long to wait for the next event
     * @return the next event; an {@code error} event once the session is lost and all else was taken; empty if none yet
     */
    Optional<RemoteExecEvent> next(Duration wait) throws InterruptedException {
        RemoteExecEvent e = events.poll(wait.toMillis(), TimeUnit.MILLISECONDS);
        if (e == null && lost != null && events.isEmpty()) {
            e = RemoteExecEvent.newBuilder().setExecId(execId).setError(lost).build();
        }
        return Optional.ofNullable(e);
    }

    /**
     * The API side passed {@code bytes} of output on: the supervisor may send as many again. Never
     * throws: a session that ended meanwhile needs no credit.
     */
    void grantOutput(int bytes) {
        synchronized (this) {
            outputHeld = Math.max(0, outputHeld - bytes);
        }
        try {
            control(RemoteExecControl.newBuilder().setOutputCredit(bytes));
        } catch (GatewayException e) {
            // The session ended under the exec: the credit is moot, and what the supervisor sent
            // before (its exit, or the loss that follows it) still reaches the caller from the queue.
        }
    }

    /**
     * Sends stdin to the process.
     *
     * @param data  the bytes (at most what the stdin window still allows)
     * @param close whether stdin ends after them
     * @throws GatewayException INVALID beyond the window or after the close
     */
    void stdin(byte[] data, boolean close) {
        synchronized (this) {
            if (stdinClosed) {
                throw new GatewayException(GatewayException.Reason.INVALID, "stdin was already closed");
            }
            if (stdinInFlight + data.length > STDIN_WINDOW) {
                throw new GatewayException(GatewayException.Reason.INVALID, "more stdin than the window of "
                        + STDIN_WINDOW + " bytes before its credit came back");
            }
            stdinInFlight += data.length;
            stdinClosed = close;
        }
        int at = 0;
        do {
            int n = Math.min(MAX_STDIN_PIECE, data.length - at);
            boolean last = at + n == data.length;
            session.accept(GatewayMessage.newBuilder().setExecInput(RemoteExecInput.newBuilder().setExecId(execId)
                    .setData(ByteString.copyFrom(data, at, n)).setClose(close && last)).build());
            at += n;
        } while (at < data.length);
    }

    void resize(int columns, int rows) {
        control(RemoteExecControl.newBuilder().setResize(RemoteTerminalSize.newBuilder().setColumns(columns)
                .setRows(rows)));
    }

    void signal(int number) {
        control(RemoteExecControl.newBuilder().setSignal(number));
    }

    /** Kills the exec's process tree: its API caller went away before the exit. */
    void terminate() {
        synchronized (this) {
            if (ended) {
                return;
            }
            ended = true;
        }
        terminateQuietly();
    }

    private void terminateQuietly() {
        try {
            control(RemoteExecControl.newBuilder().setTerminate(true));
        } catch (GatewayException e) {
            // The session is gone; the supervisor terminates execs of a lost session itself.
        }
    }

    /** The exec ended or its API caller went away: stop relaying. */
    void done() {
        onDone.run();
    }

    /** The session ended; the caller gets an error event after what was already queued. */
    void lose(String reason) {
        lost = reason;
    }

    private void control(RemoteExecControl.Builder c) {
        session.accept(GatewayMessage.newBuilder().setExecControl(c.setExecId(execId)).build());
    }
}
