package openshell.perf.sandbox;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * One run of osperf, on the host (a child process) or in a sandbox (a gateway exec): its stdout
 * as JSON lines, in order, with a deadline on every wait so a broken setup ends the run with an
 * error instead of a hang.
 */
final class ClientRun {
    private static final Object END = new Object();
    /** How often an agent's output file is read. */
    private static final Duration AGENT_POLL = Duration.ofMillis(20);
    /** The key of the line an agent's shell appends when osperf ended: {@code {"agent_exit":STATUS}}. */
    static final String AGENT_EXIT = "agent_exit";
    /** Longest quoted piece of a line that cannot be read. */
    private static final int QUOTE = 200;

    private final String what;
    private volatile long deadline;
    private final LinkedBlockingQueue<Object> lines = new LinkedBlockingQueue<>();
    private final ByteArrayOutputStream partial = new ByteArrayOutputStream();
    private final StringBuilder stderr = new StringBuilder();
    private volatile String failure;
    private volatile int exit = Integer.MIN_VALUE;
    private volatile long firstByteNanos = -1;
    private volatile AutoCloseable closer = () -> { };
    private volatile boolean closed;

    ClientRun(String what, Duration deadline) {
        this.what = what;
        this.deadline = System.nanoTime() + deadline.toNanos();
    }

    /** Starts osperf as a host process. */
    static ClientRun host(List<String> argv, Duration deadline) throws IOException {
        ClientRun run = new ClientRun("host: " + String.join(" ", argv), deadline);
        Process p = new ProcessBuilder(argv).start();
        p.getOutputStream().close();
        run.onClose(p::destroyForcibly);
        long started = System.nanoTime();
        Thread.ofVirtual().start(() -> {
            try (InputStream err = p.getErrorStream()) {
                run.stderr(new String(err.readAllBytes(), StandardCharsets.UTF_8));
            } catch (IOException e) {
                run.stderr(e.toString());
            }
        });
        Thread.ofVirtual().start(() -> {
            byte[] buf = new byte[65536];
            try (InputStream in = p.getInputStream()) {
                int n;
                while ((n = in.read(buf)) > 0) {
                    run.stdout(Arrays.copyOf(buf, n), started);
                }
                run.exit(p.waitFor());
            } catch (IOException e) {
                run.fail(e.toString());
            } catch (InterruptedException e) {
                run.fail("interrupted");
            }
        });
        return run;
    }

    /**
     * Follows osperf's output written to a file by a sandbox's agent ({@code sh -c 'exec osperf
     * ... >FILE; printf '\n{"agent_exit":%d}\n' $? >>FILE'}): used where a long exec stream
     * does not survive the run (tests/perf/README.md). The run ends at the first result or error
     * line, or at the agent's exit line (osperf cut off before its result: exit status of osperf).
     */
    static ClientRun agentFile(String what, Path file, Duration deadline) {
        ClientRun run = new ClientRun(what, deadline);
        long started = System.nanoTime();
        Thread.ofVirtual().start(() -> {
            long offset = 0;
            StringBuilder seen = new StringBuilder();
            try {
                while (!run.closed && System.nanoTime() - run.deadline < 0) {
                    if (Files.exists(file)) {
                        byte[] all = Files.readAllBytes(file);
                        if (all.length > offset) {
                            byte[] fresh = Arrays.copyOfRange(all, (int) offset, all.length);
                            offset = all.length;
                            run.stdout(fresh, started);
                            seen.append(new String(fresh, StandardCharsets.UTF_8));
                            int exitAt = seen.indexOf("{\"" + AGENT_EXIT + "\":");
                            if (exitAt >= 0 && seen.charAt(seen.length() - 1) == '\n') {
                                run.exit(exitStatus(seen.substring(exitAt)));
                                return;
                            }
                            if (seen.indexOf("\"result\"") >= 0 || seen.indexOf("\"error\"") >= 0) {
                                // the result line is complete once its newline arrived
                                if (seen.charAt(seen.length() - 1) == '\n') {
                                    run.exit(0);
                                    return;
                                }
                            }
                        }
                    }
                    Thread.sleep(AGENT_POLL);
                }
                run.fail(run.closed ? "closed" : "no result within the deadline");
            } catch (IOException e) {
                run.fail(e.toString());
            } catch (InterruptedException e) {
                run.fail("interrupted");
            }
        });
        return run;
    }

    private static int exitStatus(String exitLine) {
        try {
            return Integer.parseInt(exitLine.substring(exitLine.indexOf(':') + 1, exitLine.indexOf('}')).strip());
        } catch (RuntimeException e) {
            return -1;
        }
    }

