package openshell.supervisor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Random;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The HTTP/1.1 parser alone: framing, refusals of ambiguous input, every bound, and a fuzz run. */
@Timeout(120)
class HttpParserTest {
    static HttpInput input(String s) {
        return new HttpInput(new ByteArrayInputStream(s.getBytes(StandardCharsets.ISO_8859_1)), 1024);
    }

    static HttpHead request(String s) throws IOException {
        return HttpParser.readRequest(input(s));
    }

    static int refusal(String s) {
        return assertThrows(HttpParseException.class, () -> request(s)).status();
    }

    @Test
    void framingIsDecidedOnce() throws IOException {
        assertEquals(HttpHead.Framing.NONE, request("GET / HTTP/1.1\r\nHost: a\r\n\r\n").framing());
        HttpHead cl = request("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n");
        assertEquals(HttpHead.Framing.LENGTH, cl.framing());
        assertEquals(12, cl.length());
        assertEquals(HttpHead.Framing.CHUNKED, request("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n").framing());
        assertTrue(request("GET / HTTP/1.1\r\nHost: a\r\n\r\n").keepAlive());
        assertTrue(!request("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").keepAlive());
        assertTrue(!request("GET / HTTP/1.0\r\nHost: a\r\n\r\n").keepAlive());
        assertTrue(request("GET / HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n").keepAlive());
        assertNull(request(""), "a clean close between requests");
    }

    @ParameterizedTest
    @ValueSource(strings = {
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1,1\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n",
            "GET / HTTP/1.1\r\nHost : a\r\n\r\n",
            "GET / HTTP/1.1\nHost: a\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\rX\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            "GET / HTTP/1.1\r\n\r\n",
            "GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET http://evil/ HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nX: a\u0000b\r\n\r\n",
            "GET /\u00e9 HTTP/1.1\r\nHost: a\r\n\r\n",
            "G(T / HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\n: empty-name\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nTransfer_Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a\r\nContent_Length: 5\r\n\r\n",
    })
    void ambiguousOrMalformedRequestsAreRefused(String text) {
        assertEquals(400, refusal(text));
    }

    @Test
    void featuresThatEscapeInspectionAreRefused() {
        assertEquals(403, refusal("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"));
        assertEquals(405, refusal("CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n"));
        assertEquals(501, refusal("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"));
        assertEquals(501, refusal("POST / HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"));
        assertEquals(505, refusal("GET / HTTP/2.0\r\nHost: a\r\n\r\n"));
        assertEquals(417, refusal("GET / HTTP/1.1\r\nHost: a\r\nExpect: magic\r\n\r\n"));
    }

    @Test
    void requestLineAtItsBound() throws IOException {
        String prefix = "GET /";
        String suffix = " HTTP/1.1";
        int pathLength = HttpParser.MAX_REQUEST_LINE_BYTES - prefix.length() - suffix.length();
        // At the bound, the line is read; the target is then over the engine's own bound and refused as 400.
        String atBound = prefix + "a".repeat(pathLength) + suffix;
        assertEquals(HttpParser.MAX_REQUEST_LINE_BYTES, atBound.length());
        assertEquals(400, refusal(atBound + "\r\nHost: a\r\n\r\n"));
        assertEquals(414, refusal(prefix + "a".repeat(pathLength + 1) + suffix + "\r\nHost: a\r\n\r\n"));
        String longestTarget = "/" + "a".repeat(openshell.policy.Policy.MAX_REQUEST_TARGET_LENGTH - 1);
        assertEquals(longestTarget, request("GET " + longestTarget + " HTTP/1.1\r\nHost: a\r\n\r\n").target());
    }

    @Test
    void headerCountAtItsBound() throws IOException {
        StringBuilder s = new StringBuilder("GET / HTTP/1.1\r\nHost: a\r\n");
        for (int i = 1; i < HttpParser.MAX_HEADERS; i++) {
            s.append("X-").append(i).append(": v\r\n");
        }
        assertEquals(HttpParser.MAX_HEADERS, request(s + "\r\n").headers().size());
        assertEquals(431, refusal(s + "X-One-More: v\r\n\r\n"));
    }

