package openshell.policy;

import java.util.ArrayList;
import java.util.List;

/**
 * Request-target normalization and path patterns. A request path is matched only in its canonical
 * form, so every spelling a server would treat as the same resource matches the same rules:
 * <ul>
 * <li>the query string ({@code ?...}) is cut off and never matched;</li>
 * <li>percent-encoded unreserved characters are decoded (so {@code %2e%2e} is {@code ..} and
 *     {@code %61dmin} is {@code admin}); every other escape is kept, in upper-case hex;</li>
 * <li>duplicate slashes are folded, {@code .} and {@code ..} segments resolved and a trailing
 *     slash dropped (so a deny rule for {@code /admin} also covers {@code /admin/});</li>
 * <li>refused outright: an encoded slash or backslash ({@code %2F}, {@code %5C}), an encoded NUL
 *     or control character, a malformed escape, a raw backslash, {@code ;} path parameters,
 *     {@code #}, spaces, control or non-ASCII characters, anything but origin-form (a leading
 *     {@code /}), a path that climbs above the root, and a target longer than
 *     {@link #MAX_TARGET_LENGTH}. Servers disagree on all of these, and a disagreement is a way
 *     around a deny rule.</li>
 * </ul>
 */
final class RequestPaths {
    /** Longest request target accepted, in characters. */
    static final int MAX_TARGET_LENGTH = 8192;
    /** Longest path pattern accepted in a policy, in characters. */
    static final int MAX_PATTERN_LENGTH = 1024;

    private static final char[] HEX = "0123456789ABCDEF".toCharArray();

    private RequestPaths() {
    }

    /** Why a request target was refused. */
    static final class Refused extends Exception {
        private static final long serialVersionUID = 1L;

        Refused(String message) {
            super(message, null, false, false);
        }
    }

    /**
     * @param target the request target as sent (origin-form, query included or not)
     * @return the canonical path: "/" or "/" followed by non-empty segments joined by "/"
     * @throws Refused if the target is refused
     */
    static String normalize(String target) throws Refused {
        return render(segments(target));
    }

    /** @return "/" for no segments, else "/" + segments joined by "/" */
    static String render(String[] segments) {
        if (segments.length == 0) {
            return "/";
        }
        StringBuilder b = new StringBuilder();
        for (String s : segments) {
            b.append('/').append(s);
        }
        return b.toString();
    }

    /**
     * @param target the request target
     * @return the canonical segments (none for the root)
     * @throws Refused if the target is refused
     */
    static String[] segments(String target) throws Refused {
        if (target.isEmpty()) {
            throw new Refused("empty request target");
        }
        if (target.length() > MAX_TARGET_LENGTH) {
            throw new Refused("request target longer than " + MAX_TARGET_LENGTH + " characters");
        }
        int q = target.indexOf('?');
        String path = q >= 0 ? target.substring(0, q) : target;
        if (path.isEmpty() || path.charAt(0) != '/') {
            throw new Refused("only origin-form request targets (starting with '/') are matched");
        }
        List<String> out = new ArrayList<>(8);
        int start = 1;
        for (int i = 1; i <= path.length(); i++) {
            if (i == path.length() || path.charAt(i) == '/') {
                String segment = canonicalSegment(path, start, i, false);
                start = i + 1;
                if (segment.isEmpty() || segment.equals(".")) {
                    continue;
                }
                if (segment.equals("..")) {
                    if (out.isEmpty()) {
                        throw new Refused("the path climbs above the root");
                    }
                    out.removeLast();
                    continue;
                }
                out.add(segment);
            }
        }
        return out.toArray(String[]::new);
    }

