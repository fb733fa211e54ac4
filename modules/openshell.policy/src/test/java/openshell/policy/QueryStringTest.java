package openshell.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The query as a rule's condition reads it: decoded, repeated values kept, '.'-separated globs. */
class QueryStringTest {
    @Test
    void parsesDecodesAndKeepsRepeatedValues() throws Exception {
        Map<String, List<String>> q = QueryString.parse("a=1&a=2&b=x%2Ey&c&d=&e=a+b&%66=g");
        assertEquals(List.of("1", "2"), q.get("a"));
        assertEquals(List.of("x.y"), q.get("b"));
        assertEquals(List.of(""), q.get("c"));
        assertEquals(List.of(""), q.get("d"));
        assertEquals(List.of("a b"), q.get("e"));
        assertEquals(List.of("g"), q.get("f"));
        assertEquals("x=1", QueryString.rawQuery("/p?x=1"));
        assertEquals("", QueryString.rawQuery("/p"));
    }

    @Test
    void refusesWhatCannotBeDecoded() {
        assertThrows(RequestPaths.Refused.class, () -> QueryString.parse("a=%zz"));
        assertThrows(RequestPaths.Refused.class, () -> QueryString.parse("a=%ff"));
        assertThrows(RequestPaths.Refused.class, () -> QueryString.parse("a=1&".repeat(QueryString.MAX_PARAMETERS + 1)));
    }

    @Test
    void allowNeedsEveryValueDenyNeedsOne() throws Exception {
        List<String> problems = new ArrayList<>();
        QueryString.Condition c = new QueryString.Condition("v", List.of(QueryString.parseGlob("1.*", problems)));
        assertTrue(c.allows(QueryString.parse("v=1.2")));
        assertFalse(c.allows(QueryString.parse("v=1.2.3")), "'*' never crosses a dot");
        assertFalse(c.allows(QueryString.parse("v=1.2&v=2.0")));
        assertFalse(c.allows(QueryString.parse("w=1.2")), "an allow's parameter must be present");
        assertTrue(c.denies(QueryString.parse("v=2.0&v=1.2")));
        assertFalse(c.denies(QueryString.parse("w=1.2")), "a deny's parameter must be present");
        QueryString.Condition any = new QueryString.Condition("v", List.of(QueryString.parseGlob("**", problems)));
        assertTrue(any.allows(QueryString.parse("v=1.2.3")));
        assertTrue(problems.isEmpty(), problems.toString());
        QueryString.parseGlob("v?", problems);
        assertEquals(1, problems.size());
    }
}
