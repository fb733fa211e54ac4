package openshell.isolation;

import java.io.InputStream;
import java.io.OutputStream;
import java.util.Optional;

/**
 * A started exec and its streams. With pipes, stdout and stderr are separate; on a PTY all output
 * arrives on {@link #stdout()} and {@link #stderr()} is at end of stream. The exit status becomes
 * available only after the output has been drained.
 */
public interface ExecSession extends AutoCloseable {
    /** @return the process */
    BoundaryProcess process();

    /** @return the process's standard input; closing it half-closes the input */
    OutputStream stdin();

    /** @return standard output (or the merged terminal output) */
    InputStream stdout();

    /** @return standard error; empty on a PTY */
    InputStream stderr();

    /** @return the terminal when the exec runs on a PTY */
    Optional<Terminal> terminal();

    /** Releases the streams; does not kill the process. */
    @Override
    void close();

    /** The pseudo-terminal of an exec. */
    interface Terminal {
        /**
         * @param size the new size
         * @throws BackendException TERMINATED if the process ended
         */
        void resize(TerminalSize size);
    }
}
