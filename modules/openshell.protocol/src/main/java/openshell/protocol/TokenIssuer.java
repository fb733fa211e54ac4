package openshell.protocol;

import java.math.BigInteger;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.SecureRandom;
import java.security.interfaces.ECPrivateKey;
import java.security.interfaces.ECPublicKey;
import java.security.spec.ECGenParameterSpec;
import java.time.Clock;
import java.time.Instant;
import java.util.Base64;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;

import io.helidon.security.jwt.Jwt;
import io.helidon.security.jwt.SignedJwt;
import io.helidon.security.jwt.jwk.JwkEC;

import jakarta.json.Json;

/**
 * Mints the per-launch token pair (the gateway's side). ES256, not EdDSA:
 * helidon-security-jwt 4.1.7 has JWK types for EC, RSA and octet keys only (no OKP), so it
 * can neither sign nor verify Ed25519; ES256 is the asymmetric algorithm it supports.
 */
public final class TokenIssuer {
    static final String ALGORITHM = JwkEC.ALG_ES256;

    private final String issuer;
    private final String keyId;
    private final JwkEC signingKey;
    private final TokenKey verificationKey;
    private final Clock clock;

    private TokenIssuer(String issuer, String keyId, KeyPair keys, Clock clock) {
        this.issuer = issuer;
        this.keyId = keyId;
        this.clock = clock;
        ECPublicKey publicKey = (ECPublicKey) keys.getPublic();
        ECPrivateKey privateKey = (ECPrivateKey) keys.getPrivate();
        this.signingKey = JwkEC.create(Json.createObjectBuilder()
                .add("kty", "EC")
                .add("crv", JwkEC.CURVE_P256)
                .add("kid", keyId)
                .add("alg", ALGORITHM)
                .add("use", "sig")
                .add("x", coordinate(publicKey.getW().getAffineX()))
                .add("y", coordinate(publicKey.getW().getAffineY()))
                .add("d", coordinate(privateKey.getS()))
                .build());
        this.verificationKey = new TokenKey(keyId, publicKey);
    }

    /**
     * A fresh ES256 signing key.
     *
     * @param issuer the {@code iss} of every token
     * @param keyId  the {@code kid} of every token
     * @param clock  the issuing clock
     * @return the issuer
     */
    public static TokenIssuer generate(String issuer, String keyId, Clock clock) {
        Objects.requireNonNull(issuer);
        Objects.requireNonNull(keyId);
        Objects.requireNonNull(clock);
        try {
            KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
            generator.initialize(new ECGenParameterSpec("secp256r1"), new SecureRandom());
            return new TokenIssuer(issuer, keyId, generator.generateKeyPair(), clock);
        } catch (GeneralSecurityException e) {
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "cannot generate a P-256 key", e);
        }
    }

    /**
     * An issuer over an existing P-256 key pair, so a gateway keeps one signing key across restarts
     * and tokens it minted before a restart still verify after it.
     *
     * @param issuer the {@code iss} of every token
     * @param keyId  the {@code kid} of every token
     * @param keys   a P-256 key pair
     * @param clock  the issuing clock
     * @return the issuer
     */
    public static TokenIssuer of(String issuer, String keyId, KeyPair keys, Clock clock) {
        Objects.requireNonNull(issuer);
        Objects.requireNonNull(keyId);
        Objects.requireNonNull(keys);
        Objects.requireNonNull(clock);
        if (!(keys.getPublic() instanceof ECPublicKey pub) || !(keys.getPrivate() instanceof ECPrivateKey)
                || pub.getParams().getCurve().getField().getFieldSize() != 256) {
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "the signing key must be a P-256 EC key pair");
        }
        return new TokenIssuer(issuer, keyId, keys, clock);
    }

    /**
     * The key verifiers need.
     *
     * @return key id and public key
     */
    public TokenKey verificationKey() {
        return verificationKey;
    }

    /**
     * The issuer claim.
     *
     * @return issuer
     */
    public String issuer() {
        return issuer;
    }

    /**
     * Mints both tokens of one epoch with the same binding and expiry.
     *
     * @param grant           binding and lifetime
     * @param credentialEpoch epoch, greater than zero
     * @return the pair
     */
    public TokenPair mintPair(TokenGrant grant, long credentialEpoch) {
        if (credentialEpoch <= 0) {
            throw new ProtocolException(Refusal.TOKEN_STALE_EPOCH, "credential epoch must be > 0");
        }
        Instant issuedAt = clock.instant();
        Instant expiresAt = issuedAt.plus(grant.lifetime());
        String gateway = mint(claims(grant, TokenAudience.GATEWAY, credentialEpoch, issuedAt, expiresAt), Map.of());
        String sandbox = mint(claims(grant, TokenAudience.SANDBOX, credentialEpoch, issuedAt, expiresAt), Map.of());
        return new TokenPair(gateway, sandbox, credentialEpoch, expiresAt);
    }

    TokenClaims claims(TokenGrant grant, TokenAudience audience, long epoch, Instant issuedAt, Instant expiresAt) {
        return new TokenClaims(issuer, audience, grant.sandboxId(), grant.runtimeGeneration(),
                grant.sessionLineage(), epoch, grant.component(), issuedAt, expiresAt, UUID.randomUUID().toString());
    }

    // Package-private so tests can mint tokens outside the profile (extra claims, odd times).
    String mint(TokenClaims claims, Map<String, Object> extraClaims) {
        Jwt.Builder jwt = Jwt.builder()
                .algorithm(ALGORITHM)
                .keyId(keyId)
                .type("JWT")
                .issuer(claims.issuer())
                .subject(TokenClaims.subjectOf(claims.sandboxId()))
                .addAudience(claims.audience().claim())
                .issueTime(claims.issuedAt())
                .expirationTime(claims.expiresAt())
                .jwtId(claims.tokenId())
                .addPayloadClaim(TokenVerifier.SANDBOX_ID, claims.sandboxId())
                .addPayloadClaim(TokenVerifier.RUNTIME_GENERATION, claims.runtimeGeneration())
                .addPayloadClaim(TokenVerifier.SESSION_LINEAGE, claims.sessionLineage())
                .addPayloadClaim(TokenVerifier.CREDENTIAL_EPOCH, claims.credentialEpoch())
                .addPayloadClaim(TokenVerifier.COMPONENT, claims.component());
        extraClaims.forEach(jwt::addPayloadClaim);
        return SignedJwt.sign(jwt.build(), signingKey).tokenContent();
    }

    private static String coordinate(BigInteger value) {
        byte[] raw = value.toByteArray();
        byte[] fixed = new byte[32];
        int copy = Math.min(raw.length, 32);
        System.arraycopy(raw, raw.length - copy, fixed, 32 - copy, copy);
        return Base64.getUrlEncoder().withoutPadding().encodeToString(fixed);
    }
}
