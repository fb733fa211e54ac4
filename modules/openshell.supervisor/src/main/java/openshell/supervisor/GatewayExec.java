package openshell.supervisor;

import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.function.IntConsumer;

/**
 * One exec relayed for the gateway, between the session stream and the running process, with
 * credit-based flow control in both directions so that the session's one inbound thread never
 * blocks and no buffer grows without bound:
 * <ul>
 * <li>output: the supervisor sends at most the output window beyond the credit the gateway has
 * returned; a pump with no credit waits, so a slow API caller slows the process down;</li>
 * <li>stdin: the gateway sends at most the stdin window beyond the credit returned here; bytes
 * queue here (never more than the window) and a writer thread feeds the process, returning
 * credit once each chunk is written. More than the window is a protocol violation that ends the
 * exec.</li>
 * </ul>
 * Resize, signal and terminate bypass the stdin queue, so Ctrl-C reaches a process that does
 * not read its input.
 */
final class GatewayExec {
    /** Output window when the gateway asks for none. */
    static final int DEFAULT_OUTPUT_WINDOW = 256 * 1024;
    /** Largest output window the supervisor accepts; a larger request is capped. */
    static final int MAX_OUTPUT_WINDOW = 1024 * 1024;
    /** Stdin window when the gateway asks for none. */
    static final int DEFAULT_STDIN_WINDOW = 256 * 1024;
    /** Largest stdin window (bytes queued here for the process); a larger request is refused. */
    static final int MAX_STDIN_WINDOW = 1024 * 1024;

    private static final byte[] END_OF_INPUT = new byte[0];

    private final String id;
    private final int outputWindow;
    private final int stdinWindow;
    private final BlockingQueue<byte[]> stdin = new LinkedBlockingQueue<>();
    private final CompletableFuture<GatewaySessionHandler.ExecControl> control = new CompletableFuture<>();
    private long outputCredit;
    private long stdinQueued;
    private boolean stdinEnded;
    private boolean closed;

    /**
     * @param id           the exec's id
     * @param outputWindow requested output window (0: default; capped at {@link #MAX_OUTPUT_WINDOW})
     * @param stdinWindow  requested stdin window (0: default)
     * @throws IllegalArgumentException if the stdin window is above {@link #MAX_STDIN_WINDOW}
     */
    GatewayExec(String id, int outputWindow, int stdinWindow) {
        if (Integer.toUnsignedLong(stdinWindow) > MAX_STDIN_WINDOW) {
            throw new IllegalArgumentException("stdin window " + Integer.toUnsignedString(stdinWindow)
                    + " is above the supervisor's bound of " + MAX_STDIN_WINDOW);
        }
        this.id = id;
        long asked = Integer.toUnsignedLong(outputWindow);
        this.outputWindow = asked == 0 ? DEFAULT_OUTPUT_WINDOW : (int) Math.min(asked, MAX_OUTPUT_WINDOW);
        this.stdinWindow = stdinWindow == 0 ? DEFAULT_STDIN_WINDOW : stdinWindow;
        this.outputCredit = this.outputWindow;
    }

    String id() {
        return id;
    }

    int outputWindow() {
        return outputWindow;
    }

    int stdinWindow() {
        return stdinWindow;
    }

    /** The process started: controls that arrived before apply now, stdin starts flowing. */
    void started(GatewaySessionHandler.ExecControl started) {
        control.complete(started);
    }

    /**
     * Takes output credit for up to {@code wanted} bytes, waiting while there is none.
     *
     * @return the bytes that may be sent now (≥ 1), or -1 once the exec is closed
     */
    synchronized int awaitOutputCredit(int wanted) throws InterruptedException {
        while (!closed && outputCredit == 0) {
            wait();
        }
        if (closed) {
            return -1;
        }
        int n = (int) Math.min(wanted, outputCredit);
        outputCredit -= n;
        return n;
    }

    /** The gateway forwarded {@code bytes} more output; never more than the window is outstanding. */
    synchronized void grantOutput(long bytes) {
        outputCredit = Math.min(outputWindow, outputCredit + bytes);
        notifyAll();
    }

    /**
     * Queues stdin from the gateway without blocking.
     *
     * @param data  the bytes
     * @param close whether stdin ends after them
     * @return false if the gateway exceeded the stdin window or wrote after closing (a protocol violation)
     */
    synchronized boolean offerStdin(byte[] data, boolean close) {
        if (closed) {
            return true;
        }
        if (stdinEnded && (data.length > 0 || close)) {
            return data.length == 0;
        }
        if (stdinQueued + data.length > stdinWindow) {
            return false;
        }
        if (data.length > 0) {
            stdinQueued += data.length;
            stdin.add(data);
        }
        if (close) {
            stdinEnded = true;
            stdin.add(END_OF_INPUT);
        }
        return true;
    }

    /**
     * Feeds queued stdin to the process until it ends; returns credit for each chunk written.
     * Runs on the exec's own thread after {@link #started}.
     *
     * @param credit where the credit goes (to the gateway)
     */
    void pumpStdin(IntConsumer credit) throws InterruptedException {
        GatewaySessionHandler.ExecControl target = control.join();
        while (true) {
            byte[] chunk = stdin.take();
            if (chunk == END_OF_INPUT) {
                target.close();
                return;
            }
            synchronized (this) {
                if (closed) {
                    return;
                }
            }
            try {
                target.write(chunk);
            } catch (RuntimeException e) {
                // The process closed its stdin or ended; what is left is dropped, the exit tells why.
                return;
            }
            synchronized (this) {
                stdinQueued -= chunk.length;
            }
            credit.accept(chunk.length);
        }
    }

    void resize(int columns, int rows) {
        control.thenAccept(c -> c.resize(columns, rows));
    }

    void signal(int number) {
        control.thenAccept(c -> c.signal(number));
    }

    /** Kills the process tree (the API caller is gone, the session is lost or the gateway broke the protocol). */
    void terminate() {
        close();
        control.thenAccept(GatewaySessionHandler.ExecControl::terminate);
    }

    /** No more output is sent and no more stdin is written; waiting pumps wake up. */
    synchronized void close() {
        closed = true;
        stdin.add(END_OF_INPUT);
        notifyAll();
    }
}
