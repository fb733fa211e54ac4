package openshell.isolation.dns;

import java.io.ByteArrayOutputStream;
import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;

/**
 * The DNS wire format, once for every module that reads or answers a workload's queries (the
 * supervisor's DNS plane and upstream resolver, the runtime's relay, the conformance kit), so a
 * bound or a parsing rule cannot differ between them. Strict parsing ({@link #parse}: one
 * question, no compression in it, no answer records in a query, at most {@link #MAX_QUERY_BYTES})
 * is what decides; the lenient {@link #isQuery}/{@link #questionEnd} only sort out what is not a
 * query at all before it is passed on to the strict side.
 */
public final class DnsMessage {
    /** Largest query accepted (a query is one question and at most an EDNS record). */
    public static final int MAX_QUERY_BYTES = 512;
    /** Bytes of the header. */
    public static final int HEADER_BYTES = 12;

    public static final int TYPE_A = 1;
    public static final int TYPE_AAAA = 28;
    public static final int CLASS_IN = 1;
    public static final int RCODE_NOERROR = 0;
    public static final int RCODE_FORMERR = 1;
    public static final int RCODE_SERVFAIL = 2;
    public static final int RCODE_NXDOMAIN = 3;
    public static final int RCODE_NOTIMP = 4;
    public static final int RCODE_REFUSED = 5;

    /**
     * A query's only question.
     *
     * @param id               the query's id
     * @param recursionDesired the RD flag, echoed
     * @param name             lower case, without the root dot
     * @param type             QTYPE
     * @param qclass           QCLASS
     * @param question         its wire form, echoed in the response
     */
    public record Question(int id, boolean recursionDesired, String name, int type, int qclass, byte[] question) {
    }

    /** A query that is not well formed; {@code id} is -1 when not even the header could be read. */
    public static final class Malformed extends Exception {
        private static final long serialVersionUID = 1L;
        private final int id;
        private final int rcode;

        Malformed(int id, int rcode, String message) {
            super(message);
            this.id = id;
            this.rcode = rcode;
        }

        /** @return the query's id, or -1 */
        public int id() {
            return id;
        }

        /** @return the response code the query deserves */
        public int rcode() {
            return rcode;
        }
    }

    private DnsMessage() {
    }

    /**
     * @param m a message as it came
     * @return its only question
     * @throws Malformed if it is not a standard query of one question, with the code to answer
     */
    public static Question parse(byte[] m) throws Malformed {
        if (m.length < HEADER_BYTES) {
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

    /** @return a response without records, for errors and empty answers */
    public static byte[] response(Question q, int rcode) {
        return response(q, rcode, List.of(), 0);
    }

    /** @return a header-only response to a query that could not be parsed */
    public static byte[] error(int id, int rcode) {
        byte[] r = new byte[12];
        put16(r, 0, id);
        put16(r, 2, 0x8000 | 0x0080 | rcode);
        return r;
    }

    /**
     * @param q          the question answered
     * @param rcode      the response code
     * @param answers    the addresses, each an A or AAAA record of the question's name
     * @param ttlSeconds their time to live
     * @return the response
     */
    public static byte[] response(Question q, int rcode, List<InetAddress> answers, int ttlSeconds) {
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

    /** @return whether {@code a} is of the family a question of {@code type} asks for */
    public static boolean family(InetAddress a, int type) {
        return type == TYPE_A ? a instanceof Inet4Address : a instanceof Inet6Address;
    }

    /** @return a one-question query with RD set, for tests, probes and tools */
    public static byte[] query(int id, String name, int type) {
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

    /**
     * @return whether the bytes look like a query at all (a header, QR clear, at least one
     *         question that ends inside the message); only {@link #parse} says whether it is answered
     */
    public static boolean isQuery(byte[] message) {
        return message.length >= HEADER_BYTES && (message[2] & 0x80) == 0 && u16(message, 4) > 0
                && questionEnd(message) > 0;
    }

    /**
     * @return the offset just after the question section (compression pointers allowed, as a
     *         relay that only passes messages on must not judge them), or -1 if it is malformed
     */
    public static int questionEnd(byte[] message) {
        if (message.length < HEADER_BYTES) {
            return -1;
        }
        int count = u16(message, 4);
        int at = HEADER_BYTES;
        for (int q = 0; q < count; q++) {
            while (true) {
                if (at >= message.length) {
                    return -1;
                }
                int length = message[at] & 0xff;
                if (length == 0) {
                    at++;
                    break;
                }
                if ((length & 0xc0) == 0xc0) {
                    at += 2;
                    break;
                }
                if (length > 63) {
                    return -1;
                }
                at += 1 + length;
            }
            at += 4;
            if (at > message.length) {
                return -1;
            }
        }
        return at;
    }

    /**
     * A response that repeats whatever question section the query has (or none, if it has no
     * readable one) and carries {@code rcode}, for a relay that refuses without parsing strictly.
     *
     * @param query the message as it came (at least a header)
     * @param rcode the response code
     * @return the response
     */
    public static byte[] refusal(byte[] query, int rcode) {
        if (query.length < HEADER_BYTES) {
            return error(-1, rcode);
        }
        int end = questionEnd(query);
        byte[] response = java.util.Arrays.copyOf(query, end > 0 ? end : HEADER_BYTES);
        response[2] = (byte) (0x80 | (query[2] & 0x79));
        response[3] = (byte) (0x80 | rcode);
        if (end <= 0) {
            response[4] = 0;
            response[5] = 0;
        }
        java.util.Arrays.fill(response, 6, HEADER_BYTES, (byte) 0);
        return response;
    }

    /** @return the big-endian 16-bit value at {@code o} */
    public static int u16(byte[] b, int o) {
        return ((b[o] & 0xff) << 8) | (b[o + 1] & 0xff);
    }

    private static void put16(byte[] b, int o, int v) {
        b[o] = (byte) (v >> 8);
        b[o + 1] = (byte) v;
    }
}
