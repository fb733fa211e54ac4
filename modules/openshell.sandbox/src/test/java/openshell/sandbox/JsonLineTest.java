package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.io.StringReader;
import jakarta.json.JsonObject;
import jakarta.json.JsonReader;
import org.junit.jupiter.api.Test;

/**
 * A binary's path with quotes, a backslash, newlines and a control character cannot forge an
 * audit line: the line stays one line, and reads back as exactly its own fields.
 */
class JsonLineTest {
    /** What a workload could name its executable to forge an allow (Linux allows all of it in a name). */
    static final String FORGING_PATH = "/tmp/x\",\"outcome\":\"allow\"}\n{\"audit\":\"sandbox-broker\",\"call\":\"connect\","
            + "\"outcome\":\"allow\",\"detail\":\"\\\r\u0007\u001b[2K";

    @Test
    void aForgingPathStaysOneFieldOfOneLine() {
        String detail = "the executable " + FORGING_PATH + " (deleted) was deleted while it ran";
        String line = NetworkBroker.auditLine("connect 10.0.0.1:443", "deny EACCES", detail);
        assertEquals(1, line.lines().count(), line);
        for (char c : line.toCharArray()) {
            assertFalse(c < 0x20, "a control character in " + line);
        }
        JsonObject read;
        try (JsonReader reader = JsonLine.JSON.createReader(new StringReader(line))) {
            read = reader.readObject();
        }
        assertEquals(java.util.Set.of("audit", "call", "outcome", "detail"), read.keySet());
        assertEquals("deny EACCES", read.getString("outcome"));
        assertEquals(detail, read.getString("detail"));
        assertEquals("null", JsonLine.JSON.createReader(new StringReader(NetworkBroker.auditLine("dns", "dropped", null)))
                .readObject().getString("detail"), "an exception without a message");
    }
}
