package openshell.supervisor;

import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.LongConsumer;

import openshell.policy.Policy;

/**
 * The L7 relay's HTTP/1.1 parser. Strict on purpose: whatever two parsers could read two ways
 * (duplicate or invalid Content-Length, Content-Length with Transfer-Encoding, a coding other than
 * chunked, obs-fold, whitespace before a colon, bare LF, bad chunk sizes) is refused, because
 * request smuggling lives in exactly those differences. Every line, header count and head size is
 * bounded; bodies are streamed, never buffered whole.
 */
final class HttpParser {
    /** Longest request line: the longest method and target the policy engine accepts, two spaces and the version. */
    static final int MAX_REQUEST_LINE_BYTES = Policy.MAX_METHOD_LENGTH + Policy.MAX_REQUEST_TARGET_LENGTH + 10;
    /** Longest status line of a response. */
    static final int MAX_STATUS_LINE_BYTES = 1024;
    /** Longest single header line. */
    static final int MAX_HEADER_LINE_BYTES = 8192;
    /** Most header fields in one head (and trailer fields in one chunked body). */
    static final int MAX_HEADERS = 100;
    /** Most bytes of header lines in one head. */
    static final int MAX_HEAD_BYTES = 64 * 1024;
    /** Longest chunk-size line (size and extensions). */
    static final int MAX_CHUNK_LINE_BYTES = 1024;
    /** Most hex digits in a chunk size (15 keeps it below 2^60, so it cannot overflow). */
    static final int MAX_CHUNK_SIZE_DIGITS = 15;
    /** Most digits in a Content-Length. */
    static final int MAX_CONTENT_LENGTH_DIGITS = 18;
    /** Most interim (1xx) responses before the final one. */
    static final int MAX_INTERIM_RESPONSES = 8;

    /** Headers that decide framing or routing; a look-alike spelled with '_' is refused. */
    private static final java.util.Set<String> FRAMING_NAMES = java.util.Set.of("content-length", "transfer-encoding", "host");

    private HttpParser() {
    }

