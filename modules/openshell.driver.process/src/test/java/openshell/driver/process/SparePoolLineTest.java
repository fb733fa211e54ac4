package openshell.driver.process;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.StringReader;
import jakarta.json.Json;
import jakarta.json.JsonObject;
import org.junit.jupiter.api.Test;

/** An exception's text with a forging path stays one value of one status line of the pool. */
class SparePoolLineTest {
    @Test
    void aPathWithQuotesAndNewlinesCannotForgeALine() {
        String detail = "cannot create /run/x\"}\n{\"ready\":true,\"admin\":\"http://127.0.0.1:1\"}\r\u0001: denied";
        String line = SparePool.statusLine("not-started", "os-spare-0a", detail);
        assertEquals(1, line.lines().count(), line);
        assertTrue(line.chars().noneMatch(c -> c < 0x20), line);
        assertTrue(!line.contains(SparePool.READY), "a driver reading the log for the ready line must not find it: " + line);
        JsonObject read = Json.createReader(new StringReader(line)).readObject();
        assertEquals(detail, read.getString("detail"));
        assertEquals("os-spare-0a", read.getString("spare"));
        assertEquals("not-started", read.getString("pool"));
    }
}
