package openshell.supervisor;

import java.io.ByteArrayOutputStream;
import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;

/**
 * The DNS wire format, as much as the DNS plane needs: one question in, a response with A or
 * AAAA records out. Parsing is bounded and strict (one question, no compression in the question,
 * no answer or authority records in a query); anything else is a format error.
 */
final class DnsMessage {
    /** Largest query accepted (a query is one question and at most an EDNS record). */
    static final int MAX_QUERY_BYTES = 512;
    /** Most addresses in one answer. */
    static final int MAX_ANSWERS = 16;

    static final int TYPE_A = 1;
    static final int TYPE_AAAA = 28;
    static final int CLASS_IN = 1;
    static final int RCODE_NOERROR = 0;
    static final int RCODE_FORMERR = 1;
    static final int RCODE_SERVFAIL = 2;
    static final int RCODE_NXDOMAIN = 3;
    static final int RCODE_NOTIMP = 4;
    static final int RCODE_REFUSED = 5;

    /** A query's only question. {@code question} is its wire form, echoed in the response. */
    record Question(int id, boolean recursionDesired, String name, int type, int qclass, byte[] question) {
    }

    /** A query that is not well formed; {@code id} is -1 when not even the header could be read. */
    static final class Malformed extends Exception {
        private static final long serialVersionUID = 1L;
        private final int id;
        private final int rcode;

        Malformed(int id, int rcode, String message) {
            super(message);
            this.id = id;
            this.rcode = rcode;
        }

        int id() {
            return id;
        }

        int rcode() {
            return rcode;
        }
    }

    private DnsMessage() {
    }

    static Question parse(byte[] m) throws Malformed {
        if (m.length < 12) {
            throw new Malformed(-1, RCODE_FORMERR, "shorter than a DNS header");
        }
        int id = u16(m, 0);
        if (m.length > MAX_QUERY_BYTES) {
            throw new Malformed(id, RCODE_FORMERR, "a query larger than " + MAX_QUERY_BYTES + " bytes");
        }
        int flags = u16(m, 2);
        if ((flags & 0x8000) != 0) {
            throw new Malformed(id, RCODE_FORMERR, "a response, not a query");
        }
        if (((flags >> 11) & 0xf) != 0) {
            throw new Malformed(id, RCODE_NOTIMP, "only standard queries are answered");
        }
        if (u16(m, 4) != 1 || u16(m, 6) != 0 || u16(m, 8) != 0 || u16(m, 10) > 1) {
            throw new Malformed(id, RCODE_FORMERR, "a query has exactly one question and no answer records");
        }
        int p = 12;
        StringBuilder name = new StringBuilder();
        while (true) {
            if (p >= m.length) {
                throw new Malformed(id, RCODE_FORMERR, "the question name runs past the message");
            }
            int len = m[p] & 0xff;
            p++;
            if (len == 0) {
                break;
            }
            if (len > 63) {
                throw new Malformed(id, RCODE_FORMERR, "a label longer than 63 bytes or a compression pointer in the question");
            }
            if (p + len > m.length || name.length() + len + 1 > 254) {
                throw new Malformed(id, RCODE_FORMERR, "the question name is too long or truncated");
            }
            if (!name.isEmpty()) {
                name.append('.');
            }
            for (int i = 0; i < len; i++) {
                int c = m[p + i] & 0xff;
                // Only LDH and underscore: anything else could not be a policy host and is refused early.
                boolean ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
                if (!ok) {
                    throw new Malformed(id, RCODE_REFUSED, "a question name with a byte outside letters, digits, '-' and '_'");
                }
                name.append((char) c);
            }
            p += len;
        }
        if (p + 4 > m.length) {
            throw new Malformed(id, RCODE_FORMERR, "the question is truncated");
        }
        int type = u16(m, p);
        int qclass = u16(m, p + 2);
        byte[] question = new byte[p + 4 - 12];
        System.arraycopy(m, 12, question, 0, question.length);
        if (name.isEmpty()) {
            throw new Malformed(id, RCODE_REFUSED, "the root name is not answered");
        }
        return new Question(id, (flags & 0x0100) != 0, name.toString().toLowerCase(Locale.ROOT), type, qclass, question);
    }

    /** A response without records, for errors and empty answers. */
    static byte[] response(Question q, int rcode) {
        return response(q, rcode, List.of(), 0);
    }

    /** A header-only response to a query that could not be parsed. */
    static byte[] error(int id, int rcode) {
        byte[] r = new byte[12];
        put16(r, 0, id);
        put16(r, 2, 0x8000 | 0x0080 | rcode);
        return r;
    }

    static byte[] response(Question q, int rcode, List<InetAddress> answers, int ttlSeconds) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(64 + answers.size() * 28);
        byte[] header = new byte[12];
        put16(header, 0, q.id());
        put16(header, 2, 0x8000 | (q.recursionDesired() ? 0x0100 : 0) | 0x0080 | rcode);
        put16(header, 4, 1);
        put16(header, 6, answers.size());
        out.writeBytes(header);
        out.writeBytes(q.question());
        for (InetAddress a : answers) {
            byte[] rr = new byte[12];
            put16(rr, 0, 0xc00c); // a pointer to the question name at offset 12
            put16(rr, 2, a instanceof Inet4Address ? TYPE_A : TYPE_AAAA);
            put16(rr, 4, CLASS_IN);
            put16(rr, 6, ttlSeconds >>> 16);
            put16(rr, 8, ttlSeconds & 0xffff);
            byte[] data = a.getAddress();
            put16(rr, 10, data.length);
            out.writeBytes(rr);
            out.writeBytes(data);
        }
        return out.toByteArray();
    }

    static boolean family(InetAddress a, int type) {
        return type == TYPE_A ? a instanceof Inet4Address : a instanceof Inet6Address;
    }

    /** Builds a one-question query, for tests and tools. */
    static byte[] query(int id, String name, int type) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] header = new byte[12];
        put16(header, 0, id);
        put16(header, 2, 0x0100);
        put16(header, 4, 1);
        out.writeBytes(header);
        for (String label : name.split("\\.")) {
            byte[] b = label.getBytes(StandardCharsets.US_ASCII);
            out.write(b.length);
            out.writeBytes(b);
        }
        out.write(0);
        out.write(type >> 8);
        out.write(type);
        out.write(0);
        out.write(CLASS_IN);
        return out.toByteArray();
    }

    static int u16(byte[] b, int o) {
        return ((b[o] & 0xff) << 8) | (b[o + 1] & 0xff);
    }

    private static void put16(byte[] b, int o, int v) {
        b[o] = (byte) (v >> 8);
        b[o + 1] = (byte) v;
    }
}
