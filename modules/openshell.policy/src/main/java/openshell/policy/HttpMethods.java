package openshell.policy;

/** HTTP request methods as the engine compares them: case-insensitively, upper case; a GET rule also covers HEAD. */
final class HttpMethods {
    /** Longest method accepted. */
    static final int MAX_LENGTH = 32;

    private HttpMethods() {
    }

    /**
     * @param method a request method as sent
     * @return its canonical (upper-case) form, or null if it is not an RFC 9110 token
     *         of at most {@link #MAX_LENGTH} characters
     */
    static String canonical(String method) {
        int n = method.length();
        if (n == 0 || n > MAX_LENGTH) {
            return null;
        }
        boolean lower = false;
        for (int i = 0; i < n; i++) {
            char c = method.charAt(i);
            if (c >= 'a' && c <= 'z') {
                lower = true;
            } else if (!tchar(c)) {
                return null;
            }
        }
        return lower ? method.toUpperCase(java.util.Locale.ROOT) : method;
    }

    /**
     * @param ruleMethods a rule's upper-case methods, or null for any
     * @param method      the request's canonical method
     * @return whether the rule covers it: the method itself, or HEAD under GET (RFC 9110 section 9.3.2);
     *         no other method implies another
     */
    static boolean covers(java.util.Set<String> ruleMethods, String method) {
        return ruleMethods == null || ruleMethods.contains(method)
                || (method.equals("HEAD") && ruleMethods.contains("GET"));
    }

    private static boolean tchar(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
    }
}
