package openshell.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** The descriptor lane's framing: every kind's size bound holds at its limit, and nothing malformed decodes. */
class DescriptorLaneTest {
    private static DescriptorLane.Frame frame(DescriptorLane.Kind kind, int bytes) {
        return new DescriptorLane.Frame(kind, new byte[bytes]);
    }

    @Test
    void framesRoundTripAsOneDatagramWithTheKindFirst() {
        byte[] body = {1, 2, 3};
        byte[] wire = new DescriptorLane.Frame(DescriptorLane.Kind.ANNOUNCE, body).encode();
        assertEquals('A', wire[0]);
        assertEquals(4, wire.length);
        DescriptorLane.Frame back = DescriptorLane.Frame.decode(wire);
        assertEquals(DescriptorLane.Kind.ANNOUNCE, back.kind());
        assertArrayEquals(body, back.body());
        byte[] token = DescriptorLane.newToken();
        assertArrayEquals(token, DescriptorLane.Frame.decode(new DescriptorLane.Frame(DescriptorLane.Kind.SOCKET, token).encode()).body());
    }

    @Test
    void announcementsAndDecisionsAreBoundedAtMaxBodyBytes() {
        for (DescriptorLane.Kind kind : new DescriptorLane.Kind[] {DescriptorLane.Kind.ANNOUNCE, DescriptorLane.Kind.DECISION}) {
            assertEquals(DescriptorLane.MAX_FRAME_BYTES, frame(kind, DescriptorLane.MAX_BODY_BYTES).encode().length);
            assertThrows(ProtocolException.class, () -> frame(kind, DescriptorLane.MAX_BODY_BYTES + 1), "one over the bound");
            assertThrows(ProtocolException.class, () -> frame(kind, 0), "empty");
            assertTrue(DescriptorLane.fits(kind, DescriptorLane.MAX_BODY_BYTES));
            assertFalse(DescriptorLane.fits(kind, DescriptorLane.MAX_BODY_BYTES + 1));
        }
    }

    @Test
    void keysAndTokensAreExactlyTheirLength() {
        frame(DescriptorLane.Kind.HELLO, DescriptorLane.KEY_BYTES);
        assertThrows(ProtocolException.class, () -> frame(DescriptorLane.Kind.HELLO, DescriptorLane.KEY_BYTES - 1));
        assertThrows(ProtocolException.class, () -> frame(DescriptorLane.Kind.HELLO, DescriptorLane.KEY_BYTES + 1));
        for (DescriptorLane.Kind kind : new DescriptorLane.Kind[] {DescriptorLane.Kind.SOCKET, DescriptorLane.Kind.FAILED}) {
            frame(kind, DescriptorLane.TOKEN_BYTES);
            assertThrows(ProtocolException.class, () -> frame(kind, DescriptorLane.TOKEN_BYTES - 1));
            assertThrows(ProtocolException.class, () -> frame(kind, DescriptorLane.TOKEN_BYTES + 1));
        }
        assertEquals(DescriptorLane.KEY_BYTES, DescriptorLane.newKey().length);
        assertEquals(DescriptorLane.TOKEN_BYTES, DescriptorLane.newToken().length);
    }

    @Test
    void anEmptyDatagramOrAnUnknownKindDoesNotDecode() {
        assertThrows(ProtocolException.class, () -> DescriptorLane.Frame.decode(new byte[0]));
        ProtocolException e = assertThrows(ProtocolException.class, () -> DescriptorLane.Frame.decode(new byte[] {'X', 1}));
        assertEquals(Refusal.INVALID_ARGUMENT, e.refusal());
        byte[] shortHello = new byte[DescriptorLane.KEY_BYTES];
        shortHello[0] = 'H';
        assertThrows(ProtocolException.class, () -> DescriptorLane.Frame.decode(shortHello), "a key one byte short");
    }

    @Test
    void framesAreCopiesSoNoCallerCanChangeOneAfterTheFact() {
        byte[] body = {7};
        DescriptorLane.Frame f = new DescriptorLane.Frame(DescriptorLane.Kind.DECISION, body);
        body[0] = 8;
        f.body()[0] = 9;
        assertEquals(7, f.body()[0]);
    }

    @Test
    void onlyTheSameKeyMatches() {
        byte[] key = DescriptorLane.newKey();
        assertTrue(DescriptorLane.keyMatches(key, key.clone()));
        byte[] other = key.clone();
        other[DescriptorLane.KEY_BYTES - 1] ^= 1;
        assertFalse(DescriptorLane.keyMatches(key, other));
        assertFalse(DescriptorLane.keyMatches(key, new byte[0]));
        assertFalse(DescriptorLane.keyMatches(new byte[0], new byte[0]), "no lane key matches nothing");
    }

    @Test
    void theLanePathIsBoundedAtMaxPathBytes() {
        Path link = Path.of("/" + "a".repeat(DescriptorLane.MAX_PATH_BYTES - 1 - DescriptorLane.SUFFIX.length()));
        assertEquals(DescriptorLane.MAX_PATH_BYTES, DescriptorLane.pathFor(link).toString().length());
        assertTrue(DescriptorLane.addressable(DescriptorLane.pathFor(link)));
        assertFalse(DescriptorLane.addressable(DescriptorLane.pathFor(Path.of(link + "b"))));
    }
}
