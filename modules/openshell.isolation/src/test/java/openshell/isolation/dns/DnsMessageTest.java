package openshell.isolation.dns;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.util.Arrays;
import java.util.List;

import org.junit.jupiter.api.Test;

/** The one DNS codec: the strict parse that decides, and the lenient checks a relay uses before passing a query on. */
class DnsMessageTest {
    @Test
    void aQueryRoundTripsAndItsResponseCarriesTheAnswers() throws Exception {
        byte[] query = DnsMessage.query(0x1234, "Api.Example.TEST", DnsMessage.TYPE_A);
        DnsMessage.Question q = DnsMessage.parse(query);
        assertEquals(0x1234, q.id());
        assertEquals("api.example.test", q.name(), "names are compared in lower case");
        assertEquals(DnsMessage.TYPE_A, q.type());
        byte[] r = DnsMessage.response(q, DnsMessage.RCODE_NOERROR, List.of(InetAddress.ofLiteral("127.0.0.7")), 30);
        assertEquals(1, DnsMessage.u16(r, 6), "one answer record");
        assertArrayEquals(new byte[] {127, 0, 0, 7}, Arrays.copyOfRange(r, r.length - 4, r.length));
    }

    @Test
    void theStrictParseRefusesAtItsBoundAndTheLenientCheckOnlySortsOutNonQueries() throws Exception {
        byte[] query = DnsMessage.query(1, "a.test", DnsMessage.TYPE_A);
        byte[] atBound = Arrays.copyOf(query, DnsMessage.MAX_QUERY_BYTES);
        DnsMessage.parse(atBound);
        DnsMessage.Malformed over = assertThrows(DnsMessage.Malformed.class,
                () -> DnsMessage.parse(Arrays.copyOf(query, DnsMessage.MAX_QUERY_BYTES + 1)));
        assertEquals(DnsMessage.RCODE_FORMERR, over.rcode());
        assertEquals(1, over.id());

        assertTrue(DnsMessage.isQuery(query));
        byte[] response = query.clone();
        response[2] |= (byte) 0x80;
        assertFalse(DnsMessage.isQuery(response), "a response is not a query");
        assertFalse(DnsMessage.isQuery(Arrays.copyOf(query, DnsMessage.HEADER_BYTES)), "no question");
        assertFalse(DnsMessage.isQuery(Arrays.copyOf(query, query.length - 1)), "a question cut short");
    }

    @Test
    void aRefusalRepeatsTheQuestionEvenWithACompressedNameWhichTheStrictParseRefuses() throws Exception {
        byte[] query = DnsMessage.query(7, "a.test", DnsMessage.TYPE_A);
        // The question's name replaced by a pointer: a relay passes it on, the strict side says FORMERR.
        byte[] compressed = new byte[DnsMessage.HEADER_BYTES + 2 + 4];
        System.arraycopy(query, 0, compressed, 0, DnsMessage.HEADER_BYTES);
        compressed[12] = (byte) 0xc0;
        compressed[13] = 12;
        compressed[15] = 1;
        compressed[17] = 1;
        assertTrue(DnsMessage.isQuery(compressed));
        assertEquals(compressed.length, DnsMessage.questionEnd(compressed));
        assertEquals(DnsMessage.RCODE_FORMERR, assertThrows(DnsMessage.Malformed.class, () -> DnsMessage.parse(compressed)).rcode());

        byte[] refused = DnsMessage.refusal(query, DnsMessage.RCODE_REFUSED);
        assertEquals(query.length, refused.length, "the question is repeated");
        assertEquals(7, DnsMessage.u16(refused, 0));
        assertEquals(0x80, refused[2] & 0x80, "a response");
        assertEquals(DnsMessage.RCODE_REFUSED, refused[3] & 0x0f);
        assertEquals(0, DnsMessage.u16(refused, 6), "no answers");
    }
}
