package openshell.cli;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;

/**
 * What a gateway that did not come up said about why, from the part of {@code gateway.log} its
 * start wrote: so that {@code gateway start --background} says what is wrong (and the gateway's
 * words say what fixes it) instead of only pointing at the log.
 */
final class GatewayStartLog {
    /** How much of the log's new end is read. */
    static final int MAX_READ_BYTES = 64 * 1024;
    /** How many of its last lines are quoted when it gave no reason of its own. */
    static final int TAIL_LINES = 3;
    private static final String OWN = "openshell gateway: ";

    private GatewayStartLog() {
    }

    /**
     * @param log  the gateway's log
     * @param from its size before this start
     * @return the gateway's last line of its own ({@code openshell gateway: ...}) written since, else
     *         its last lines, else that it wrote nothing
     */
    static String cause(Path log, long from) {
        String text;
        try (RandomAccessFile f = new RandomAccessFile(log.toFile(), "r")) {
            long start = Math.max(from, f.length() - MAX_READ_BYTES);
            byte[] bytes = new byte[(int) Math.max(0, f.length() - start)];
            f.seek(start);
            f.readFully(bytes);
            text = new String(bytes, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "its log cannot be read (" + e.getMessage() + ")";
        }
        List<String> lines = text.lines().map(String::strip).filter(l -> !l.isEmpty()).toList();
        List<String> own = lines.stream().filter(l -> l.startsWith(OWN)).toList();
        if (!own.isEmpty()) {
            return own.getLast().substring(OWN.length());
        }
        if (lines.isEmpty()) {
            return "it wrote nothing to its log";
        }
        return String.join(" / ", lines.subList(Math.max(0, lines.size() - TAIL_LINES), lines.size()));
    }
}