    /**
     * @return the next request, or null if the workload closed cleanly between requests
     * @throws HttpParseException if the request is refused (its status says how to answer)
     */
    static HttpHead readRequest(HttpInput in) throws IOException {
        String line = in.readLine(MAX_REQUEST_LINE_BYTES, true, 414);
        if (line == null) {
            return null;
        }
        int sp1 = line.indexOf(' ');
        int sp2 = sp1 < 0 ? -1 : line.indexOf(' ', sp1 + 1);
        if (sp1 <= 0 || sp2 < 0 || line.indexOf(' ', sp2 + 1) >= 0) {
            throw new HttpParseException(400, "the request line is not 'METHOD target HTTP/1.1'");
        }
        String method = line.substring(0, sp1);
        String target = line.substring(sp1 + 1, sp2);
        String version = line.substring(sp2 + 1);
        if (method.length() > Policy.MAX_METHOD_LENGTH || !isToken(method)) {
            throw new HttpParseException(400, "the request method is not an HTTP token");
        }
        if (method.equals("CONNECT")) {
            throw new HttpParseException(405, "CONNECT is not relayed on an inspected connection");
        }
        if (target.isEmpty() || target.charAt(0) != '/' || target.length() > Policy.MAX_REQUEST_TARGET_LENGTH) {
            throw new HttpParseException(400, "the request target must be in origin-form (start with '/')");
        }
        for (int i = 0; i < target.length(); i++) {
            char c = target.charAt(i);
            if (c <= 0x20 || c >= 0x7f) {
                throw new HttpParseException(400, "the request target has a byte outside visible ASCII");
            }
        }
        boolean http11 = version.equals("HTTP/1.1");
        if (!http11 && !version.equals("HTTP/1.0")) {
            throw new HttpParseException(505, "only HTTP/1.1 and HTTP/1.0 are relayed");
        }
        List<HttpHead.Header> headers = readHeaders(in);
        String host = null;
        String contentLength = null;
        String transferEncoding = null;
        boolean close = !http11;
        boolean expectContinue = false;
        for (HttpHead.Header h : headers) {
            switch (h.name().toLowerCase(Locale.ROOT)) {
                case "host" -> {
                    if (host != null) {
                        throw new HttpParseException(400, "more than one Host header");
                    }
                    host = h.value();
                }
                case "content-length" -> {
                    if (contentLength != null) {
                        throw new HttpParseException(400, "more than one Content-Length header");
                    }
                    contentLength = h.value();
                }
                case "transfer-encoding" -> {
                    if (transferEncoding != null) {
                        throw new HttpParseException(400, "more than one Transfer-Encoding header");
                    }
                    transferEncoding = h.value();
                }
                case "connection" -> {
                    for (String token : h.value().toLowerCase(Locale.ROOT).split(",")) {
                        switch (token.strip()) {
                            case "close" -> close = true;
                            case "keep-alive" -> close = close && http11;
                            case "upgrade" -> throw new HttpParseException(403, "protocol upgrades escape inspection and are refused");
                            default -> {
                                // Other connection options are hop-by-hop hints with no framing effect.
                            }
                        }
                    }
                    if (!http11 && h.value().toLowerCase(Locale.ROOT).contains("keep-alive")) {
                        close = false;
                    }
                }
                case "upgrade" -> throw new HttpParseException(403, "protocol upgrades escape inspection and are refused");
                case "expect" -> {
                    if (!h.value().equalsIgnoreCase("100-continue")) {
                        throw new HttpParseException(417, "only 'Expect: 100-continue' is understood");
                    }
                    expectContinue = true;
                }
                default -> {
                    // Every other field is relayed as is.
                }
            }
        }
        if (host == null) {
            throw new HttpParseException(400, "a request needs exactly one Host header");
        }
        HttpHead.Framing framing = HttpHead.Framing.NONE;
        long length = 0;
        if (transferEncoding != null) {
            if (contentLength != null) {
                throw new HttpParseException(400, "Content-Length and Transfer-Encoding together are ambiguous");
            }
            if (!http11 || !transferEncoding.equalsIgnoreCase("chunked")) {
                throw new HttpParseException(501, "the only transfer coding relayed is 'chunked' on HTTP/1.1");
            }
            framing = HttpHead.Framing.CHUNKED;
        } else if (contentLength != null) {
            length = contentLength(contentLength);
            framing = HttpHead.Framing.LENGTH;
        }
        return new HttpHead(line, method, target, 0, headers, framing, length, !close, expectContinue, host);
    }

    /**
     * @param requestMethod the method of the request this answers (HEAD responses have no body)
     * @return the response head; interim responses are left to the caller (status 1xx)
     */
    static HttpHead readResponse(HttpInput in, String requestMethod) throws IOException {
        String line = in.readLine(MAX_STATUS_LINE_BYTES, false, 502);
        if (line.length() < 12 || !(line.startsWith("HTTP/1.1 ") || line.startsWith("HTTP/1.0 "))
                || (line.length() > 12 && line.charAt(12) != ' ')) {
            throw new HttpParseException(502, "the upstream status line is malformed");
        }
        int status;
        try {
            status = Integer.parseInt(line.substring(9, 12));
        } catch (NumberFormatException e) {
            throw new HttpParseException(502, "the upstream status code is not a number");
        }
        if (status < 100 || status > 599 || line.charAt(9) < '1' || line.charAt(9) > '5') {
            throw new HttpParseException(502, "the upstream status code is out of range");
        }
        boolean http11 = line.startsWith("HTTP/1.1");
        List<HttpHead.Header> headers = readHeaders(in);
        String contentLength = null;
        String transferEncoding = null;
        boolean close = !http11;
        for (HttpHead.Header h : headers) {
            switch (h.name().toLowerCase(Locale.ROOT)) {
                case "content-length" -> {
                    if (contentLength != null && !contentLength.equals(h.value())) {
                        throw new HttpParseException(502, "the upstream sent conflicting Content-Length headers");
                    }
                    contentLength = h.value();
                }
                case "transfer-encoding" -> transferEncoding = transferEncoding == null ? h.value()
                        : transferEncoding + "," + h.value();
                case "connection" -> {
                    String v = h.value().toLowerCase(Locale.ROOT);
                    if (v.contains("close")) {
                        close = true;
                    } else if (v.contains("keep-alive")) {
                        close = close && http11;
                    }
                }
                default -> {
                    // Relayed as is.
                }
            }
        }
        HttpHead.Framing framing;
        long length = 0;
        if (requestMethod.equalsIgnoreCase("HEAD") || status < 200 || status == 204 || status == 304) {
            framing = HttpHead.Framing.NONE;
        } else if (transferEncoding != null) {
            String[] codings = transferEncoding.toLowerCase(Locale.ROOT).split(",");
            framing = codings[codings.length - 1].strip().equals("chunked") ? HttpHead.Framing.CHUNKED
                    : HttpHead.Framing.UNTIL_CLOSE;
        } else if (contentLength != null) {
            length = contentLength(contentLength);
            framing = HttpHead.Framing.LENGTH;
        } else {
            framing = HttpHead.Framing.UNTIL_CLOSE;
        }
        if (framing == HttpHead.Framing.UNTIL_CLOSE) {
            close = true;
        }
        return new HttpHead(line, requestMethod, "", status, headers, framing, length, !close, false, "");
    }

