package openshell.protocol;

import java.time.Duration;

/**
 * Every bound of the Sandbox Protocol, in one place; the module Javadoc has the table of
 * owners and what happens at each bound.
 */
public final class ProtocolLimits {
    /** TLS handshake plus the first authenticated call must finish within this. */
    public static final Duration HANDSHAKE_TIMEOUT = Duration.ofSeconds(5);
    /**
     * Longest Unix socket path (bytes): the kernel's sun_path holds 108 with its NUL, and the JDK
     * refuses 107 and over. Checked when a transport is made, so a long run directory fails with
     * its name instead of a bare "path too long" at bind time.
     */
    public static final int MAX_UNIX_SOCKET_PATH_BYTES = 106;
    /**
     * Generations between a Unix peer and the process tree root it must descend from
     * ({@code UnixPeerPolicy.processTree}); a deeper peer is refused. The runtime is one to three
     * below the process its driver started (launcher script, namespace entry).
     */
    public static final int MAX_PEER_ANCESTRY = 32;
    /**
     * Tokens a verifier remembers as verified (their signature is not checked again; time and
     * epoch are): a supervisor presents one pair at a time, a refresh brings the next.
     */
    public static final int MAX_VERIFIED_TOKENS = 16;
    /** Connections accepted but not yet authenticated; the oldest is evicted beyond it. */
    public static final int MAX_PRE_AUTH_CONNECTIONS = 32;
    /**
     * Streams a connection may open before its first valid token: past it the runtime closes
     * the connection, so an unauthenticated peer cannot flood stream tasks (nor reset them).
     */
    public static final int MAX_PRE_AUTH_STREAMS = 16;
    /** Authenticated control connections held by one runtime endpoint. */
    public static final int MAX_CONTROL_CONNECTIONS = 128;
    /** Largest gRPC message on the control plane (bytes). */
    public static final int MAX_CONTROL_MESSAGE_BYTES = 1024 * 1024;
    /** HTTP/2 initial stream window: what one relay stream may have in flight (bytes). */
    public static final int STREAM_WINDOW_BYTES = 1024 * 1024;
    /**
     * The receive window the supervisor gives each credited stream (Relay, AttachProcess) of a
     * link (bytes): it holds {@link CreditedStream#MAX_IN_FLIGHT} messages of
     * {@link CreditedStream#MAX_CHUNK_BYTES} with their framing, so the runtime's sender waits
     * on message credits and never on HTTP/2 flow control. Helidon 4.1.7's writer polls for a
     * window update (50 ms sleeps) and fails the stream after 100 ms without one; at the HTTP/2
     * default of 64 KiB a bulk relay stopped every four messages and broke under load.
     */
    public static final int CREDITED_STREAM_WINDOW_BYTES = 512 * 1024;
    /**
     * The connection-level receive window of a client connection (bytes): what all of its
     * streams together may have in flight towards it. At the HTTP/2 default (64 KiB) the whole
     * link carried less than one relay's credit; each stream stays bounded by its own window.
     */
    public static final int LINK_WINDOW_BYTES = 16 * 1024 * 1024;
    /** HTTP/2 frame size: bounds how long one bulk frame holds the connection writer. */
    public static final int MAX_FRAME_BYTES = 16 * 1024;
    /**
     * Calls and streams open at once on one link (relays, process I/O, DNS, control); the
     * supervisor fails the next call with RESOURCE_EXHAUSTED rather than open it.
     */
    public static final int MAX_CONCURRENT_STREAMS = 1024;
    /**
     * Extra streams the runtime's HTTP/2 connection admits beyond {@link #MAX_CONCURRENT_STREAMS}:
     * the runtime frees a finished stream's slot a moment after the supervisor has seen it end,
     * and Helidon 4.1.7 closes the whole connection (not just the stream) past its limit.
     */
    public static final int STREAM_RELEASE_SLACK = 256;
    /**
     * How long the supervisor still accepts frames for a stream it reset: frames the runtime
     * sent before it saw the reset must not fail Helidon 4.1.7's client connection.
     */
    public static final Duration RESET_GRACE = Duration.ofSeconds(5);
    /** The supervisor pings when the connection was quiet this long. */
    public static final Duration KEEPALIVE_INTERVAL = Duration.ofSeconds(5);
    /** A connection with nothing read for this long is declared lost and closed. */
    public static final Duration KEEPALIVE_TIMEOUT = Duration.ofSeconds(10);
    /** Control requests remembered for replay, per runtime generation. */
    public static final int LEDGER_CAPACITY = 4096;
    /** Default admission window of an exec request. */
    public static final Duration EXEC_ADMISSION_WINDOW = Duration.ofSeconds(30);
    /** Longest token lifetime the profiles accept. */
    public static final Duration TOKEN_MAX_LIFETIME = Duration.ofHours(1);
    /** Shortest token lifetime the profiles accept. */
    public static final Duration TOKEN_MIN_LIFETIME = Duration.ofMinutes(1);
    /** Clock skew tolerated on issued-at and expiry. */
    public static final Duration TOKEN_LEEWAY = Duration.ofSeconds(30);
    /** Validity of the per-launch CA and leaf certificates. */
    public static final Duration TLS_VALIDITY = Duration.ofDays(2);

    private ProtocolLimits() {
    }
}
