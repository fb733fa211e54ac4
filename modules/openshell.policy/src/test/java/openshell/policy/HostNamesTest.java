package openshell.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class HostNamesTest {
    @Test
    void canonicalFoldsCaseAndOneTrailingDot() {
        assertEquals("api.github.com", HostNames.canonical("API.GitHub.Com."));
        assertEquals("a_b-c.x", HostNames.canonical("a_b-c.x"));
        assertNull(HostNames.canonical("a..b"));
        assertNull(HostNames.canonical("a.b.."));
        assertNull(HostNames.canonical(".a"));
        assertNull(HostNames.canonical("a b"));
        assertNull(HostNames.canonical("caf\u00e9.fr"));
        assertNull(HostNames.canonical(""));
    }

    @Test
    void labelAndNameLengthBounds() {
        String label63 = "a".repeat(HostNames.MAX_LABEL_LENGTH);
        assertEquals(label63, HostNames.canonical(label63));
        assertNull(HostNames.canonical(label63 + "a"));
        String name253 = ("a".repeat(49) + ".").repeat(5) + "a".repeat(3);
        assertEquals(HostNames.MAX_NAME_LENGTH, name253.length());
        assertEquals(name253, HostNames.canonical(name253));
        assertNull(HostNames.canonical(name253 + "a"));
    }

    @Test
    void ipLiteralsNeverResolve() {
        assertEquals("10.0.0.1", HostNames.ipLiteral("10.0.0.1").getHostAddress());
        assertTrue(HostNames.ipLiteral("[::1]").isLoopbackAddress());
        assertNull(HostNames.ipLiteral("10.0.0"));
        assertNull(HostNames.ipLiteral("010.0.0.1"));
        assertNull(HostNames.ipLiteral("256.0.0.1"));
        assertNull(HostNames.ipLiteral("example.com"));
        assertNull(HostNames.ipLiteral("::g"));
    }

    @Test
    void patternKinds() {
        List<String> problems = new ArrayList<>();
        assertInstanceOf(HostNames.Exact.class, HostNames.parsePattern("API.example.com", problems));
        assertInstanceOf(HostNames.Ip.class, HostNames.parsePattern("192.0.2.1", problems));
        HostNames.Wildcard w = assertInstanceOf(HostNames.Wildcard.class, HostNames.parsePattern("**.Example.com", problems));
        assertEquals("example.com", w.suffix());
        assertTrue(w.matches("a.b.example.com"));
        assertTrue(problems.isEmpty(), problems.toString());
    }

    @Test
    void upstreamWildcardsInsideTheFirstLabelAndAsMiddleLabels() {
        List<String> problems = new ArrayList<>();
        HostNames.Wildcard inner = assertInstanceOf(HostNames.Wildcard.class,
                HostNames.parsePattern("*-aiplatform.googleapis.com", problems));
        assertTrue(inner.matches("us-central1-aiplatform.googleapis.com"));
        assertFalse(inner.matches("x.us-aiplatform.googleapis.com"));
        HostNames.Wildcard middle = assertInstanceOf(HostNames.Wildcard.class,
                HostNames.parsePattern("*.s3.*.amazonaws.com", problems));
        assertTrue(middle.matches("bucket.s3.us-east-1.amazonaws.com"));
        assertFalse(middle.matches("bucket.s3.amazonaws.com"));
        assertFalse(middle.matches("a.bucket.s3.us-east-1.amazonaws.com"));
        HostNames.Wildcard many = assertInstanceOf(HostNames.Wildcard.class, HostNames.parsePattern("**.example.com", problems));
        assertFalse(many.matches("example.com"), "** is one or more labels, never the apex");
        assertTrue(problems.isEmpty(), problems.toString());
    }

    @ParameterizedTest
    @ValueSource(strings = {"*", "**", "example.*", "a.**", "*.com", "**.com", "foo.**.example.com", "api.foo*.example.com",
            "*x.example.*", "a..b", "a b.com", "example.com.", "***.example.com", "**x.example.com"})
    void refusesPatterns(String pattern) {
        List<String> problems = new ArrayList<>();
        assertNull(HostNames.parsePattern(pattern, problems));
        assertEquals(1, problems.size(), problems.toString());
    }
}