    /** Bounds the waits from now on by {@code deadline} (a run with phases, each with its own bound). */
    void rearm(Duration deadline) {
        this.deadline = System.nanoTime() + deadline.toNanos();
    }

    void onClose(AutoCloseable c) {
        closer = c;
    }

    synchronized void stdout(byte[] bytes, long startedNanos) {
        if (firstByteNanos < 0) {
            firstByteNanos = System.nanoTime() - startedNanos;
        }
        for (byte b : bytes) {
            if (b == '\n') {
                lines.add(partial.toString(StandardCharsets.UTF_8));
                partial.reset();
            } else {
                partial.write(b);
            }
        }
    }

    synchronized void stderr(String text) {
        if (stderr.length() < 4096) {
            stderr.append(text);
        }
    }

    void exit(int code) {
        exit = code;
        lines.add(END);
    }

    void fail(String why) {
        failure = why;
        lines.add(END);
    }

    /** Nanoseconds from the start request to the first stdout byte, or -1 before it came. */
    long firstByteNanos() {
        return firstByteNanos;
    }

    /**
     * The next JSON line; an error line of osperf, an agent's exit line, a line that is not JSON
     * (cut off), an early end or the deadline throws, naming the run. Blank lines and text lines
     * (stderr written to the same file) are kept as stderr and skipped.
     */
    Map<String, Object> next() throws IOException, InterruptedException {
        while (true) {
            long left = deadline - System.nanoTime();
            Object line = left > 0 ? lines.poll(left, TimeUnit.NANOSECONDS) : lines.poll();
            if (line == null) {
                close();
                throw new IOException(what + ": no output before the deadline; stderr: " + stderr);
            }
            if (line == END) {
                lines.add(END);
                throw new IOException(what + ": ended (exit " + exit + (failure == null ? "" : ", " + failure) + ") before the expected line; stderr: " + stderr);
            }
            String text = ((String) line).strip();
            if (!text.startsWith("{")) {
                if (!text.isEmpty()) {
                    stderr(text + "\n");
                }
                continue;
            }
            Map<String, Object> m;
            try {
                m = Json.object(text);
            } catch (RuntimeException e) {
                throw new IOException(what + ": an output line is not JSON (the client was cut off?): "
                        + (text.length() > QUOTE ? text.substring(0, QUOTE) + "..." : text) + "; stderr: " + stderr);
            }
            if (m.containsKey("error")) {
                throw new IOException(what + ": " + m.get("error") + "; stderr: " + stderr);
            }
            if (m.containsKey(AGENT_EXIT)) {
                throw new IOException(what + ": osperf ended (status " + m.get(AGENT_EXIT) + ") before the expected line; stderr: " + stderr);
            }
            return m;
        }
    }

    /** The next line that has {@code key}. */
    Map<String, Object> await(String key) throws IOException, InterruptedException {
        while (true) {
            Map<String, Object> m = next();
            if (m.containsKey(key)) {
                return m;
            }
        }
    }

    /** Waits for the end (exit 0 expected) within the deadline. */
    void awaitExit() throws IOException, InterruptedException {
        while (true) {
            long left = deadline - System.nanoTime();
            Object line = left > 0 ? lines.poll(left, TimeUnit.NANOSECONDS) : null;
            if (line == null) {
                close();
                throw new IOException(what + ": did not end before the deadline");
            }
            if (line == END) {
                lines.add(END);
                if (exit != 0) {
                    throw new IOException(what + ": exit " + exit + (failure == null ? "" : ", " + failure) + "; stderr: " + stderr);
                }
                return;
            }
        }
    }

    /** Every stdout line of a command that is not osperf (one that prints text), once it ended with exit 0. */
    String awaitOutput() throws IOException, InterruptedException {
        StringBuilder out = new StringBuilder();
        while (true) {
            long left = deadline - System.nanoTime();
            Object line = left > 0 ? lines.poll(left, TimeUnit.NANOSECONDS) : null;
            if (line == null) {
                close();
                throw new IOException(what + ": did not end before the deadline");
            }
            if (line == END) {
                lines.add(END);
                if (exit != 0) {
                    throw new IOException(what + ": exit " + exit + (failure == null ? "" : ", " + failure) + "; stderr: " + stderr);
                }
                return out.toString();
            }
            out.append((String) line).append('\n');
        }
    }

    void close() {
        closed = true;
        try {
            closer.close();
        } catch (Exception e) {
            // best effort: the run is being abandoned
        }
    }

    String what() {
        return what;
    }
}
