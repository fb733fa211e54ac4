package openshell.protocol;

import java.time.Instant;
import java.util.Objects;

/**
 * The two tokens of one credential epoch, always minted and refreshed together.
 *
 * @param gatewayToken    the gateway-audience JWT
 * @param sandboxToken    the sandbox-audience JWT
 * @param credentialEpoch the epoch both carry
 * @param expiresAt       the expiry both carry
 */
public record TokenPair(String gatewayToken, String sandboxToken, long credentialEpoch, Instant expiresAt) {
    /**
     * Canonical constructor.
     *
     * @param gatewayToken    gateway token
     * @param sandboxToken    sandbox token
     * @param credentialEpoch epoch
     * @param expiresAt       expiry
     */
    public TokenPair {
        Objects.requireNonNull(gatewayToken);
        Objects.requireNonNull(sandboxToken);
        Objects.requireNonNull(expiresAt);
    }

    @Override
    public String toString() {
        // Tokens are bearer secrets: never in logs.
        return "TokenPair[epoch=" + credentialEpoch + ", expiresAt=" + expiresAt + "]";
    }
}
