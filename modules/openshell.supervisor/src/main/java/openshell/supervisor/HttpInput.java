package openshell.supervisor;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;

/**
 * A buffered reader of HTTP/1.1 bytes with bounded CRLF-terminated lines; a bare LF or CR is
 * refused (lenient line endings are a request-smuggling vector). Bodies are read through the same
 * buffer so no byte is lost between head and body.
 */
final class HttpInput {
    private final InputStream in;
    private final byte[] buf;
    private int pos;
    private int end;

    HttpInput(InputStream in, int bufferBytes) {
        this.in = in;
        this.buf = new byte[bufferBytes];
    }

    private boolean fill() throws IOException {
        if (pos < end) {
            return true;
        }
        int n = in.read(buf, 0, buf.length);
        if (n <= 0) {
            return false;
        }
        pos = 0;
        end = n;
        return true;
    }

    /**
     * @param maxBytes longest line accepted, CRLF excluded
     * @param eofOk    whether EOF before the first byte returns null instead of failing
     * @param tooLong  the status when the line is too long
     * @return the line without CRLF (ISO-8859-1, so bytes round-trip), or null at a clean EOF
     */
    String readLine(int maxBytes, boolean eofOk, int tooLong) throws IOException {
        StringBuilder line = new StringBuilder(64);
        boolean first = true;
        while (true) {
            if (!fill()) {
                if (first && eofOk) {
                    return null;
                }
                throw new EOFException("the stream ended inside an HTTP line");
            }
            first = false;
            while (pos < end) {
                byte b = buf[pos++];
                if (b == '\r') {
                    if (!fill()) {
                        throw new EOFException("the stream ended inside an HTTP line");
                    }
                    if (buf[pos++] != '\n') {
                        throw new HttpParseException(400, "a bare CR in an HTTP line");
                    }
                    return line.toString();
                }
                if (b == '\n') {
                    throw new HttpParseException(400, "a bare LF in an HTTP line (CRLF is required)");
                }
                if (line.length() == maxBytes) {
                    throw new HttpParseException(tooLong, "an HTTP line is longer than " + maxBytes + " bytes");
                }
                line.append((char) (b & 0xff));
            }
        }
    }

    /** @return up to len bytes, or -1 at EOF */
    int read(byte[] into, int off, int len) throws IOException {
        if (!fill()) {
            return -1;
        }
        int n = Math.min(len, end - pos);
        System.arraycopy(buf, pos, into, off, n);
        pos += n;
        return n;
    }

    static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.ISO_8859_1);
    }
}
