package openshell.protocol;

import java.time.Duration;
import java.util.Objects;

/**
 * What a gateway grants one launch: the binding every token of the pair carries.
 *
 * @param sandboxId         the sandbox
 * @param runtimeGeneration the runtime generation
 * @param sessionLineage    the session lineage
 * @param component         the holder's role (e.g. {@code supervisor})
 * @param lifetime          token lifetime, within the profile's bounds
 */
public record TokenGrant(String sandboxId, long runtimeGeneration, String sessionLineage, String component,
                         Duration lifetime) {
    /**
     * Canonical constructor; refuses a lifetime outside the profile.
     *
     * @param sandboxId         sandbox
     * @param runtimeGeneration generation
     * @param sessionLineage    lineage
     * @param component         component
     * @param lifetime          lifetime
     */
    public TokenGrant {
        Objects.requireNonNull(sandboxId);
        Objects.requireNonNull(sessionLineage);
        Objects.requireNonNull(component);
        Objects.requireNonNull(lifetime);
        if (lifetime.compareTo(ProtocolLimits.TOKEN_MIN_LIFETIME) < 0
                || lifetime.compareTo(ProtocolLimits.TOKEN_MAX_LIFETIME) > 0) {
            throw new ProtocolException(Refusal.TOKEN_BAD_LIFETIME, "lifetime " + lifetime + " outside ["
                    + ProtocolLimits.TOKEN_MIN_LIFETIME + ", " + ProtocolLimits.TOKEN_MAX_LIFETIME + "]");
        }
    }
}
