package openshell.protocol;

/**
 * Every distinct reason the protocol refuses something. Each token rejection has its own
 * value so an operator can tell an expired token from a forged one without reading logs.
 */
public enum Refusal {
    /** The token is not a well-formed signed JWT. */
    TOKEN_MALFORMED,
    /** The token names a key id this verifier does not know. */
    TOKEN_WRONG_KEY_ID,
    /** The signature does not verify with the named key. */
    TOKEN_BAD_SIGNATURE,
    /** The token carries a claim outside the profile. */
    TOKEN_UNKNOWN_CLAIM,
    /** A claim the profile requires is absent or has the wrong type. */
    TOKEN_MISSING_CLAIM,
    /** Another issuer. */
    TOKEN_WRONG_ISSUER,
    /** Another audience than this verifier's. */
    TOKEN_WRONG_AUDIENCE,
    /** Minted for another sandbox (sandbox id or subject). */
    TOKEN_WRONG_SANDBOX,
    /** Minted for another runtime generation. */
    TOKEN_WRONG_GENERATION,
    /** Minted for another session lineage (another launch) than the verifier guards. */
    TOKEN_WRONG_LINEAGE,
    /** Another component than the profile expects. */
    TOKEN_WRONG_COMPONENT,
    /** A credential epoch below the last accepted one, or not positive. */
    TOKEN_STALE_EPOCH,
    /** Past its expiry (plus leeway). */
    TOKEN_EXPIRED,
    /** Issued in the future (beyond leeway). */
    TOKEN_NOT_YET_VALID,
    /** Lifetime outside the profile's minimum and maximum. */
    TOKEN_BAD_LIFETIME,
    /** No bearer token on a call. */
    TOKEN_ABSENT,
    /** A control request's digest does not match its canonical encoding. */
    DIGEST_INVALID,
    /** The request id was already used with another digest. */
    DIGEST_MISMATCH,
    /** An exec whose admission deadline has passed. */
    EXEC_EXPIRED,
    /** The Unix peer's credentials are not the expected ones. */
    PEER_REFUSED,
    /** TLS handshake plus first authenticated call did not finish in time. */
    HANDSHAKE_TIMEOUT,
    /** Too many connections of one kind. */
    CONNECTION_LIMIT,
    /** Another logical supervisor tried to attach to a pinned generation. */
    SUPERVISOR_MISMATCH,
    /** A live connection of the same or a higher epoch already holds the generation. */
    ATTACH_CONFLICT,
    /** The peer stopped answering keepalive pings. */
    PEER_SILENT,
    /** A launch bundle that is empty, too large, corrupt, of the wrong kind or missing a field. */
    BUNDLE_INVALID,
    /** Bad input to an API call of this module. */
    INVALID_ARGUMENT,
    /** Transport or TLS failure. */
    TRANSPORT_FAILED
}
