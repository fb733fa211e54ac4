package openshell.protocol;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

import io.helidon.security.jwt.Jwt;
import io.helidon.security.jwt.SignedJwt;
import io.helidon.security.jwt.jwk.JwkEC;
import io.helidon.security.jwt.jwk.JwkKeys;

import jakarta.json.JsonNumber;
import jakarta.json.JsonString;
import jakarta.json.JsonValue;

/**
 * Verifies one token profile, bound to one sandbox and one runtime generation. Each failed
 * check has its own {@link Refusal}. Remembers the highest credential epoch it accepted and
 * refuses anything lower from then on.
 *
 * <p>Every call and every stream presents the bearer token, and an ES256 signature check costs
 * about a millisecond of CPU in the JDK: most of a small control call. So the last
 * {@link ProtocolLimits#MAX_VERIFIED_TOKENS} tokens that passed every check are remembered by
 * their exact text; presenting one again skips only what cannot change (parsing, signature,
 * profile claims), while validity in time and the epoch floor are checked again on every use.
 */
public final class TokenVerifier {
    static final String SANDBOX_ID = "sandbox_id";
    static final String RUNTIME_GENERATION = "runtime_generation";
    static final String SESSION_LINEAGE = "session_lineage";
    static final String CREDENTIAL_EPOCH = "credential_epoch";
    static final String COMPONENT = "component";
    private static final String UPN = "upn";
    private static final Set<String> PROFILE_CLAIMS = Set.of("iss", "sub", "aud", "iat", "exp", "jti",
            SANDBOX_ID, RUNTIME_GENERATION, SESSION_LINEAGE, CREDENTIAL_EPOCH, COMPONENT);

