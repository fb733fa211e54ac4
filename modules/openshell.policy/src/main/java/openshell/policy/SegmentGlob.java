package openshell.policy;

import java.util.Arrays;

/**
 * A glob over a sequence of segments (path segments or host labels). A token is a literal segment,
 * a segment with {@code *} inside it (any characters within that one segment), {@code ONE} (any
 * single segment) or {@code MANY} (any number of segments, zero included). Matching is the classic
 * greedy algorithm with one backtrack point, so its cost is at most segments x tokens: no pattern
 * can make it exponential.
 */
final class SegmentGlob {
    private static final String ONE = "*";
    private static final String MANY = "**";

    /** Tokens; identity comparison with ONE and MANY marks wildcards. */
    private final String[] tokens;
    private final boolean[] inner;
    private final String source;

    private SegmentGlob(String source, String[] tokens) {
        this.source = source;
        this.tokens = tokens;
        this.inner = new boolean[tokens.length];
        for (int i = 0; i < tokens.length; i++) {
            String t = tokens[i];
            if (t.equals(MANY)) {
                tokens[i] = MANY;
            } else if (t.equals(ONE)) {
                tokens[i] = ONE;
            } else {
                inner[i] = t.indexOf('*') >= 0;
            }
        }
    }

    /**
     * @param source  the pattern as written, for messages
     * @param tokens  segments; {@code *} and {@code **} are wildcards, other {@code *} match within a segment
     * @return the glob
     */
    static SegmentGlob of(String source, String... tokens) {
        return new SegmentGlob(source, tokens.clone());
    }

    boolean hasWildcard() {
        for (int i = 0; i < tokens.length; i++) {
            if (tokens[i] == ONE || tokens[i] == MANY || inner[i]) {
                return true;
            }
        }
        return false;
    }

    String source() {
        return source;
    }

    /** @return the literal tokens after the last wildcard token, joined by {@code sep}, or "" */
    String literalSuffix(char sep) {
        int i = tokens.length;
        while (i > 0 && tokens[i - 1] != ONE && tokens[i - 1] != MANY && !inner[i - 1]) {
            i--;
        }
        return String.join(String.valueOf(sep), Arrays.copyOfRange(tokens, i, tokens.length));
    }

    boolean matches(String[] segments) {
        return matches(segments, 0, segments.length);
    }

    /** Matches {@code segments[from, to)}. */
    boolean matches(String[] segments, int from, int to) {
        int p = 0;
        int s = from;
        int starP = -1;
        int starS = -1;
        int m = tokens.length;
        while (s < to) {
            if (p < m && tokens[p] != MANY && tokenMatches(p, segments[s])) {
                p++;
                s++;
            } else if (p < m && tokens[p] == MANY) {
                starP = p++;
                starS = s;
            } else if (starP >= 0) {
                p = starP + 1;
                s = ++starS;
            } else {
                return false;
            }
        }
        while (p < m && tokens[p] == MANY) {
            p++;
        }
        return p == m;
    }

    private boolean tokenMatches(int p, String segment) {
        String t = tokens[p];
        if (t == ONE) {
            return true;
        }
        return inner[p] ? innerMatches(t, segment) : t.equals(segment);
    }

    /** {@code *} inside one segment: any characters, same greedy algorithm over characters. */
    static boolean innerMatches(String pattern, String text) {
        int p = 0;
        int s = 0;
        int starP = -1;
        int starS = -1;
        int m = pattern.length();
        int n = text.length();
        while (s < n) {
            if (p < m && pattern.charAt(p) != '*' && pattern.charAt(p) == text.charAt(s)) {
                p++;
                s++;
            } else if (p < m && pattern.charAt(p) == '*') {
                starP = p++;
                starS = s;
            } else if (starP >= 0) {
                p = starP + 1;
                s = ++starS;
            } else {
                return false;
            }
        }
        while (p < m && pattern.charAt(p) == '*') {
            p++;
        }
        return p == m;
    }

    /**
     * Whether some sequence of segments matches both globs: a walk over both token lists at once
     * (each {@code MANY} may consume the other's tokens), memoized, so at most tokens x tokens steps.
     *
     * @param other another glob over the same kind of segments
     * @return whether their languages intersect
     */
    boolean intersects(SegmentGlob other) {
        return intersects(other, 0, 0, new byte[tokens.length + 1][other.tokens.length + 1]);
    }

    /** @param memo 0 unknown, 1 yes, 2 no */
    private boolean intersects(SegmentGlob o, int i, int j, byte[][] memo) {
        if (memo[i][j] != 0) {
            return memo[i][j] == 1;
        }
        boolean r;
        int n = tokens.length;
        int m = o.tokens.length;
        if (i == n && j == m) {
            r = true;
        } else if (i < n && tokens[i] == MANY) {
            r = intersects(o, i + 1, j, memo) || (j < m && intersects(o, i, j + 1, memo));
        } else if (j < m && o.tokens[j] == MANY) {
            r = intersects(o, i, j + 1, memo) || (i < n && intersects(o, i + 1, j, memo));
        } else if (i < n && j < m) {
            r = segmentsIntersect(i, o, j) && intersects(o, i + 1, j + 1, memo);
        } else {
            r = false;
        }
        memo[i][j] = (byte) (r ? 1 : 2);
        return r;
    }

    /** Whether one segment can match both tokens (neither is MANY). */
    private boolean segmentsIntersect(int i, SegmentGlob o, int j) {
        String a = tokens[i];
        String b = o.tokens[j];
        if (a == ONE || b == ONE) {
            return true;
        }
        if (!inner[i] && !o.inner[j]) {
            return a.equals(b);
        }
        if (!inner[i]) {
            return innerMatches(b, a);
        }
        if (!o.inner[j]) {
            return innerMatches(a, b);
        }
        // Both have a '*': a common string exists iff their literal prefixes and suffixes agree.
        String pa = a.substring(0, a.indexOf('*'));
        String pb = b.substring(0, b.indexOf('*'));
        String sa = a.substring(a.lastIndexOf('*') + 1);
        String sb = b.substring(b.lastIndexOf('*') + 1);
        return (pa.startsWith(pb) || pb.startsWith(pa)) && (sa.endsWith(sb) || sb.endsWith(sa));
    }

    @Override
    public String toString() {
        return source;
    }
}
