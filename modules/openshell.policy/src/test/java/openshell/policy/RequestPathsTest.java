package openshell.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

class RequestPathsTest {
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "/|/",
            "/a/b|/a/b",
            "//a///b//|/a/b/",
            "/a/./b/.|/a/b/",
            "/a/b/../c|/a/c",
            "/a/%2e%2E/c|/c",
            "/a/.%2e/c|/c",
            "/a/%2E/c|/a/c",
            "/%61dmin|/admin",
            "/a%7e|/a~",
            "/a%3b|/a%3B",
            "/caf%c3%a9|/caf%C3%A9",
            "/a?x=/../..|/a",
            "/a/?|/a/",
            "/x:y@z!$&'()*+,=|/x:y@z!$&'()*+,=",
            "/a/..|/",
            "/a;b=c|/a",
            "/a/..;/b|/b",
            "/a/b;x/..;y/c|/a/c",
    })
    void normalizes(String target, String expected) throws Exception {
        assertEquals(expected, RequestPaths.normalize(target));
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "a/b", "*", "http://x/a", "/..", "/a/../..", "/%2e%2e/a", "/a%2Fb", "/a%2fb",
            "/a%5Cb", "/a\\b", "/a%00", "/a%0a", "/a%7F", "/a%", "/a%4", "/a%zz", "/..;/a", "/a#f", "/a b",
            "/caf\u00e9", "/a\u0000", "/a%\u0663\u0663", "?q"})
    void refuses(String target) {
        assertThrows(RequestPaths.Refused.class, () -> RequestPaths.normalize(target));
    }

    @Test
    void targetLengthBound() throws Exception {
        String ok = "/" + "a".repeat(RequestPaths.MAX_TARGET_LENGTH - 1);
        assertEquals(ok, RequestPaths.normalize(ok));
        assertThrows(RequestPaths.Refused.class, () -> RequestPaths.normalize(ok + "a"));
    }

    @Test
    void patternsAreCanonicalized() {
        List<String> problems = new ArrayList<>();
        SegmentGlob g = RequestPaths.parsePattern("/%61pi/*/v%31/**", problems);
        assertNotNull(g, problems.toString());
        assertFalse(g.matches(new String[] {"api", "x", "v1"}), "a trailing /** needs something after the prefix");
        assertTrue(g.matches(new String[] {"api", "x", "v1", "y"}));
        assertTrue(g.matches(new String[] {"api", "x", "v1", "y", "z"}));
        SegmentGlob middle = RequestPaths.parsePattern("/a/**/b", problems);
        assertTrue(middle.matches(new String[] {"a", "b"}), "a middle /**/ is zero or more segments");
        assertTrue(middle.matches(new String[] {"a", "x", "y", "b"}));
        SegmentGlob all = RequestPaths.parsePattern("**", problems);
        assertTrue(all.matches(new String[0]));
        assertTrue(RequestPaths.parsePattern("/**", problems).matches(new String[0]));
        assertTrue(RequestPaths.parsePattern("/a/**b", problems).matches(new String[] {"a", "xb"}), "'**' inside a segment is '*'");
        assertTrue(problems.isEmpty(), problems.toString());
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "x", "a/b", "/a//b", "/a/./b", "/a/../b", "/a?b=c", "/a/%2F", "/a;b", "/a b"})
    void refusesPatterns(String pattern) {
        List<String> problems = new ArrayList<>();
        assertNull(RequestPaths.parsePattern(pattern, problems));
        assertEquals(1, problems.size(), problems.toString());
    }

    @Test
    void patternLengthBound() {
        List<String> problems = new ArrayList<>();
        String ok = "/" + "a".repeat(RequestPaths.MAX_PATTERN_LENGTH - 1);
        assertNotNull(RequestPaths.parsePattern(ok, problems));
        assertNull(RequestPaths.parsePattern(ok + "a", problems));
        assertEquals(1, problems.size());
    }
}
