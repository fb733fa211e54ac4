package openshell.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class SegmentGlobTest {
    private static SegmentGlob glob(String pattern) {
        return SegmentGlob.of(pattern, pattern.isEmpty() ? new String[0] : pattern.split("/"));
    }

    private static String[] segs(String path) {
        return path.isEmpty() ? new String[0] : path.split("/");
    }

    @ParameterizedTest
    @CsvSource({
            "a/b, a/b, true",
            "a/b, a/c, false",
            "a/*, a/b, true",
            "a/*, a, false",
            "a/*, a/b/c, false",
            "a/**, a, true",
            "a/**, a/b/c, true",
            "**/z, z, true",
            "**/z, a/b/z, true",
            "**/z, a/b/y, false",
            "a/**/z, a/z, true",
            "a/**/z, a/b/c/z, true",
            "a/**/z, a/b/c/y, false",
            "*.json, x.json, true",
            "*.json, x.yaml, false",
            "v*/x, v12/x, true",
            "a*b*c, abc, true",
            "a*b*c, axxbyyc, true",
            "a*b*c, axxbyy, false",
            "**, '', true",
            "'', '', true",
            "'', a, false",
    })
    void matches(String pattern, String path, boolean expected) {
        assertEquals(expected, glob(pattern).matches(segs(path)), pattern + " vs " + path);
    }

    @Test
    void suffixIsTheLiteralTail() {
        assertEquals("github.com", SegmentGlob.of("*.github.com", "*", "github", "com").literalSuffix('.'));
        assertEquals("example.com", SegmentGlob.of("api.*.example.com", "api", "*", "example", "com").literalSuffix('.'));
        assertEquals("", SegmentGlob.of("a.*", "a", "*").literalSuffix('.'));
        assertTrue(SegmentGlob.of("x", "**").hasWildcard());
        assertFalse(SegmentGlob.of("x", "a", "b").hasWildcard());
    }

    @Test
    void adversarialPatternsStayLinearish() {
        String[] tokens = new String[200];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = i % 2 == 0 ? "**" : "a";
        }
        SegmentGlob g = SegmentGlob.of("adversarial", tokens);
        String[] path = new String[2000];
        java.util.Arrays.fill(path, "a");
        path[path.length - 1] = "b";
        assertTimeoutPreemptively(Duration.ofSeconds(10), () -> assertFalse(g.matches(path)));
        String star = "*a".repeat(200);
        assertTimeoutPreemptively(Duration.ofSeconds(10), () -> assertFalse(SegmentGlob.innerMatches(star, "a".repeat(4000) + "b")));
    }

    @ParameterizedTest
    @CsvSource({
            "*.example.com, **.example.com, true",
            "*.a.example.com, *.b.example.com, false",
            "api.*.example.com, *.x.example.com, true",
            "*-api.example.com, x-*.example.com, true",
            "*-api.example.com, *-web.example.com, false",
            "a*.example.com, b*.example.com, false",
            "**.example.com, **.example.org, false",
            "**.b.example.com, a.**.example.com, true",
            "api.example.com, *.example.com, true",
            "api.example.com, *.*.example.com, false",
    })
    void hostPatternsIntersectWhenSomeNameMatchesBoth(String a, String b, boolean expected) {
        java.util.List<String> problems = new java.util.ArrayList<>();
        assertEquals(expected, hostGlob(a).intersects(hostGlob(b)), a + " & " + b);
        assertEquals(expected, hostGlob(b).intersects(hostGlob(a)), b + " & " + a + " (symmetric)");
        assertTrue(problems.isEmpty());
    }

    /** Host labels as tokens; "**" written anywhere is MANY here, to exercise the walk on both sides. */
    private static SegmentGlob hostGlob(String pattern) {
        java.util.List<String> tokens = new java.util.ArrayList<>();
        for (String l : pattern.split("\\.")) {
            if (l.equals("**")) {
                tokens.add("*");
            }
            tokens.add(l);
        }
        return SegmentGlob.of(pattern, tokens.toArray(String[]::new));
    }
}
