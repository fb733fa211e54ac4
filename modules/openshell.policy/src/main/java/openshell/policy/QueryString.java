package openshell.policy;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A request's query string as a rule's {@code query} condition sees it, and those conditions.
 * Only a rule that names a query parameter ever reads the query; a rule without one ignores it.
 * Names and values are percent-decoded ({@code +} is a space, as in forms); a malformed escape or
 * invalid UTF-8 refuses the request when a rule needs the query. Values match globs with
 * {@code .} as separator: {@code *} never crosses a dot, {@code **} matches any value.
 */
final class QueryString {
    /** Most parameters read from one query; more refuses the request when a rule needs the query. */
    static final int MAX_PARAMETERS = 256;

    private QueryString() {
    }

    /**
     * @param target the request target
     * @return the raw query after the first {@code ?}, or "" if there is none
     */
    static String rawQuery(String target) {
        int q = target.indexOf('?');
        return q < 0 ? "" : target.substring(q + 1);
    }

    /**
     * @param raw the raw query
     * @return every parameter's values in order
     * @throws RequestPaths.Refused if the query cannot be decoded
     */
    static Map<String, List<String>> parse(String raw) throws RequestPaths.Refused {
        Map<String, List<String>> out = new LinkedHashMap<>();
        if (raw.isEmpty()) {
            return out;
        }
        int count = 0;
        for (String pair : raw.split("&", -1)) {
            if (pair.isEmpty()) {
                continue;
            }
            if (++count > MAX_PARAMETERS) {
                throw new RequestPaths.Refused("more than " + MAX_PARAMETERS + " query parameters");
            }
            int eq = pair.indexOf('=');
            String name = decode(eq < 0 ? pair : pair.substring(0, eq));
            String value = eq < 0 ? "" : decode(pair.substring(eq + 1));
            out.computeIfAbsent(name, k -> new ArrayList<>()).add(value);
        }
        return out;
    }

    private static String decode(String s) throws RequestPaths.Refused {
        if (s.indexOf('%') < 0 && s.indexOf('+') < 0) {
            return s;
        }
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '+') {
                bytes.write(' ');
            } else if (c == '%') {
                if (i + 2 >= s.length() || Character.digit(s.charAt(i + 1), 16) < 0 || Character.digit(s.charAt(i + 2), 16) < 0) {
                    throw new RequestPaths.Refused("malformed percent escape in the query");
                }
                bytes.write(Character.digit(s.charAt(i + 1), 16) * 16 + Character.digit(s.charAt(i + 2), 16));
                i += 2;
            } else {
                byte[] b = String.valueOf(c).getBytes(StandardCharsets.UTF_8);
                bytes.write(b, 0, b.length);
            }
        }
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(bytes.toByteArray())).toString();
        } catch (CharacterCodingException e) {
            throw new RequestPaths.Refused("the query is not UTF-8 once decoded");
        }
    }

    /**
     * One parameter's condition: its value must match one of the globs.
     *
     * @param name  the parameter name
     * @param globs the alternatives ({@code any:}), at least one
     */
    record Condition(String name, List<SegmentGlob> globs) {
        /** In an allow rule every value must match (and one must be there). */
        boolean allows(Map<String, List<String>> query) {
            List<String> values = query.get(name);
            if (values == null || values.isEmpty()) {
                return false;
            }
            for (String v : values) {
                if (!matchesAny(v)) {
                    return false;
                }
            }
            return true;
        }

        /** In a deny rule the parameter must be there, and one matching value is enough. */
        boolean denies(Map<String, List<String>> query) {
            List<String> values = query.get(name);
            if (values == null) {
                return false;
            }
            for (String v : values) {
                if (matchesAny(v)) {
                    return true;
                }
            }
            return false;
        }

        private boolean matchesAny(String value) {
            String[] parts = value.split("\\.", -1);
            for (SegmentGlob g : globs) {
                if (g.matches(parts)) {
                    return true;
                }
            }
            return false;
        }
    }

    /**
     * @param text     a value glob from a policy
     * @param problems where to say what is wrong
     * @return the glob over dot-separated parts, or null after adding a problem
     */
    static SegmentGlob parseGlob(String text, List<String> problems) {
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '?' || c == '[' || c == ']' || c == '{' || c == '}' || c == '\\' || c < 0x20) {
                problems.add("a query glob here takes '*' and '**' only; '" + c + "' is not supported: '" + text + "'");
                return null;
            }
        }
        String[] parts = text.split("\\.", -1);
        List<String> tokens = new ArrayList<>(parts.length);
        for (String p : parts) {
            if (p.equals("**")) {
                tokens.add("**");
            } else {
                String t = p;
                while (t.contains("**")) {
                    t = t.replace("**", "*");
                }
                tokens.add(t);
            }
        }
        return SegmentGlob.of(text, tokens.toArray(String[]::new));
    }
}
