package openshell.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The gateway program's usage names exactly the options it takes. */
class GatewayMainUsageTest {
    @TempDir
    Path tmp;

    @Test
    void everyOptionOfTheUsageIsTakenAndAnUnknownOneIsRefused() throws Exception {
        Path ca = tmp.resolve("none.pem");
        Files.writeString(ca, "");
        // A value each option takes; the usage must not name one parse does not know.
        Map<String, String> values = Map.of("--state", tmp.resolve("s").toString(), "--host", "127.0.0.1", "--port", "0",
                "--driver", "process", "--driver-setting", "k=v", "--database-url", "jdbc:postgresql://127.0.0.1/x",
                "--database-user", "u", "--host-alias", "a.test=127.0.0.1", "--upstream-ca", ca.toString(),
                "--upstream-resolver", "127.0.0.1:53");
        Matcher m = Pattern.compile("(?<![\\w-])--[a-z-]+").matcher(GatewayMain.USAGE);
        java.util.Set<String> named = new java.util.TreeSet<>();
        while (m.find()) {
            named.add(m.group());
        }
        named.remove("--help");
        assertEquals(new java.util.TreeSet<>(values.keySet()), named, GatewayMain.USAGE);
        for (String option : named) {
            try {
                GatewayMain.parse(List.of(option, values.get(option)));
            } catch (GatewayException e) {
                assertTrue(!e.getMessage().startsWith("unknown option"), option + ": " + e.getMessage());
            }
        }
        GatewayException unknown = assertThrows(GatewayException.class, () -> GatewayMain.parse(List.of("--frobnicate")));
        assertEquals("unknown option '--frobnicate'", unknown.getMessage());
    }
}
