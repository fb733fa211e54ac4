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
                .clock(clock).build();
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