    private static long contentLength(String v) throws HttpParseException {
        if (v.isEmpty() || v.length() > MAX_CONTENT_LENGTH_DIGITS) {
            throw new HttpParseException(400, "Content-Length must be 1.." + MAX_CONTENT_LENGTH_DIGITS + " digits");
        }
        for (int i = 0; i < v.length(); i++) {
            if (v.charAt(i) < '0' || v.charAt(i) > '9') {
                throw new HttpParseException(400, "Content-Length must be decimal digits only");
            }
        }
        return Long.parseLong(v);
    }

    private static List<HttpHead.Header> readHeaders(HttpInput in) throws IOException {
        List<HttpHead.Header> headers = new ArrayList<>(16);
        int total = 0;
        while (true) {
            String line = in.readLine(MAX_HEADER_LINE_BYTES, false, 431);
            if (line.isEmpty()) {
                return headers;
            }
            total += line.length() + 2;
            if (total > MAX_HEAD_BYTES) {
                throw new HttpParseException(431, "the header section is larger than " + MAX_HEAD_BYTES + " bytes");
            }
            if (headers.size() == MAX_HEADERS) {
                throw new HttpParseException(431, "more than " + MAX_HEADERS + " header fields");
            }
            char first = line.charAt(0);
            if (first == ' ' || first == '\t') {
                throw new HttpParseException(400, "obsolete line folding (obs-fold) is refused");
            }
            int colon = line.indexOf(':');
            if (colon <= 0) {
                throw new HttpParseException(400, "a header line without a field name and colon");
            }
            String name = line.substring(0, colon);
            if (!isToken(name)) {
                throw new HttpParseException(400, "a header field name is not a token (whitespace before the colon?)");
            }
            if (name.indexOf('_') >= 0 && FRAMING_NAMES.contains(name.replace('_', '-').toLowerCase(Locale.ROOT))) {
                // Some servers read '_' as '-': such a name could frame the body behind our back.
                throw new HttpParseException(400, "a header name that some servers read as a framing header");
            }
            String value = line.substring(colon + 1).strip();
            for (int i = 0; i < value.length(); i++) {
                char c = value.charAt(i);
                if ((c < 0x20 && c != '\t') || c == 0x7f) {
                    throw new HttpParseException(400, "a header value contains a control character");
                }
            }
            headers.add(new HttpHead.Header(name, value));
        }
    }

