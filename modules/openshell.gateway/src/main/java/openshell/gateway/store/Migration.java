package openshell.gateway.store;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

/**
 * One versioned schema step, kept as SQL text in this module so a deployment never depends on
 * files outside the gateway. Statements are separated by lines holding only {@code ;}.
 *
 * @param version     1, 2, 3, … with no gaps
 * @param description what it does
 */
record Migration(int version, String description) {
    /** Every migration this gateway knows, in order. The last one is the newest schema it can use. */
    static final List<Migration> ALL = List.of(
            new Migration(1, "sandbox records"),
            new Migration(2, "providers"),
            new Migration(3, "launch specifications"),
            new Migration(4, "sandbox log lines"),
            new Migration(5, "sandbox failures"),
            new Migration(6, "log line times"),
            new Migration(7, "replicas and sandbox leases"));

    List<String> statements() {
        String resource = "migrations/V" + version + ".sql";
        try (InputStream in = Migration.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IllegalStateException("missing migration resource " + resource);
            }
            String sql = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            return Arrays.stream(sql.split("(?m)^;\\s*$"))
                    .map(s -> s.lines().filter(l -> !l.strip().startsWith("--")).reduce("", (a, b) -> a + b + "\n").strip())
                    .filter(s -> !s.isEmpty())
                    .toList();
        } catch (IOException e) {
            throw new IllegalStateException("cannot read migration " + resource, e);
        }
    }
}
