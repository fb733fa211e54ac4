package openshell.cli;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * The CLI's controlling terminal for {@code sandbox connect} and {@code exec --tty}: raw mode
 * (every key, Ctrl-C included, goes to the remote PTY, whose line discipline turns it into a
 * signal there) and the window size, followed while the exec runs. Uses {@code stty} on {@code /dev/tty}: the JDK
 * has no termios API, and stty is on every machine that has a terminal.
 */
final class LocalTerminal implements AutoCloseable {
    /** Longest an {@code stty} call may take. */
    static final long STTY_TIMEOUT_SECONDS = 5;
    /** How often {@code connect} checks the terminal's size (a resize shows within this). */
    static final long RESIZE_POLL_MILLIS = 500;
    private static final File TTY = new File("/dev/tty");

    private final String saved;
    private volatile boolean closed;

    private LocalTerminal(String saved) {
        this.saved = saved;
    }

    /** @return whether the CLI's stdin and stdout are a terminal */
    static boolean interactive() {
        java.io.Console console = System.console();
        return console != null && console.isTerminal();
    }

    /**
     * Puts the terminal in raw mode without echo; {@link #close()} restores it (also on exit).
     *
     * @return the terminal, or empty if stdin is not one or stty fails
     */
    static Optional<LocalTerminal> raw() {
        if (!interactive()) {
            return Optional.empty();
        }
        Optional<String> saved = stty("-g");
        if (saved.isEmpty() || stty("raw", "-echo").isEmpty()) {
            return Optional.empty();
        }
        LocalTerminal t = new LocalTerminal(saved.get().strip());
        Runtime.getRuntime().addShutdownHook(new Thread(t::close));
        return Optional.of(t);
    }

    /** @return columns and rows of the controlling terminal, if there is one */
    static Optional<int[]> size() {
        return stty("size").flatMap(s -> {
            String[] parts = s.strip().split("\\s+");
            try {
                int rows = Integer.parseInt(parts[0]);
                int columns = Integer.parseInt(parts[1]);
                return rows > 0 && columns > 0 ? Optional.of(new int[] {columns, rows}) : Optional.empty();
            } catch (RuntimeException e) {
                return Optional.empty();
            }
        });
    }

    /**
     * Calls {@code action} whenever the terminal's size changes, by polling it every
     * {@link #RESIZE_POLL_MILLIS}: the JDK's only signal API ({@code sun.misc.Signal}) lives in
     * {@code jdk.unsupported}, and with that module in the graph protobuf switches to
     * {@code sun.misc.Unsafe} and the JDK prints a warning onto the remote command's stderr.
     *
     * @param initial the size the exec started with (columns, rows)
     * @param action  gets the new columns and rows
     */
    void onResize(int[] initial, java.util.function.BiConsumer<Integer, Integer> action) {
        Thread.ofVirtual().name("terminal-size").start(() -> {
            int[] last = initial;
            while (!closed) {
                try {
                    Thread.sleep(RESIZE_POLL_MILLIS);
                } catch (InterruptedException e) {
                    return;
                }
                Optional<int[]> now = size();
                if (now.isPresent() && !java.util.Arrays.equals(now.get(), last) && !closed) {
                    last = now.get();
                    action.accept(last[0], last[1]);
                }
            }
        });
    }

    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            stty(saved);
        }
    }

    private static Optional<String> stty(String... args) {
        String[] command = new String[args.length + 1];
        command[0] = "stty";
        System.arraycopy(args, 0, command, 1, args.length);
        try {
            Process p = new ProcessBuilder(command).redirectInput(TTY).redirectError(ProcessBuilder.Redirect.DISCARD)
                    .start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(STTY_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return Optional.empty();
            }
            return p.exitValue() == 0 ? Optional.of(out) : Optional.empty();
        } catch (IOException e) {
            return Optional.empty();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Optional.empty();
        }
    }
}
