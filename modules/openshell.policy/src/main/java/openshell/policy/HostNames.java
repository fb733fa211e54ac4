package openshell.policy;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Host names and host patterns. Names compare case-insensitively (folded to lower case, one
 * trailing dot dropped), and a pattern is anchored at both ends. In a pattern {@code *} stays
 * inside one label and {@code **} (first label only) is one or more labels; the last label is
 * always literal, so no pattern matches every host.
 */
final class HostNames {
    /** Longest DNS name (RFC 1035). */
    static final int MAX_NAME_LENGTH = 253;
    /** Longest DNS label (RFC 1035). */
    static final int MAX_LABEL_LENGTH = 63;

    private static final java.util.regex.Pattern IPV4 = java.util.regex.Pattern.compile(
            "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}");
    private static final java.util.regex.Pattern IPV6_CHARS = java.util.regex.Pattern.compile("[0-9A-Fa-f:.]{2,45}");

    private HostNames() {
    }

    /**
     * @param host a host name as the workload or its DNS query gave it
     * @return its canonical form, or null if it is not a valid DNS name
     */
    static String canonical(String host) {
        if (host == null || host.isEmpty() || host.length() > MAX_NAME_LENGTH + 1) {
            return null;
        }
        String h = host.endsWith(".") ? host.substring(0, host.length() - 1) : host;
        if (h.isEmpty() || h.length() > MAX_NAME_LENGTH) {
            return null;
        }
        StringBuilder out = null;
        int labelLength = 0;
        for (int i = 0; i < h.length(); i++) {
            char c = h.charAt(i);
            if (c == '.') {
                if (labelLength == 0) {
                    return null;
                }
                labelLength = 0;
                continue;
            }
            if (++labelLength > MAX_LABEL_LENGTH || !labelChar(c)) {
                return null;
            }
            if (c >= 'A' && c <= 'Z') {
                if (out == null) {
                    out = new StringBuilder(h);
                }
                out.setCharAt(i, (char) (c + ('a' - 'A')));
            }
        }
        if (labelLength == 0) {
            return null;
        }
        return out == null ? h : out.toString();
    }

    private static boolean labelChar(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    }

    /**
     * @param text a string that may be an IP literal (IPv4 dotted quad, IPv6 with or without brackets)
     * @return the address, or null if the text is not an IP literal; never a DNS lookup
     */
    static InetAddress ipLiteral(String text) {
        if (!text.isEmpty() && text.charAt(0) >= '0' && text.charAt(0) <= '9' && IPV4.matcher(text).matches()) {
            return InetAddress.ofLiteral(text);
        }
        if (text.indexOf(':') < 0) {
            return null;
        }
        String v6 = text.startsWith("[") && text.endsWith("]") ? text.substring(1, text.length() - 1) : text;
        if (IPV6_CHARS.matcher(v6).matches()) {
            try {
                InetAddress a = InetAddress.ofLiteral(v6);
                return a instanceof Inet4Address ? null : a;
            } catch (IllegalArgumentException e) {
                return null;
            }
        }
        return null;
    }

    /** A parsed host pattern: an IP literal, an exact name, or a label glob. */
    sealed interface Pattern {
        String source();
    }

    /** @param address the declared address */
    record Ip(String source, InetAddress address) implements Pattern {
    }

    /** @param name the canonical name */
    record Exact(String source, String name) implements Pattern {
    }

    /**
     * @param glob   over labels, left to right
     * @param suffix the literal labels after the last wildcard, dot-joined (an index key)
     */
    record Wildcard(String source, SegmentGlob glob, String suffix) implements Pattern {
        boolean matches(String canonicalName) {
            return glob.matches(canonicalName.split("\\.", -1));
        }
    }

    /** Fewest labels of a wildcard host (upstream's rule: {@code *.com} would cover a whole top-level domain). */
    static final int MIN_WILDCARD_LABELS = 3;

