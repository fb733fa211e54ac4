package openshell.protocol;

import java.time.Instant;
import java.util.Objects;

/**
 * The claims of a verified (or about to be minted) protocol token. The set is closed: a
 * token with any other claim is refused.
 *
 * @param issuer            {@code iss}
 * @param audience          {@code aud}
 * @param sandboxId         {@code sandbox_id}; the subject is {@code spiffe://openshell/sandbox/<id>}
 * @param runtimeGeneration {@code runtime_generation}
 * @param sessionLineage    {@code session_lineage}
 * @param credentialEpoch   {@code credential_epoch}, greater than zero
 * @param component         {@code component}, the caller's role (e.g. {@code supervisor})
 * @param issuedAt          {@code iat}
 * @param expiresAt         {@code exp}
 * @param tokenId           {@code jti}
 */
public record TokenClaims(String issuer,
                          TokenAudience audience,
                          String sandboxId,
                          long runtimeGeneration,
                          String sessionLineage,
                          long credentialEpoch,
                          String component,
                          Instant issuedAt,
                          Instant expiresAt,
                          String tokenId) {
    /**
     * Canonical constructor.
     *
     * @param issuer            issuer
     * @param audience          audience
     * @param sandboxId         sandbox id
     * @param runtimeGeneration runtime generation
     * @param sessionLineage    session lineage
     * @param credentialEpoch   credential epoch
     * @param component         component
     * @param issuedAt          issued at
     * @param expiresAt         expiry
     * @param tokenId           unique id
     */
    public TokenClaims {
        Objects.requireNonNull(issuer);
        Objects.requireNonNull(audience);
        Objects.requireNonNull(sandboxId);
        Objects.requireNonNull(sessionLineage);
        Objects.requireNonNull(component);
        Objects.requireNonNull(issuedAt);
        Objects.requireNonNull(expiresAt);
        Objects.requireNonNull(tokenId);
    }

    /**
     * The SPIFFE subject of a sandbox.
     *
     * @param sandboxId the sandbox
     * @return {@code spiffe://openshell/sandbox/<id>}
     */
    public static String subjectOf(String sandboxId) {
        return "spiffe://openshell/sandbox/" + sandboxId;
    }
}
