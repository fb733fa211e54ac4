package openshell.protocol;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class TokenVerifierTest {
    private static final TokenIssuer ISSUER = TokenIssuer.generate(Launch.ISSUER, "gateway-key-1", Clock.systemUTC());

    static Stream<Arguments> rejections() {
        return TokenRejections.cases(ISSUER);
    }

    private static TokenVerifier verifier(Clock clock) {
        return TokenVerifier.builder().key(ISSUER.verificationKey()).issuer(Launch.ISSUER)
                .audience(TokenAudience.SANDBOX).sandboxId(Launch.SANDBOX).runtimeGeneration(Launch.GENERATION)
                .sessionLineage(Launch.LINEAGE).clock(clock).build();
    }

    @ParameterizedTest
    @MethodSource("rejections")
    void eachRejectionHasItsOwnReason(TokenRejections.Case rejection) {
        ProtocolException refused = assertThrows(ProtocolException.class,
                () -> verifier(Clock.systemUTC()).verify(rejection.token()));
        assertEquals(rejection.expected(), refused.refusal());
    }

    @Test
    void pairIsBoundTogetherAndEachTokenFitsOnlyItsAudience() {
        TokenPair pair = ISSUER.mintPair(Launch.grant(), 3);
        TokenClaims claims = verifier(Clock.systemUTC()).verify(pair.sandboxToken());
        assertEquals(3, claims.credentialEpoch());
        assertEquals(Launch.GENERATION, claims.runtimeGeneration());
        assertEquals("lineage-1", claims.sessionLineage());
        ProtocolException gateway = assertThrows(ProtocolException.class,
                () -> verifier(Clock.systemUTC()).verify(pair.gatewayToken()));
        assertEquals(Refusal.TOKEN_WRONG_AUDIENCE, gateway.refusal());
    }

    @Test
    void lowerEpochThanTheLastAcceptedIsRefused() {
        TokenVerifier verifier = verifier(Clock.systemUTC());
        verifier.verify(ISSUER.mintPair(Launch.grant(), 5).sandboxToken());
        verifier.verify(ISSUER.mintPair(Launch.grant(), 5).sandboxToken());
        ProtocolException stale = assertThrows(ProtocolException.class,
                () -> verifier.verify(ISSUER.mintPair(Launch.grant(), 4).sandboxToken()));
        assertEquals(Refusal.TOKEN_STALE_EPOCH, stale.refusal());
        assertEquals(5, verifier.highestEpoch());
    }

    @Test
    void expiryLeewayIsExactlyTheBound() {
        Instant issued = Instant.parse("2026-01-01T00:00:00Z");
        TokenIssuer issuer = ISSUER;
        String token = issuer.mint(issuer.claims(Launch.grant(), TokenAudience.SANDBOX, 1, issued,
                issued.plus(Duration.ofMinutes(10))), Map.of());
        Instant expiry = issued.plus(Duration.ofMinutes(10));
        verifier(TokenRejections.fixed(expiry.plus(ProtocolLimits.TOKEN_LEEWAY).minusMillis(1))).verify(token);
        ProtocolException expired = assertThrows(ProtocolException.class,
                () -> verifier(TokenRejections.fixed(expiry.plus(ProtocolLimits.TOKEN_LEEWAY))).verify(token));
        assertEquals(Refusal.TOKEN_EXPIRED, expired.refusal());
    }

    /** A clock the test moves. */
    private static final class MovingClock extends Clock {
        private volatile Instant now;

        MovingClock(Instant now) {
            this.now = now;
        }

        @Override
        public java.time.ZoneId getZone() {
            return java.time.ZoneOffset.UTC;
        }

        @Override
        public Clock withZone(java.time.ZoneId zone) {
            return this;
        }

        @Override
        public Instant instant() {
            return now;
        }
    }

    @Test
    void aRememberedTokenIsStillCheckedForTimeEpochAndItsExactText() {
        MovingClock clock = new MovingClock(Instant.now());
        TokenIssuer issuer = TokenIssuer.generate(Launch.ISSUER, "gateway-key-1", clock);
        TokenVerifier verifier = TokenVerifier.builder().key(issuer.verificationKey()).issuer(Launch.ISSUER)
                .audience(TokenAudience.SANDBOX).sandboxId(Launch.SANDBOX).runtimeGeneration(Launch.GENERATION)
                .clock(clock).build();
        TokenPair first = issuer.mintPair(Launch.grant(), 1);
        verifier.verify(first.sandboxToken());
        verifier.verify(first.sandboxToken());
        assertEquals(1, verifier.rememberedTokens());
        // One character of the signature changed: another text, so it is verified in full, and fails.
        String token = first.sandboxToken();
        int last = token.length() - 2;
        String forged = token.substring(0, last) + (token.charAt(last) == 'A' ? 'B' : 'A') + token.substring(last + 1);
        assertEquals(Refusal.TOKEN_BAD_SIGNATURE,
                assertThrows(ProtocolException.class, () -> verifier.verify(forged)).refusal());
        TokenPair second = issuer.mintPair(Launch.grant(), 2);
        verifier.verify(second.sandboxToken());
        assertEquals(Refusal.TOKEN_STALE_EPOCH,
                assertThrows(ProtocolException.class, () -> verifier.verify(first.sandboxToken())).refusal(),
                "a remembered token below the epoch floor");
        clock.now = second.expiresAt().plus(ProtocolLimits.TOKEN_LEEWAY);
        assertEquals(Refusal.TOKEN_EXPIRED,
                assertThrows(ProtocolException.class, () -> verifier.verify(second.sandboxToken())).refusal(),
                "a remembered token past its expiry");
    }

    @Test
    void theVerifierRemembersAtMostTheBoundOfTokens() {
        TokenVerifier verifier = verifier(Clock.systemUTC());
        java.util.List<String> tokens = new java.util.ArrayList<>();
        for (int i = 0; i <= ProtocolLimits.MAX_VERIFIED_TOKENS; i++) {
            tokens.add(ISSUER.mintPair(Launch.grant(), 1).sandboxToken());
        }
        for (String token : tokens.subList(0, ProtocolLimits.MAX_VERIFIED_TOKENS)) {
            verifier.verify(token);
        }
        assertEquals(ProtocolLimits.MAX_VERIFIED_TOKENS, verifier.rememberedTokens());
        verifier.verify(tokens.getLast());
        assertEquals(ProtocolLimits.MAX_VERIFIED_TOKENS, verifier.rememberedTokens(), "the least recently used went");
        // The forgotten one is verified in full again, and still passes.
        verifier.verify(tokens.getFirst());
        assertEquals(ProtocolLimits.MAX_VERIFIED_TOKENS, verifier.rememberedTokens());
    }

    @Test
    void lifetimeBoundsAreEnforcedAtMintAndVerify() {
        new TokenGrant("s", 1, "l", "supervisor", ProtocolLimits.TOKEN_MAX_LIFETIME);
        new TokenGrant("s", 1, "l", "supervisor", ProtocolLimits.TOKEN_MIN_LIFETIME);
        assertEquals(Refusal.TOKEN_BAD_LIFETIME, assertThrows(ProtocolException.class, () -> new TokenGrant("s", 1, "l",
                "supervisor", ProtocolLimits.TOKEN_MAX_LIFETIME.plusSeconds(1))).refusal());
        assertEquals(Refusal.TOKEN_BAD_LIFETIME, assertThrows(ProtocolException.class, () -> new TokenGrant("s", 1, "l",
                "supervisor", ProtocolLimits.TOKEN_MIN_LIFETIME.minusSeconds(1))).refusal());
    }

    @Test
    void slotNeverHandsOutAnExpiredTokenNorGoesBack() {
        Instant now = Instant.parse("2026-01-01T00:00:00Z");
        TokenIssuer issuer = TokenIssuer.generate(Launch.ISSUER, "k", TokenRejections.fixed(now));
        TokenPair first = issuer.mintPair(Launch.grant(), 2);
        TokenSlot live = new TokenSlot(first, TokenRejections.fixed(now.plusSeconds(60)));
        assertEquals(first, live.current());
        assertEquals(Refusal.TOKEN_STALE_EPOCH,
                assertThrows(ProtocolException.class, () -> live.refresh(issuer.mintPair(Launch.grant(), 2))).refusal());
        assertEquals(Refusal.TOKEN_STALE_EPOCH,
                assertThrows(ProtocolException.class, () -> live.refresh(issuer.mintPair(Launch.grant(), 1))).refusal());
        TokenPair next = issuer.mintPair(Launch.grant(), 3);
        live.refresh(next);
        assertEquals(next, live.current());
        TokenSlot late = new TokenSlot(first, TokenRejections.fixed(first.expiresAt()));
        assertEquals(Refusal.TOKEN_EXPIRED, assertThrows(ProtocolException.class, late::current).refusal());
    }
}
