package openshell.driver;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.util.Properties;

import org.junit.jupiter.api.Test;

/** The drivers' state form: equal values give equal bytes, and a missing key is named. */
class StatePropertiesTest {
    @Test
    void equalValuesGiveEqualBytesWhateverTheOrderAndTheyReadBack() {
        Properties a = new Properties();
        a.setProperty("b", "2");
        a.setProperty("a", "x=y\n1");
        Properties b = new Properties();
        b.setProperty("a", "x=y\n1");
        b.setProperty("b", "2");
        byte[] bytes = StateProperties.write(a);
        assertArrayEquals(bytes, StateProperties.write(b));
        assertEquals("a=x\\=y\\n1\nb=2\n", new String(bytes, StandardCharsets.ISO_8859_1), "sorted, no timestamp comment");
        assertEquals(a, StateProperties.read(bytes));
    }

    @Test
    void aMissingKeyIsNamedAndUnreadableBytesAreRefused() {
        Properties p = StateProperties.read("a=1\n".getBytes(StandardCharsets.ISO_8859_1));
        assertEquals("1", StateProperties.required(p, "a"));
        assertEquals("missing b", assertThrows(IllegalArgumentException.class, () -> StateProperties.required(p, "b")).getMessage());
        assertThrows(IllegalArgumentException.class, () -> StateProperties.read("a=\\u00zz".getBytes(StandardCharsets.ISO_8859_1)));
    }
}
