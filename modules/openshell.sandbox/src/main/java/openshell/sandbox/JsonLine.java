package openshell.sandbox;

import java.io.StringWriter;

import jakarta.json.JsonObjectBuilder;
import jakarta.json.JsonWriter;
import jakarta.json.spi.JsonProvider;

/**
 * One JSON object per line, written by the JSON library (as the supervisor's audit lines are):
 * a value that holds quotes, backslashes or newlines (a binary's path, an argv, an exception's
 * text) is escaped, so it can neither end the line nor add a field or a forged line.
 */
final class JsonLine {
    /** Looked up once: each lookup through ServiceLoader builds a new provider. */
    static final JsonProvider JSON = JsonProvider.provider();

    private JsonLine() {
    }

    static JsonObjectBuilder object() {
        return JSON.createObjectBuilder();
    }

    static String write(JsonObjectBuilder object) {
        StringWriter out = new StringWriter();
        try (JsonWriter w = JSON.createWriter(out)) {
            w.writeObject(object.build());
        }
        return out.toString();
    }
}
