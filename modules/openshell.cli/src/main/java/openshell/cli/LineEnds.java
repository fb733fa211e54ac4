package openshell.cli;

import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;

/**
 * A stream of the CLI's (stdout or stderr) that knows whether what was written last ended its
 * line. A command's output in {@code sandbox exec} or {@code run} need not end with a newline (an
 * HTTP error body, {@code printf}); a line of the CLI's own written after it must not run on
 * from it ({@link Main#message}).
 */
final class LineEnds extends PrintStream {
    private final Tracker tracker;

    LineEnds(PrintStream target) {
        this(new Tracker(target), target);
    }

    private LineEnds(Tracker tracker, PrintStream target) {
        super(tracker, true, target.charset());
        this.tracker = tracker;
    }

    /** @return whether nothing was written yet or the last byte written was a newline */
    boolean atLineStart() {
        flush();
        return tracker.atLineStart;
    }

    /** Ends an unfinished line with a newline, so that what comes next starts one of its own. */
    void startLine() {
        if (!atLineStart()) {
            println();
        }
    }

    /** Counts the line as ended: another stream ended it on the same terminal. */
    void markLineStart() {
        flush();
        tracker.atLineStart = true;
    }

    private static final class Tracker extends FilterOutputStream {
        private volatile boolean atLineStart = true;

        Tracker(OutputStream out) {
            super(out);
        }

        @Override
        public void write(int b) throws IOException {
            out.write(b);
            atLineStart = b == '\n';
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            out.write(b, off, len);
            if (len > 0) {
                atLineStart = b[off + len - 1] == '\n';
            }
        }
    }
}
