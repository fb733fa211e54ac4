package openshell.policy;

/** HTTP request methods as the engine compares them: upper case, and HEAD decided as GET. */
final class HttpMethods {
    /** Longest method accepted. */
    static final int MAX_LENGTH = 32;

    private HttpMethods() {
    }

    /**
     * @param method a request method as sent
     * @return its canonical form ("HEAD" becomes "GET"), or null if it is not an RFC 9110 token
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
        String m = lower ? method.toUpperCase(java.util.Locale.ROOT) : method;
        return m.equals("HEAD") ? "GET" : m;
    }

    private static boolean tchar(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
    }
}