    @Test
    void headerLineAndHeadSizeAtTheirBounds() throws IOException {
        String name = "X-Big: ";
        String atBound = name + "v".repeat(HttpParser.MAX_HEADER_LINE_BYTES - name.length());
        assertEquals(2, request("GET / HTTP/1.1\r\nHost: a\r\n" + atBound + "\r\n\r\n").headers().size());
        assertEquals(431, refusal("GET / HTTP/1.1\r\nHost: a\r\n" + atBound + "v\r\n\r\n"));
        // Header lines totalling exactly MAX_HEAD_BYTES (CRLFs counted) pass; one more byte is refused.
        StringBuilder s = new StringBuilder("GET / HTTP/1.1\r\n");
        int used = 0;
        String host = "Host: a";
        s.append(host).append("\r\n");
        used += host.length() + 2;
        int i = 0;
        while (HttpParser.MAX_HEAD_BYTES - used > 8192) {
            String line = "X-" + (i++) + ": " + "v".repeat(8000);
            s.append(line).append("\r\n");
            used += line.length() + 2;
        }
        int left = HttpParser.MAX_HEAD_BYTES - used - 2;
        String last = "X-Last: " + "v".repeat(left - "X-Last: ".length());
        assertEquals(HttpParser.MAX_HEAD_BYTES, used + last.length() + 2);
        request(s + last + "\r\n\r\n");
        assertEquals(431, refusal(s + last + "v\r\n\r\n"));
    }

    @Test
    void chunkSizesAtTheirBound() throws IOException {
        assertEquals(0xfffffffffffffffL, HttpParser.chunkSize("f".repeat(HttpParser.MAX_CHUNK_SIZE_DIGITS)));
        assertThrows(HttpParseException.class, () -> HttpParser.chunkSize("1".repeat(HttpParser.MAX_CHUNK_SIZE_DIGITS + 1)));
        for (String bad : new String[] {"", " 5", "5 ", "-5", "0x5", "5\u0000", "g"}) {
            assertThrows(HttpParseException.class, () -> HttpParser.chunkSize(bad), bad);
        }
        assertEquals(5, HttpParser.chunkSize("5;name=value"));
    }

    @Test
    void chunkLineAtItsBound() throws IOException {
        HttpHead head = request("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
        String ext = "1;" + "e".repeat(HttpParser.MAX_CHUNK_LINE_BYTES - 2);
        assertEquals("x", body(head, ext + "\r\nx\r\n0\r\n\r\n"));
        assertThrows(HttpParseException.class, () -> body(head, ext + "e\r\nx\r\n0\r\n\r\n"));
    }

    @Test
    void contentLengthDigitsAtTheirBound() throws IOException {
        String max = "9".repeat(HttpParser.MAX_CONTENT_LENGTH_DIGITS);
        assertEquals(Long.parseLong(max), request("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: " + max + "\r\n\r\n").length());
        assertEquals(400, refusal("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: " + max + "9\r\n\r\n"));
    }

    static String body(HttpHead head, String bytes) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        HttpParser.copyBody(input(bytes), out, head, new byte[64], n -> { });
        String framed = out.toString(StandardCharsets.ISO_8859_1);
        if (head.framing() != HttpHead.Framing.CHUNKED) {
            return framed;
        }
        HttpInput reread = input(framed);
        ByteArrayOutputStream data = new ByteArrayOutputStream();
        while (true) {
            long size = HttpParser.chunkSize(reread.readLine(100, false, 400));
            if (size == 0) {
                return data.toString(StandardCharsets.ISO_8859_1);
            }
            byte[] b = new byte[(int) size];
            int got = 0;
            while (got < size) {
                got += reread.read(b, got, (int) size - got);
            }
            data.writeBytes(b);
            reread.readLine(0, false, 400);
        }
    }