    /**
     * Canonical form of one segment: unreserved escapes decoded, other escapes upper-cased.
     *
     * @param glob whether {@code *} is allowed (patterns); in requests it is an ordinary sub-delim
     */
    static String canonicalSegment(String s, int from, int to, boolean glob) throws Refused {
        StringBuilder b = null;
        for (int i = from; i < to; i++) {
            char c = s.charAt(i);
            if (c == '%') {
                if (i + 2 >= to) {
                    throw new Refused("malformed percent escape");
                }
                int hi = hex(s.charAt(i + 1));
                int lo = hex(s.charAt(i + 2));
                if (hi < 0 || lo < 0) {
                    throw new Refused("malformed percent escape");
                }
                int v = hi * 16 + lo;
                if (v == '/' || v == '\\') {
                    throw new Refused("an encoded slash or backslash is refused");
                }
                if (v < 0x20 || v == 0x7f) {
                    throw new Refused("an encoded NUL or control character is refused");
                }
                if (b == null) {
                    b = new StringBuilder(to - from).append(s, from, i);
                }
                if (unreserved((char) v)) {
                    b.append((char) v);
                } else {
                    b.append('%').append(HEX[hi]).append(HEX[lo]);
                }
                i += 2;
                continue;
            }
            if (!unreserved(c) && !rawAllowed(c) && !(glob && c == '*')) {
                throw new Refused(describe(c));
            }
            if (b != null) {
                b.append(c);
            }
        }
        return b == null ? s.substring(from, to) : b.toString();
    }

    private static int hex(char c) {
        if (c >= '0' && c <= '9') {
            return c - '0';
        }
        if (c >= 'a' && c <= 'f') {
            return c - 'a' + 10;
        }
        if (c >= 'A' && c <= 'F') {
            return c - 'A' + 10;
        }
        return -1;
    }

    private static String describe(char c) {
        if (c == ';') {
            return "path parameters (';') are refused";
        }
        if (c == '\\') {
            return "a backslash is refused";
        }
        if (c == '#') {
            return "a fragment ('#') is refused";
        }
        if (c > 0x7e) {
            return "a non-ASCII character is refused (percent-encode it)";
        }
        return "character 0x" + Integer.toHexString(c) + " is refused in a request path";
    }

    static boolean unreserved(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                || c == '-' || c == '.' || c == '_' || c == '~';
    }

    /** sub-delims except ';' (path parameters), plus ':' and '@' (RFC 3986 pchar). */
    private static boolean rawAllowed(char c) {
        return c == '!' || c == '$' || c == '&' || c == '\'' || c == '(' || c == ')' || c == '*'
                || c == '+' || c == ',' || c == '=' || c == ':' || c == '@';
    }

    /**
     * Parses a path pattern from a policy: canonical (as a normalized request path would be),
     * {@code *} one segment or within a segment, {@code **} any number of segments.
     *
     * @param text     the pattern
     * @param problems where to say what is wrong
     * @return the glob, or null after adding a problem
     */
    static SegmentGlob parsePattern(String text, List<String> problems) {
        if (text.isEmpty() || text.charAt(0) != '/') {
            problems.add("a path pattern must start with '/': '" + text + "'");
            return null;
        }
        if (text.length() > MAX_PATTERN_LENGTH) {
            problems.add("a path pattern is at most " + MAX_PATTERN_LENGTH + " characters");
            return null;
        }
        if (text.equals("/")) {
            return SegmentGlob.of(text);
        }
        String[] raw = text.substring(1).split("/", -1);
        String[] tokens = new String[raw.length];
        for (int i = 0; i < raw.length; i++) {
            String r = raw[i];
            if (r.isEmpty()) {
                problems.add("a path pattern has no empty segments and no trailing slash: '" + text + "'");
                return null;
            }
            if (r.indexOf("**") >= 0 && !r.equals("**")) {
                problems.add("'**' must be a whole segment: '" + text + "'");
                return null;
            }
            try {
                tokens[i] = canonicalSegment(r, 0, r.length(), true);
            } catch (Refused e) {
                problems.add(e.getMessage() + ": '" + text + "'");
                return null;
            }
            if (tokens[i].equals(".") || tokens[i].equals("..")) {
                problems.add("a path pattern has no '.' or '..' segments: '" + text + "'");
                return null;
            }
        }
        return SegmentGlob.of(text, tokens);
    }
}