    private static boolean isToken(String s) {
        if (s.isEmpty()) {
            return false;
        }
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            boolean ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                    || "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
            if (!ok) {
                return false;
            }
        }
        return true;
    }

    /** Writes a head: the start line and the given headers, in order. */
    static void writeHead(OutputStream out, String startLine, List<HttpHead.Header> headers) throws IOException {
        StringBuilder s = new StringBuilder(256);
        s.append(startLine).append("\r\n");
        for (HttpHead.Header h : headers) {
            s.append(h.name()).append(": ").append(h.value()).append("\r\n");
        }
        s.append("\r\n");
        out.write(HttpInput.ascii(s.toString()));
    }

    /**
     * Copies one body as framed, re-framing chunked bodies canonically (extensions and trailers
     * dropped) so that what upstream reads is exactly what was checked.
     *
     * @param counter told how many body bytes went through
     * @throws HttpParseException if the chunked framing is malformed
     */
    static void copyBody(HttpInput in, OutputStream out, HttpHead head, byte[] buf, LongConsumer counter) throws IOException {
        switch (head.framing()) {
            case NONE -> {
            }
            case LENGTH -> copyExactly(in, out, head.length(), buf, counter);
            case UNTIL_CLOSE -> {
                int n;
                while ((n = in.read(buf, 0, buf.length)) > 0) {
                    out.write(buf, 0, n);
                    out.flush();
                    counter.accept(n);
                }
            }
            case CHUNKED -> {
                while (true) {
                    long size = chunkSize(in.readLine(MAX_CHUNK_LINE_BYTES, false, 400));
                    if (size == 0) {
                        readTrailers(in);
                        out.write(HttpInput.ascii("0\r\n\r\n"));
                        out.flush();
                        return;
                    }
                    out.write(HttpInput.ascii(Long.toHexString(size) + "\r\n"));
                    copyExactly(in, out, size, buf, counter);
                    if (!in.readLine(0, false, 400).isEmpty()) {
                        throw new HttpParseException(400, "chunk data is not followed by CRLF");
                    }
                    out.write(HttpInput.ascii("\r\n"));
                }
            }
        }
        out.flush();
    }

    private static void copyExactly(HttpInput in, OutputStream out, long length, byte[] buf, LongConsumer counter)
            throws IOException {
        long left = length;
        while (left > 0) {
            int n = in.read(buf, 0, (int) Math.min(buf.length, left));
            if (n < 0) {
                throw new EOFException("the stream ended inside a body");
            }
            out.write(buf, 0, n);
            counter.accept(n);
            left -= n;
        }
    }

    static long chunkSize(String line) throws HttpParseException {
        int i = 0;
        long size = 0;
        while (i < line.length() && hex(line.charAt(i)) >= 0) {
            if (i == MAX_CHUNK_SIZE_DIGITS) {
                throw new HttpParseException(400, "a chunk size has more than " + MAX_CHUNK_SIZE_DIGITS + " hex digits");
            }
            size = size * 16 + hex(line.charAt(i));
            i++;
        }
        if (i == 0 || (i < line.length() && line.charAt(i) != ';')) {
            throw new HttpParseException(400, "a chunk size is not hexadecimal digits (then ';' extensions)");
        }
        for (int j = i; j < line.length(); j++) {
            char c = line.charAt(j);
            if ((c < 0x20 && c != '\t') || c == 0x7f) {
                throw new HttpParseException(400, "a chunk extension contains a control character");
            }
        }
        return size;
    }

    /** The value of an ASCII hex digit, or -1 (Character.digit would also take other scripts' digits). */
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

    private static void readTrailers(HttpInput in) throws IOException {
        int total = 0;
        for (int count = 0; ; count++) {
            String line = in.readLine(MAX_HEADER_LINE_BYTES, false, 431);
            if (line.isEmpty()) {
                return;
            }
            total += line.length() + 2;
            if (count == MAX_HEADERS || total > MAX_HEAD_BYTES) {
                throw new HttpParseException(431, "the chunked trailer section is too large");
            }
            char first = line.charAt(0);
            if (first == ' ' || first == '\t' || line.indexOf(':') <= 0) {
                throw new HttpParseException(400, "a malformed trailer field");
            }
        }
    }
}