    @Test
    void chunkedBodiesAreReframedCanonically() throws IOException {
        HttpHead head = request("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        HttpParser.copyBody(input("3;x=y\r\nabc\r\n0\r\nTrailer: v\r\n\r\nNEXT"), out, head, new byte[64], n -> { });
        assertEquals("3\r\nabc\r\n0\r\n\r\n", out.toString(StandardCharsets.ISO_8859_1), "extensions and trailers dropped");
        assertThrows(HttpParseException.class, () -> body(head, "3\r\nabcX\r\n0\r\n\r\n"), "data longer than its size");
        assertThrows(EOFException.class, () -> body(head, "3\r\nab"));
    }

    @Test
    void responsesFrameByStatusAndMethod() throws IOException {
        assertEquals(HttpHead.Framing.NONE, HttpParser.readResponse(input("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"), "HEAD").framing());
        assertEquals(HttpHead.Framing.NONE, HttpParser.readResponse(input("HTTP/1.1 204 No Content\r\n\r\n"), "GET").framing());
        assertEquals(HttpHead.Framing.UNTIL_CLOSE, HttpParser.readResponse(input("HTTP/1.1 200 OK\r\n\r\n"), "GET").framing());
        assertEquals(HttpHead.Framing.CHUNKED,
                HttpParser.readResponse(input("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), "GET").framing());
        assertThrows(HttpParseException.class, () -> HttpParser.readResponse(input("HTTP/1.1 20 OK\r\n\r\n"), "GET"));
        assertThrows(HttpParseException.class, () -> HttpParser.readResponse(input("HTTP/1.1 +20 OK\r\n\r\n"), "GET"));
    }

    /**
     * Fuzz: random mutations of valid requests and random bytes. Every input ends in a request,
     * a clean EOF, or a parse error (HttpParseException or EOF); never another exception, never a
     * hang (the class timeout fails a hang).
     */
    @Test
    void malformedInputNeverCrashesOrHangs() {
        String[] seeds = {
                "GET /a/b?c=d HTTP/1.1\r\nHost: api.test\r\nAccept: */*\r\n\r\n",
                "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
                "POST /upload HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        };
        byte[] interesting = "\r\n :;\t\u0000\u00ff0fF-+,".getBytes(StandardCharsets.ISO_8859_1);
        Random random = new Random(20261129);
        int parsed = 0;
        int refused = 0;
        for (int round = 0; round < 30_000; round++) {
            byte[] input;
            if (round % 10 == 0) {
                input = new byte[random.nextInt(200)];
                random.nextBytes(input);
            } else {
                input = seeds[random.nextInt(seeds.length)].getBytes(StandardCharsets.ISO_8859_1);
                int mutations = 1 + random.nextInt(4);
                for (int m = 0; m < mutations && input.length > 0; m++) {
                    int at = random.nextInt(input.length);
                    switch (random.nextInt(3)) {
                        case 0 -> input[at] = interesting[random.nextInt(interesting.length)];
                        case 1 -> input[at] = (byte) random.nextInt(256);
                        default -> {
                            byte[] shorter = new byte[input.length - 1];
                            System.arraycopy(input, 0, shorter, 0, at);
                            System.arraycopy(input, at + 1, shorter, at, shorter.length - at);
                            input = shorter;
                        }
                    }
                }
            }
            HttpInput in = new HttpInput(new ByteArrayInputStream(input), 64);
            try {
                HttpHead head;
                while ((head = HttpParser.readRequest(in)) != null) {
                    HttpParser.copyBody(in, OutputStreamSink.INSTANCE, head, new byte[64], n -> { });
                    parsed++;
                }
            } catch (HttpParseException | EOFException e) {
                refused++;
            } catch (IOException | RuntimeException e) {
                throw new AssertionError("input " + java.util.HexFormat.of().formatHex(input) + " crashed the parser", e);
            }
        }
        assertTrue(parsed > 100 && refused > 100, "the fuzz exercised both paths: parsed " + parsed + ", refused " + refused);
    }

    /** Discards bytes. */
    static final class OutputStreamSink extends java.io.OutputStream {
        static final OutputStreamSink INSTANCE = new OutputStreamSink();

        @Override
        public void write(int b) {
        }

        @Override
        public void write(byte[] b, int off, int len) {
        }
    }
}
