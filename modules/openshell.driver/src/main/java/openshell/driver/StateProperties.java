package openshell.driver;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.util.Properties;

/**
 * The one form every driver writes its persisted state and topology descriptors in: Java
 * properties without the timestamp comment and with sorted lines, so equal states give equal
 * bytes (the gateway compares and stores them as they are), read back strictly. Shared so that
 * no driver reads or writes it differently.
 */
public final class StateProperties {
    private StateProperties() {
    }

    /**
     * @param p the values
     * @return their canonical bytes: sorted {@code key=value} lines, ISO-8859-1, no comment
     */
    public static byte[] write(Properties p) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try {
            p.store(out, null);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        String text = out.toString(StandardCharsets.ISO_8859_1).lines().filter(l -> !l.startsWith("#"))
                .sorted().reduce("", (a, b) -> a + b + "\n");
        return text.getBytes(StandardCharsets.ISO_8859_1);
    }

    /**
     * @param state what {@link #write} made
     * @return the values
     * @throws IllegalArgumentException if the bytes are not properties
     */
    public static Properties read(byte[] state) {
        Properties p = new Properties();
        try {
            p.load(new StringReader(new String(state, StandardCharsets.ISO_8859_1)));
        } catch (IOException e) {
            throw new IllegalArgumentException("unreadable properties: " + e.getMessage(), e);
        }
        return p;
    }

    /**
     * @param p   the values
     * @param key a key that must be there
     * @return its value
     * @throws IllegalArgumentException naming the key when it is missing
     */
    public static String required(Properties p, String key) {
        String v = p.getProperty(key);
        if (v == null) {
            throw new IllegalArgumentException("missing " + key);
        }
        return v;
    }
}
