package openshell.supervisor;

import java.util.List;

/**
 * A parsed HTTP/1.1 message head, request or response, with its body framing decided once and
 * unambiguously (the parser refused everything that could be read two ways).
 *
 * @param startLine the request line or status line, as received
 * @param method    the request method (for a response: the method of its request)
 * @param target    the request target (empty for a response)
 * @param status    the response status (0 for a request)
 * @param headers   the header fields, in order
 * @param framing   how the body is delimited
 * @param length    the body length when {@code framing} is LENGTH
 * @param keepAlive whether the connection stays open after this message
 * @param expectContinue whether the request asked for {@code 100 Continue}
 * @param host      the request's Host header (empty for a response)
 */
record HttpHead(String startLine, String method, String target, int status, List<Header> headers, Framing framing,
                long length, boolean keepAlive, boolean expectContinue, String host) {
    /** How a body is delimited. */
    enum Framing {
        NONE,
        LENGTH,
        CHUNKED,
        UNTIL_CLOSE
    }

    /** One header field; the value is ISO-8859-1 text with surrounding whitespace removed. */
    record Header(String name, String value) {
        @Override
        public String toString() {
            // Values may be credentials: never rendered.
            return name + ": (hidden)";
        }
    }

    HttpHead {
        headers = List.copyOf(headers);
    }

    boolean hasBody() {
        return framing == Framing.CHUNKED || framing == Framing.UNTIL_CLOSE || (framing == Framing.LENGTH && length > 0);
    }

    @Override
    public String toString() {
        return "HttpHead[" + (status == 0 ? method + " (target hidden)" : String.valueOf(status)) + ", " + framing + "]";
    }
}
