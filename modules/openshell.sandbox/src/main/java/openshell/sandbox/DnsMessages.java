package openshell.sandbox;

import java.util.Arrays;
import openshell.isolation.DenyReason;

/** The little of the DNS wire format the relay needs: validating a query and building a refusal. */
final class DnsMessages {
    static final int HEADER_BYTES = 12;
    static final int RCODE_SERVFAIL = 2;
    static final int RCODE_REFUSED = 5;

    private DnsMessages() {
    }

    /** @return whether the bytes look like a query (header present, QR clear, one question or more) */
    static boolean isQuery(byte[] message) {
        return message.length >= HEADER_BYTES && (message[2] & 0x80) == 0
                && ((message[4] & 0xff) << 8 | message[5] & 0xff) > 0 && questionEnd(message) > 0;
    }

    /**
     * A response that repeats the question and carries REFUSED (policy, identity) or SERVFAIL
     * (unavailable, exhausted, timeout), so the resolver stops at once instead of retrying.
     */
    static byte[] refusal(byte[] query, DenyReason reason) {
        int end = questionEnd(query);
        byte[] response = Arrays.copyOf(query, end > 0 ? end : HEADER_BYTES);
        int rcode = reason == DenyReason.POLICY || reason == DenyReason.IDENTITY_UNRESOLVED ? RCODE_REFUSED : RCODE_SERVFAIL;
        response[2] = (byte) (0x80 | (query[2] & 0x79));
        response[3] = (byte) (0x80 | rcode);
        if (end <= 0) {
            response[4] = 0;
            response[5] = 0;
        }
        for (int i = 6; i < HEADER_BYTES; i++) {
            response[i] = 0;
        }
        return response;
    }

    /** @return the offset just after the question section, or -1 if it is malformed */
    static int questionEnd(byte[] message) {
        if (message.length < HEADER_BYTES) {
            return -1;
        }
        int count = (message[4] & 0xff) << 8 | message[5] & 0xff;
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
}
