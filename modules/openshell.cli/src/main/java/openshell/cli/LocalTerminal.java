package openshell.cli;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * The CLI's controlling terminal for {@code sandbox connect} and {@code exec --tty}: raw mode
 * (every key, Ctrl-C included, goes to the remote PTY, whose line discipline turns it into a
 * signal there), the window size, and SIGWINCH. Uses {@code stty} on {@code /dev/tty}: the JDK
 * has no termios API, and stty is on every machine that has a terminal.
 */
final class LocalTerminal implements AutoCloseable {
    /** Longest an {@code stty} call may take. */
    static final long STTY_TIMEOUT_SECONDS = 5;
    private static final File TTY = new File("/dev/tty");

    private final String saved;

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
     * Calls {@code action} on every SIGWINCH. Best effort: without the signal (another JVM) the
     * remote keeps its first size.
     */
    static void onResize(Runnable action) {
        handle("WINCH", action);
    }

    /**
     * Forwards Ctrl-C (SIGINT) of a piped exec instead of letting it end the CLI.
     *
     * @param action what to do on SIGINT
     */
    static void onInterrupt(Runnable action) {
        handle("INT", action);
    }

    /**
     * {@code sun.misc.Signal.handle}, called reflectively: it is the JDK's only signal API, and a
     * direct reference is a proprietary-API warning that javac cannot suppress.
     */
    private static void handle(String signal, Runnable action) {
        try {
            Class<?> signalType = Class.forName("sun.misc.Signal");
            Class<?> handlerType = Class.forName("sun.misc.SignalHandler");
            Object handler = java.lang.reflect.Proxy.newProxyInstance(LocalTerminal.class.getClassLoader(),
                    new Class<?>[] {handlerType}, (proxy, method, args) -> switch (method.getName()) {
                        case "handle" -> {
                            action.run();
                            yield null;
                        }
                        case "hashCode" -> System.identityHashCode(proxy);
                        case "equals" -> proxy == args[0];
                        default -> "SignalHandler[" + signal + "]";
                    });
            Object s = signalType.getConstructor(String.class).newInstance(signal);
            signalType.getMethod("handle", signalType, handlerType).invoke(null, s, handler);
        } catch (ReflectiveOperationException | RuntimeException e) {
            // No such signal here: SIGWINCH keeps the first size, SIGINT ends the CLI (and the exec).
        }
    }

    @Override
    public synchronized void close() {
        stty(saved);
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
