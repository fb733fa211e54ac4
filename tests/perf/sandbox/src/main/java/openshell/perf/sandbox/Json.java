package openshell.perf.sandbox;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The JSON this harness reads (the gateway's replies, osperf's lines) and writes (the results):
 * objects as {@code Map}, arrays as {@code List}, numbers as {@code Double} or {@code Long}. The
 * harness has no dependencies so it runs from its class directory alone, like the other perf
 * harnesses; the inputs are small and come from programs of this repository.
 */
final class Json {
    private final String text;
    private int at;

    private Json(String text) {
        this.text = text;
    }

    static Object parse(String text) {
        Json j = new Json(text);
        Object v = j.value();
        j.space();
        if (j.at != text.length()) {
            throw new IllegalArgumentException("trailing input at " + j.at + ": " + abbreviate(text));
        }
        return v;
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> object(String text) {
        Object v = parse(text);
        if (!(v instanceof Map)) {
            throw new IllegalArgumentException("not a JSON object: " + abbreviate(text));
        }
        return (Map<String, Object>) v;
    }

    private static String abbreviate(String s) {
        return s.length() > 200 ? s.substring(0, 200) + "..." : s;
    }

    private void space() {
        while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
            at++;
        }
    }

    private Object value() {
        space();
        if (at >= text.length()) {
            throw new IllegalArgumentException("unexpected end of JSON");
        }
        char c = text.charAt(at);
        switch (c) {
            case '{' -> {
                at++;
                Map<String, Object> m = new LinkedHashMap<>();
                space();
                if (text.charAt(at) == '}') {
                    at++;
                    return m;
                }
                while (true) {
                    space();
                    String key = string();
                    space();
                    expect(':');
                    m.put(key, value());
                    space();
                    if (text.charAt(at) == ',') {
                        at++;
                    } else {
                        expect('}');
                        return m;
                    }
                }
            }
            case '[' -> {
                at++;
                List<Object> l = new ArrayList<>();
                space();
                if (text.charAt(at) == ']') {
                    at++;
                    return l;
                }
                while (true) {
                    l.add(value());
                    space();
                    if (text.charAt(at) == ',') {
                        at++;
                    } else {
                        expect(']');
                        return l;
                    }
                }
            }
            case '"' -> {
                return string();
            }
            default -> {
                if (text.startsWith("true", at)) {
                    at += 4;
                    return Boolean.TRUE;
                }
                if (text.startsWith("false", at)) {
                    at += 5;
                    return Boolean.FALSE;
                }
                if (text.startsWith("null", at)) {
                    at += 4;
                    return null;
                }
                int start = at;
                while (at < text.length() && "+-0123456789.eE".indexOf(text.charAt(at)) >= 0) {
                    at++;
                }
                String n = text.substring(start, at);
                if (n.isEmpty()) {
                    throw new IllegalArgumentException("unexpected '" + c + "' at " + start);
                }
                return n.contains(".") || n.contains("e") || n.contains("E") ? (Object) Double.parseDouble(n) : (Object) Long.parseLong(n);
            }
        }
    }

    private void expect(char c) {
        if (at >= text.length() || text.charAt(at) != c) {
            throw new IllegalArgumentException("expected '" + c + "' at " + at);
        }
        at++;
    }

    private String string() {
        expect('"');
        StringBuilder s = new StringBuilder();
        while (true) {
            char c = text.charAt(at++);
            if (c == '"') {
                return s.toString();
            }
            if (c == '\\') {
                char e = text.charAt(at++);
                switch (e) {
                    case 'n' -> s.append('\n');
                    case 't' -> s.append('\t');
                    case 'r' -> s.append('\r');
                    case 'b' -> s.append('\b');
                    case 'f' -> s.append('\f');
                    case 'u' -> {
                        s.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
                        at += 4;
                    }
                    default -> s.append(e);
                }
            } else {
                s.append(c);
            }
        }
    }

    /** Writes a value (Map, List, String, Number, Boolean, null) as indented JSON. */
    static String write(Object value) {
        StringBuilder s = new StringBuilder();
        write(s, value, "");
        return s.append('\n').toString();
    }

    private static void write(StringBuilder s, Object v, String indent) {
        switch (v) {
            case null -> s.append("null");
            case Map<?, ?> m -> {
                if (m.isEmpty()) {
                    s.append("{}");
                    return;
                }
                s.append("{\n");
                int i = 0;
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    s.append(indent).append("  ");
                    quote(s, e.getKey().toString());
                    s.append(": ");
                    write(s, e.getValue(), indent + "  ");
                    s.append(++i < m.size() ? ",\n" : "\n");
                }
                s.append(indent).append('}');
            }
            case List<?> l -> {
                boolean flat = l.stream().noneMatch(x -> x instanceof Map || x instanceof List);
                if (flat) {
                    s.append('[');
                    for (int i = 0; i < l.size(); i++) {
                        write(s, l.get(i), indent);
                        s.append(i + 1 < l.size() ? ", " : "");
                    }
                    s.append(']');
                    return;
                }
                s.append("[\n");
                for (int i = 0; i < l.size(); i++) {
                    s.append(indent).append("  ");
                    write(s, l.get(i), indent + "  ");
                    s.append(i + 1 < l.size() ? ",\n" : "\n");
                }
                s.append(indent).append(']');
            }
            case Double d -> s.append(d.isNaN() || d.isInfinite() ? "null"
                    : new java.math.BigDecimal(d).round(new java.math.MathContext(6)).stripTrailingZeros().toPlainString());
            case Number n -> s.append(n);
            case Boolean b -> s.append(b);
            default -> quote(s, v.toString());
        }
    }

    private static void quote(StringBuilder s, String text) {
        s.append('"');
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> s.append("\\\"");
                case '\\' -> s.append("\\\\");
                case '\n' -> s.append("\\n");
                case '\r' -> s.append("\\r");
                case '\t' -> s.append("\\t");
                default -> {
                    if (c < 0x20) {
                        s.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        s.append(c);
                    }
                }
            }
        }
        s.append('"');
    }
}