    /**
     * Parses a host pattern as upstream OpenShell's version-1 schema defines it: {@code *} inside
     * the first label ({@code *-api.example.com}) or as a whole later label
     * ({@code *.s3.*.amazonaws.com}), {@code **} only as the whole first label (one or more
     * labels, never the apex), at least {@link #MIN_WILDCARD_LABELS} labels and a literal last
     * label, so no pattern covers every host or a whole top-level domain.
     *
     * @param text     the pattern as written
     * @param problems where to say what is wrong (and how to write it instead)
     * @return the pattern, or null after adding a problem
     */
    static Pattern parsePattern(String text, List<String> problems) {
        InetAddress ip = ipLiteral(text);
        if (ip != null) {
            return new Ip(text, ip);
        }
        if (text.indexOf('\0') >= 0) {
            problems.add("a host must not contain NUL");
            return null;
        }
        if (text.indexOf('*') < 0) {
            String name = canonical(text);
            if (name == null || text.endsWith(".")) {
                problems.add("not a valid host name (labels of letters, digits, '-' or '_', at most "
                        + MAX_LABEL_LENGTH + " each and " + MAX_NAME_LENGTH + " in all, no trailing dot): '" + text + "'");
                return null;
            }
            return new Exact(text, name);
        }
        if (text.equals("*") || text.equals("**")) {
            problems.add("a bare '" + text + "' would match every host; name the hosts, e.g. 'api.example.com' or '*.example.com'");
            return null;
        }
        if (text.length() > MAX_NAME_LENGTH) {
            problems.add("host pattern longer than " + MAX_NAME_LENGTH + " characters");
            return null;
        }
        String[] labels = text.toLowerCase(Locale.ROOT).split("\\.", -1);
        if (labels.length < MIN_WILDCARD_LABELS) {
            problems.add("a wildcard host needs at least " + MIN_WILDCARD_LABELS + " labels, so '" + text
                    + "' (a whole top-level domain) is refused; wildcard below a registrable domain, e.g. '*.example.com'");
            return null;
        }
        List<String> tokens = new ArrayList<>();
        for (int i = 0; i < labels.length; i++) {
            String l = labels[i];
            boolean last = i == labels.length - 1;
            if (l.indexOf('*') >= 0 && last) {
                problems.add("the last label of a host pattern must be literal: '" + text + "'; write e.g. '*.example.com'");
                return null;
            }
            if (l.equals("**")) {
                if (i != 0) {
                    problems.add("'**' is allowed only as the whole first label: '" + text + "'; write '**."
                            + String.join(".", java.util.Arrays.copyOfRange(labels, i + 1, labels.length)) + "'");
                    return null;
                }
                // One or more labels: "**.example.com" never matches the apex example.com.
                tokens.add("*");
                tokens.add("**");
            } else if (l.equals("*")) {
                tokens.add("*");
            } else if (l.indexOf('*') >= 0) {
                if (l.contains("**")) {
                    problems.add("'**' is allowed only as the whole first label: '" + text + "'; write '*' inside a label");
                    return null;
                }
                if (i != 0) {
                    problems.add("'*' inside a label is allowed only in the first label: '" + text
                            + "'; use a whole '*' label here (e.g. 'api.*.example.com')");
                    return null;
                }
                String stripped = l.replace("*", "");
                if (!stripped.isEmpty() && canonical(stripped) == null) {
                    problems.add("not a valid host pattern label '" + l + "' in '" + text + "'");
                    return null;
                }
                tokens.add(l);
            } else if (l.isEmpty() || l.length() > MAX_LABEL_LENGTH || canonical(l) == null) {
                problems.add("not a valid host pattern label '" + l + "' in '" + text + "'");
                return null;
            } else {
                tokens.add(l);
            }
        }
        SegmentGlob glob = SegmentGlob.of(text, tokens.toArray(String[]::new));
        return new Wildcard(text, glob, glob.literalSuffix('.'));
    }
}