    private final TokenKey key;
    private final JwkKeys keys;
    private final String issuer;
    private final TokenAudience audience;
    private final String sandboxId;
    private final long runtimeGeneration;
    /** Empty only for the gateway, which checks the lineage against its own record. */
    private final Optional<String> sessionLineage;
    private final String component;
    private final Clock clock;
    private final AtomicLong highestEpoch = new AtomicLong();
    /** Tokens that passed every check, by their exact text, least recently used first. */
    private final Map<String, TokenClaims> verified = new java.util.LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, TokenClaims> eldest) {
            return size() > ProtocolLimits.MAX_VERIFIED_TOKENS;
        }
    };

    private TokenVerifier(Builder builder) {
        this.key = Objects.requireNonNull(builder.key, "key");
        this.issuer = Objects.requireNonNull(builder.issuer, "issuer");
        this.audience = Objects.requireNonNull(builder.audience, "audience");
        this.sandboxId = Objects.requireNonNull(builder.sandboxId, "sandboxId");
        this.runtimeGeneration = builder.runtimeGeneration;
        this.sessionLineage = builder.sessionLineage;
        this.component = Objects.requireNonNull(builder.component, "component");
        this.clock = builder.clock;
        this.keys = JwkKeys.builder()
                .addKey(JwkEC.builder().publicKey(key.publicKey()).keyId(key.keyId())
                        .algorithm(TokenIssuer.ALGORITHM).build())
                .build();
    }

    /**
     * A builder.
     *
     * @return a builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * The highest credential epoch accepted so far (0 before the first).
     *
     * @return the epoch
     */
    public long highestEpoch() {
        return highestEpoch.get();
    }

    /**
     * Verifies a token and, on success, raises the accepted epoch floor.
     *
     * @param token the compact JWT
     * @return its claims
     * @throws ProtocolException with the reason of the first failed check
     */
    public TokenClaims verify(String token) {
        TokenClaims claims = check(token);
        long epoch = claims.credentialEpoch();
        long previous = highestEpoch.getAndAccumulate(epoch, Math::max);
        if (epoch < previous) {
            throw new ProtocolException(Refusal.TOKEN_STALE_EPOCH,
                    "epoch " + epoch + " below the accepted " + previous);
        }
        return claims;
    }

    /** How many verified tokens are remembered now (for the test at the bound). */
    int rememberedTokens() {
        synchronized (verified) {
            return verified.size();
        }
    }

    private TokenClaims check(String token) {
        TokenClaims known;
        synchronized (verified) {
            known = verified.get(token);
        }
        if (known != null) {
            checkTime(known.issuedAt(), known.expiresAt());
            return known;
        }
        TokenClaims claims = checkUncached(token);
        synchronized (verified) {
            verified.put(token, claims);
        }
        return claims;
    }

    private void checkTime(Instant issuedAt, Instant expiresAt) {
        Instant now = clock.instant();
        if (issuedAt.isAfter(now.plus(ProtocolLimits.TOKEN_LEEWAY))) {
            throw new ProtocolException(Refusal.TOKEN_NOT_YET_VALID, "issued in the future");
        }
        if (!now.isBefore(expiresAt.plus(ProtocolLimits.TOKEN_LEEWAY))) {
            throw new ProtocolException(Refusal.TOKEN_EXPIRED, "expired at " + expiresAt);
        }
    }

    private TokenClaims checkUncached(String token) {
        SignedJwt signed;
        Jwt jwt;
        try {
            signed = SignedJwt.parseToken(token);
            jwt = signed.getJwt();
        } catch (RuntimeException e) {
            throw new ProtocolException(Refusal.TOKEN_MALFORMED, "not a compact signed JWT");
        }
        if (!jwt.keyId().map(key.keyId()::equals).orElse(false)) {
            throw new ProtocolException(Refusal.TOKEN_WRONG_KEY_ID, "unknown key id");
        }
        if (!jwt.algorithm().map(TokenIssuer.ALGORITHM::equals).orElse(false)) {
            throw new ProtocolException(Refusal.TOKEN_BAD_SIGNATURE, "algorithm is not " + TokenIssuer.ALGORITHM);
        }
        if (!signed.verifySignature(keys).isValid()) {
            throw new ProtocolException(Refusal.TOKEN_BAD_SIGNATURE, "signature does not verify");
        }
        Map<String, JsonValue> payload = jwt.payloadClaims();
        for (String name : payload.keySet()) {
            // helidon-security-jwt writes upn = sub into every token it signs; it carries nothing else.
            if (name.equals(UPN) && payload.get(UPN).equals(payload.get("sub"))) {
                continue;
            }
            if (!PROFILE_CLAIMS.contains(name)) {
                throw new ProtocolException(Refusal.TOKEN_UNKNOWN_CLAIM, "claim '" + name + "' is not in the profile");
            }
        }
        for (String name : PROFILE_CLAIMS) {
            if (!payload.containsKey(name)) {
                throw new ProtocolException(Refusal.TOKEN_MISSING_CLAIM, "claim '" + name + "' is missing");
            }
        }
        String tokenIssuer = text(payload, "iss");
        String subject = text(payload, "sub");
        String tokenSandbox = text(payload, SANDBOX_ID);
        String lineage = text(payload, SESSION_LINEAGE);
        String tokenComponent = text(payload, COMPONENT);
        String tokenId = text(payload, "jti");
        long generation = number(payload, RUNTIME_GENERATION);
        long epoch = number(payload, CREDENTIAL_EPOCH);
        Instant issuedAt = Instant.ofEpochSecond(number(payload, "iat"));
        Instant expiresAt = Instant.ofEpochSecond(number(payload, "exp"));
        List<String> audiences = jwt.audience().orElse(List.of());

        if (!issuer.equals(tokenIssuer)) {
            throw new ProtocolException(Refusal.TOKEN_WRONG_ISSUER, "issuer '" + tokenIssuer + "'");
        }
        if (!audiences.equals(List.of(audience.claim()))) {
            throw new ProtocolException(Refusal.TOKEN_WRONG_AUDIENCE, "audience " + audiences);
        }
        if (!sandboxId.equals(tokenSandbox) || !TokenClaims.subjectOf(sandboxId).equals(subject)) {
            throw new ProtocolException(Refusal.TOKEN_WRONG_SANDBOX, "sandbox '" + tokenSandbox + "'");
        }
        if (generation != runtimeGeneration) {
            throw new ProtocolException(Refusal.TOKEN_WRONG_GENERATION, "generation " + generation);
        }
        if (sessionLineage.isPresent() && !sessionLineage.get().equals(lineage)) {
            throw new ProtocolException(Refusal.TOKEN_WRONG_LINEAGE, "lineage '" + lineage + "'");
        }
        if (!component.equals(tokenComponent)) {
            throw new ProtocolException(Refusal.TOKEN_WRONG_COMPONENT, "component '" + tokenComponent + "'");
        }
        Duration lifetime = Duration.between(issuedAt, expiresAt);
        if (lifetime.compareTo(ProtocolLimits.TOKEN_MIN_LIFETIME) < 0
                || lifetime.compareTo(ProtocolLimits.TOKEN_MAX_LIFETIME) > 0) {
            throw new ProtocolException(Refusal.TOKEN_BAD_LIFETIME, "lifetime " + lifetime);
        }
        checkTime(issuedAt, expiresAt);
        if (epoch <= 0) {
            throw new ProtocolException(Refusal.TOKEN_STALE_EPOCH, "epoch must be > 0");
        }
        return new TokenClaims(tokenIssuer, audience, tokenSandbox, generation, lineage, epoch, tokenComponent,
                issuedAt, expiresAt, tokenId);
    }

    private static String text(Map<String, JsonValue> payload, String name) {
        return Optional.ofNullable(payload.get(name))
                .filter(JsonString.class::isInstance)
                .map(value -> ((JsonString) value).getString())
                .orElseThrow(() -> new ProtocolException(Refusal.TOKEN_MISSING_CLAIM, "claim '" + name + "' is not a string"));
    }

    private static long number(Map<String, JsonValue> payload, String name) {
        JsonValue value = payload.get(name);
        if (value instanceof JsonNumber number && number.isIntegral()) {
            return number.longValueExact();
        }
        throw new ProtocolException(Refusal.TOKEN_MISSING_CLAIM, "claim '" + name + "' is not an integer");
    }

    /** Builder of {@link TokenVerifier}. */
    public static final class Builder {
        private TokenKey key;
        private String issuer;
        private TokenAudience audience;
        private String sandboxId;
        private long runtimeGeneration;
        private Optional<String> sessionLineage = Optional.empty();
        private String component = "supervisor";
        private Clock clock = Clock.systemUTC();

        private Builder() {
        }

        /**
         * The gateway's verification key.
         *
         * @param key key id and public key
         * @return this
         */
        public Builder key(TokenKey key) {
            this.key = key;
            return this;
        }

        /**
         * The expected issuer.
         *
         * @param issuer issuer
         * @return this
         */
        public Builder issuer(String issuer) {
            this.issuer = issuer;
            return this;
        }

        /**
         * The accepted audience.
         *
         * @param audience audience
         * @return this
         */
        public Builder audience(TokenAudience audience) {
            this.audience = audience;
            return this;
        }

        /**
         * The sandbox this verifier guards.
         *
         * @param sandboxId sandbox
         * @return this
         */
        public Builder sandboxId(String sandboxId) {
            this.sandboxId = sandboxId;
            return this;
        }

        /**
         * The runtime generation this verifier guards.
         *
         * @param runtimeGeneration generation
         * @return this
         */
        public Builder runtimeGeneration(long runtimeGeneration) {
            this.runtimeGeneration = runtimeGeneration;
            return this;
        }

        /**
         * The session lineage this verifier guards: a token of another launch is refused. Unset,
         * the lineage is not checked here (the gateway compares it with its record instead).
         *
         * @param sessionLineage lineage
         * @return this
         */
        public Builder sessionLineage(String sessionLineage) {
            this.sessionLineage = Optional.of(sessionLineage);
            return this;
        }

        /**
         * The caller's expected role (default {@code supervisor}).
         *
         * @param component component
         * @return this
         */
        public Builder component(String component) {
            this.component = component;
            return this;
        }

        /**
         * The clock for expiry checks.
         *
         * @param clock clock
         * @return this
         */
        public Builder clock(Clock clock) {
            this.clock = Objects.requireNonNull(clock);
            return this;
        }

        /**
         * Builds the verifier.
         *
         * @return the verifier
         */
        public TokenVerifier build() {
            return new TokenVerifier(this);
        }
    }
}
