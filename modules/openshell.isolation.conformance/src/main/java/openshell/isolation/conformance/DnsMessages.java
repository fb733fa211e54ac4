package openshell.isolation.conformance;

import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** Just enough DNS wire format to recognise a probe's question and answer it with NXDOMAIN. */
final class DnsMessages {
    private static final int HEADER = 12;
    private static final int MAX_LABEL = 63;

    private DnsMessages() {
    }

    /** The first question's name, lower case, without the root dot. */
    static String questionName(byte[] message) {
        StringBuilder name = new StringBuilder();
        int at = HEADER;
        while (true) {
            if (at >= message.length) {
                return fail("the DNS query ends inside its question");
            }
            int length = message[at] & 0xff;
            if (length == 0) {
                return name.toString().toLowerCase(java.util.Locale.ROOT);
            }
            if (length > MAX_LABEL || at + 1 + length > message.length) {
                return fail("the DNS query's question is malformed at byte " + at);
            }
            if (!name.isEmpty()) {
                name.append('.');
            }
            name.append(new String(message, at + 1, length, StandardCharsets.US_ASCII));
            at += 1 + length;
        }
    }

    /** A response to the query: same id and question, name error (NXDOMAIN), no records. */
    static byte[] nameError(byte[] query) {
        int at = HEADER;
        while ((query[at] & 0xff) != 0) {
            at += 1 + (query[at] & 0xff);
        }
        int questionEnd = at + 1 + 4;
        byte[] response = Arrays.copyOf(query, questionEnd);
        response[2] = (byte) (0x80 | (query[2] & 0x79));
        response[3] = (byte) 0x83;
        response[4] = 0;
        response[5] = 1;
        Arrays.fill(response, 6, HEADER, (byte) 0);
        return response;
    }
}
