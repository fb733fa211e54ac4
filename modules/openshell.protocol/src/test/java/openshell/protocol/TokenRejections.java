package openshell.protocol;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Stream;

import org.junit.jupiter.params.provider.Arguments;

/**
 * One bad token per rejection reason, minted the way an attacker or a confused component
 * would. Shared by the unit test of the verifier and the on-the-wire tests.
 */
final class TokenRejections {
    private TokenRejections() {
    }

    record Case(Refusal expected, String token) {
        @Override
        public String toString() {
            return expected.name();
        }
    }

    static Stream<Arguments> cases(TokenIssuer issuer) {
        TokenGrant grant = Launch.grant();
        Instant now = Instant.now();
        Instant expiry = now.plus(Duration.ofMinutes(30));
        TokenIssuer stranger = TokenIssuer.generate(Launch.ISSUER, "gateway-key-1", Clock.systemUTC());
        TokenIssuer otherKeyId = TokenIssuer.generate(Launch.ISSUER, "gateway-key-2", Clock.systemUTC());
        TokenIssuer otherIssuer = TokenIssuer.generate("evil-gateway", "gateway-key-1", Clock.systemUTC());
        TokenClaims good = issuer.claims(grant, TokenAudience.SANDBOX, 1, now, expiry);
        String signedGood = issuer.mint(good, Map.of());
        String[] parts = signedGood.split("\\.");
        return Stream.of(
                new Case(Refusal.TOKEN_MALFORMED, "not-a-jwt"),
                new Case(Refusal.TOKEN_WRONG_KEY_ID, otherKeyId.mint(good, Map.of())),
                new Case(Refusal.TOKEN_BAD_SIGNATURE, stranger.mint(good, Map.of())),
                new Case(Refusal.TOKEN_BAD_SIGNATURE, parts[0] + "." + parts[1] + "." + flip(parts[2])),
                new Case(Refusal.TOKEN_UNKNOWN_CLAIM, issuer.mint(good, Map.of("admin", true))),
                new Case(Refusal.TOKEN_WRONG_ISSUER, withIssuer(otherIssuer, issuer, good)),
                new Case(Refusal.TOKEN_WRONG_AUDIENCE, issuer.mint(issuer.claims(grant, TokenAudience.GATEWAY, 1, now,
                        expiry), Map.of())),
                new Case(Refusal.TOKEN_WRONG_SANDBOX, issuer.mint(issuer.claims(new TokenGrant("sbx-other",
                        Launch.GENERATION, "lineage-1", "supervisor", Duration.ofMinutes(30)), TokenAudience.SANDBOX, 1,
                        now, expiry), Map.of())),
                new Case(Refusal.TOKEN_WRONG_GENERATION, issuer.mint(issuer.claims(new TokenGrant(Launch.SANDBOX,
                        Launch.GENERATION + 1, "lineage-1", "supervisor", Duration.ofMinutes(30)), TokenAudience.SANDBOX,
                        1, now, expiry), Map.of())),
                new Case(Refusal.TOKEN_WRONG_LINEAGE, issuer.mint(issuer.claims(new TokenGrant(Launch.SANDBOX,
                        Launch.GENERATION, "lineage-2", "supervisor", Duration.ofMinutes(30)), TokenAudience.SANDBOX,
                        1, now, expiry), Map.of())),
                new Case(Refusal.TOKEN_WRONG_COMPONENT, issuer.mint(issuer.claims(new TokenGrant(Launch.SANDBOX,
                        Launch.GENERATION, "lineage-1", "workload", Duration.ofMinutes(30)), TokenAudience.SANDBOX, 1,
                        now, expiry), Map.of())),
                new Case(Refusal.TOKEN_EXPIRED, issuer.mint(issuer.claims(grant, TokenAudience.SANDBOX, 1,
                        now.minus(Duration.ofMinutes(10)), now.minus(ProtocolLimits.TOKEN_LEEWAY).minusSeconds(1)),
                        Map.of())),
                new Case(Refusal.TOKEN_NOT_YET_VALID, issuer.mint(issuer.claims(grant, TokenAudience.SANDBOX, 1,
                        now.plus(Duration.ofMinutes(5)), now.plus(Duration.ofMinutes(20))), Map.of())),
                new Case(Refusal.TOKEN_BAD_LIFETIME, issuer.mint(issuer.claims(grant, TokenAudience.SANDBOX, 1, now,
                        now.plus(ProtocolLimits.TOKEN_MAX_LIFETIME).plusSeconds(1)), Map.of())),
                new Case(Refusal.TOKEN_STALE_EPOCH, issuer.mint(issuer.claims(grant, TokenAudience.SANDBOX, 0, now,
                        expiry), Map.of())))
                .map(Arguments::of);
    }

    private static String withIssuer(TokenIssuer otherIssuer, TokenIssuer issuer, TokenClaims good) {
        // Same key as the real gateway, different iss: the issuer check, not the signature, must catch it.
        TokenClaims claims = new TokenClaims(otherIssuer.issuer(), good.audience(), good.sandboxId(),
                good.runtimeGeneration(), good.sessionLineage(), good.credentialEpoch(), good.component(),
                good.issuedAt(), good.expiresAt(), UUID.randomUUID().toString());
        return issuer.mint(claims, Map.of());
    }

    private static String flip(String signature) {
        char last = signature.charAt(5);
        return signature.substring(0, 5) + (last == 'A' ? 'B' : 'A') + signature.substring(6);
    }

    static Clock fixed(Instant at) {
        return Clock.fixed(at, ZoneOffset.UTC);
    }
}
