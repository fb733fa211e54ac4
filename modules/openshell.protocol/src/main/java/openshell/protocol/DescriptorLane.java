package openshell.protocol;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Arrays;

/**
 * The framing of the descriptor lane: a {@code SOCK_SEQPACKET} socket beside a Unix link
 * ({@code <link socket>.fds}, in the same 0700 run directory) on which the runtime passes the
 * sockets of allowed opaque connections to the supervisor ({@code SCM_RIGHTS}) and, once the lane
 * is keyed, the two decide connects and DNS queries without gRPC: the runtime announces a
 * connect as the same {@code PendingConnection} message the PendingConnections stream carries,
 * and the supervisor answers with the same {@code RelayDecision} a Relay stream's first message
 * carries; a DNS query and its answer are the Dns stream's {@code DnsQuery} and {@code DnsAnswer}.
 * A decision then costs two datagrams instead of a stream opened over TLS and HTTP/2 through both
 * JVMs' link threads.
 *
 * <p>Why the lane is as trustworthy as the link: announcements count only on a connection that
 * first presented the lane key, a random value the supervisor sent in its PendingConnections
 * request over the authenticated link; a socket counts only under a token the runtime announced.
 * Everything else on the lane (an unkeyed announcement, a wrong key, a frame of the wrong size or
 * an unknown kind) is malformed, and the receiver closes the connection it came on.
 *
 * <p>Each datagram is one frame: a kind byte, then the body. Bodies are bounded by
 * {@link #MAX_BODY_BYTES}; a larger announcement travels on the PendingConnections stream instead.
 */
public final class DescriptorLane {
    /** Appended to the link's socket path to name the lane's socket. */
    public static final String SUFFIX = ".fds";
    /** Bytes of a handoff token (names one connection's socket on the lane). */
    public static final int TOKEN_BYTES = 16;
    /** Bytes of a lane key. */
    public static final int KEY_BYTES = 32;
    /**
     * Largest frame body (bytes). An announcement with a long command line can be larger: it goes
     * over the PendingConnections stream, whose bound is the control plane's.
     */
    public static final int MAX_BODY_BYTES = 16 * 1024;
    /**
     * Longest lane path (bytes): sun_path holds 108 with its NUL. The lane is bound and connected
     * with raw calls, so it may be one byte longer than a JDK-bound link socket
     * ({@link ProtocolLimits#MAX_UNIX_SOCKET_PATH_BYTES}).
     */
    public static final int MAX_PATH_BYTES = 107;
    /** Largest frame on the wire: the kind byte and the largest body. */
    public static final int MAX_FRAME_BYTES = MAX_BODY_BYTES + 1;

    private static final SecureRandom RANDOM = new SecureRandom();

    private DescriptorLane() {
    }

    /** What a frame is; the byte is its first on the wire. */
    public enum Kind {
        /** Runtime to supervisor, first on a connection that announces: the lane key. */
        HELLO('H'),
        /** Runtime to supervisor, after HELLO: a serialized {@code PendingConnection}. */
        ANNOUNCE('A'),
        /** Runtime to supervisor: a token, with the connection's socket as the one descriptor. */
        SOCKET('S'),
        /** Runtime to supervisor: a token whose socket will never come (the hand-off failed). */
        FAILED('F'),
        /** Supervisor to runtime: a serialized {@code RelayDecision} for an announced connection. */
        DECISION('D'),
        /** Runtime to supervisor, after HELLO: a serialized {@code DnsQuery}. */
        QUERY('Q'),
        /** Supervisor to runtime: a serialized {@code DnsAnswer} for a query asked on the lane. */
        ANSWER('R');

        private final byte wire;

        Kind(char wire) {
            this.wire = (byte) wire;
        }

        /** @return the kind's byte on the wire */
        public byte wire() {
            return wire;
        }

        static Kind of(byte b) {
            for (Kind k : values()) {
                if (k.wire == b) {
                    return k;
                }
            }
            throw new ProtocolException(Refusal.INVALID_ARGUMENT, "lane frame of unknown kind 0x"
                    + Integer.toHexString(b & 0xff));
        }

        /** Whether a body of this length is well-formed for the kind. */
        boolean fits(int length) {
            return switch (this) {
                case HELLO -> length == KEY_BYTES;
                case SOCKET, FAILED -> length == TOKEN_BYTES;
                case ANNOUNCE, DECISION, QUERY, ANSWER -> length >= 1 && length <= MAX_BODY_BYTES;
            };
        }
    }

    /**
     * One frame: its kind and its body.
     *
     * @param kind what it is
     * @param body its body (a copy; frames are small)
     */
    public record Frame(Kind kind, byte[] body) {
        /** Checks the body against the kind's bounds. */
        public Frame {
            if (kind == null || body == null) {
                throw new ProtocolException(Refusal.INVALID_ARGUMENT, "a lane frame needs a kind and a body");
            }
            if (!kind.fits(body.length)) {
                throw new ProtocolException(Refusal.INVALID_ARGUMENT, "a lane " + kind + " frame cannot carry "
                        + body.length + " bytes");
            }
            body = body.clone();
        }

        @Override
        public byte[] body() {
            return body.clone();
        }

        /** @return the frame as one datagram */
        public byte[] encode() {
            byte[] wire = new byte[body.length + 1];
            wire[0] = kind.wire;
            System.arraycopy(body, 0, wire, 1, body.length);
            return wire;
        }

        /**
         * Reads one datagram.
         *
         * @param datagram what arrived
         * @return the frame
         * @throws ProtocolException INVALID_ARGUMENT for an empty datagram, an unknown kind, or a
         *                           body of the wrong size for its kind
         */
        public static Frame decode(byte[] datagram) {
            if (datagram.length == 0) {
                throw new ProtocolException(Refusal.INVALID_ARGUMENT, "an empty lane frame");
            }
            return new Frame(Kind.of(datagram[0]), Arrays.copyOfRange(datagram, 1, datagram.length));
        }
    }

    /** @return whether a body's size is one this kind may carry (a larger announcement goes over gRPC) */
    public static boolean fits(Kind kind, int bodyBytes) {
        return kind.fits(bodyBytes);
    }

    /** @return the lane's socket file for a link socket file */
    public static Path pathFor(Path linkSocket) {
        return Path.of(linkSocket + SUFFIX);
    }

    /** @return whether the lane's path fits a Unix socket address */
    public static boolean addressable(Path lane) {
        return lane.toString().getBytes(StandardCharsets.UTF_8).length <= MAX_PATH_BYTES;
    }

    /** @return a fresh random handoff token */
    public static byte[] newToken() {
        return random(TOKEN_BYTES);
    }

    /** @return a fresh random lane key */
    public static byte[] newKey() {
        return random(KEY_BYTES);
    }

    /** @return whether a presented key is the lane's (in time independent of where they differ) */
    public static boolean keyMatches(byte[] expected, byte[] presented) {
        return expected.length == KEY_BYTES && MessageDigest.isEqual(expected, presented);
    }

    private static byte[] random(int n) {
        byte[] b = new byte[n];
        RANDOM.nextBytes(b);
        return b;
    }
}
