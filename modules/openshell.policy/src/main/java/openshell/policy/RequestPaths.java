package openshell.policy;

import java.util.ArrayList;
import java.util.List;

/**
 * Request-target normalization and path patterns. A request path is matched only in its canonical
 * form, so every spelling a server would treat as the same resource matches the same rules:
 * <ul>
 * <li>the query string ({@code ?...}) is cut off before the path is matched; only a rule's
 *     {@code query} condition looks at it ({@link QueryString});</li>
 * <li>percent-encoded unreserved characters are decoded (so {@code %2e%2e} is {@code ..} and
 *     {@code %61dmin} is {@code admin}); every other escape is kept, in upper-case hex;</li>
 * <li>duplicate slashes are folded and {@code .} and {@code ..} segments resolved; a trailing
 *     slash is kept, as upstream keeps it ({@code /admin/**} covers {@code /admin/}, {@code /admin}
 *     does not);</li>
 * <li>path parameters ({@code ;...} to the end of a segment) are stripped, so {@code ..;} is a
 *     dot segment and {@code /a;jsessionid=1/b} is {@code /a/b};</li>
 * <li>refused outright: an encoded slash or backslash ({@code %2F}, {@code %5C}), an encoded NUL
 *     or control character, a malformed escape, a raw backslash,
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
                // Path parameters are stripped, as upstream does, so "..;" is ".." and "/a;x" is "/a".
                int end = i;
                int semi = path.indexOf(';', start);
                if (semi >= 0 && semi < end) {
                    end = semi;
                }
                String segment = canonicalSegment(path, start, end, false);
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
        if (!out.isEmpty() && trailingSlash(path)) {
            // Kept as an empty last segment, as upstream matches it: "/x/**" covers "/x/" but not "/x".
            out.add("");
        }
        return out.toArray(String[]::new);
    }

    /** Whether the path names a directory: a trailing "/", or a last segment "." or ".." (RFC 3986 5.2.4). */
    private static boolean trailingSlash(String path) {
        int end = path.length();
        if (path.charAt(end - 1) == '/') {
            return true;
        }
        int slash = path.lastIndexOf('/');
        String last = path.substring(slash + 1);
        int semi = last.indexOf(';');
        String bare = semi >= 0 ? last.substring(0, semi) : last;
        return bare.equals(".") || bare.equals("..") || bare.equalsIgnoreCase("%2e") || bare.equalsIgnoreCase("%2e%2e")
                || bare.equalsIgnoreCase(".%2e") || bare.equalsIgnoreCase("%2e.");
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
     * Parses a path pattern from a policy, with upstream's semantics: {@code **} alone (or
     * {@code /**}) matches every path; {@code *} is one segment or part of one; a trailing
     * {@code /**} needs at least one segment after the prefix (so {@code /x/**} never matches
     * {@code /x}); a {@code /**}{@code /} in the middle is zero or more segments; {@code **} next to
     * other characters in a segment is {@code *}. Patterns are canonical, as a normalized request
     * path is.
     *
     * @param text     the pattern
     * @param problems where to say what is wrong
     * @return the glob, or null after adding a problem
     */
    static SegmentGlob parsePattern(String text, List<String> problems) {
        if (text.equals("**") || text.equals("/**")) {
            return SegmentGlob.of(text, "**");
        }
        if (text.isEmpty() || text.charAt(0) != '/') {
            problems.add("a path pattern must start with '/' (or be '**' for every path): '" + text + "'");
            return null;
        }
        if (text.length() > MAX_PATTERN_LENGTH) {
            problems.add("a path pattern is at most " + MAX_PATTERN_LENGTH + " characters");
            return null;
        }
        if (text.equals("/")) {
            return SegmentGlob.of(text);
        }
        if (text.indexOf('?') >= 0) {
            problems.add("a path pattern has no query; write the query condition as query: {name: glob}: '" + text + "'");
            return null;
        }
        String[] raw = text.substring(1).split("/", -1);
        List<String> tokens = new ArrayList<>(raw.length + 1);
        for (int i = 0; i < raw.length; i++) {
            String r = raw[i];
            if (r.isEmpty() && i == raw.length - 1) {
                // A trailing slash matches only a request with one: "/api/" is not "/api".
                tokens.add("");
                continue;
            }
            if (r.isEmpty()) {
                problems.add("a path pattern has no empty segments ('//'): '" + text + "'");
                return null;
            }
            if (r.equals("**")) {
                if (i == raw.length - 1) {
                    tokens.add("*");
                }
                tokens.add("**");
                continue;
            }
            String segment = r;
            while (segment.contains("**")) {
                segment = segment.replace("**", "*");
            }
            String token;
            try {
                token = canonicalSegment(segment, 0, segment.length(), true);
            } catch (Refused e) {
                problems.add(e.getMessage() + ": '" + text + "'");
                return null;
            }
            if (token.equals(".") || token.equals("..")) {
                problems.add("a path pattern has no '.' or '..' segments: '" + text + "'");
                return null;
            }
            tokens.add(token);
        }
        return SegmentGlob.of(text, tokens.toArray(String[]::new));
    }
}
