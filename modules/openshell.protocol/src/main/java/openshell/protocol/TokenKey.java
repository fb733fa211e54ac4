package openshell.protocol;

import java.security.interfaces.ECPublicKey;
import java.util.Objects;

/**
 * A verification key of the token profiles: ES256 (P-256) public key and its key id.
 *
 * @param keyId     the {@code kid} header tokens must carry
 * @param publicKey the P-256 public key
 */
public record TokenKey(String keyId, ECPublicKey publicKey) {
    /**
     * Canonical constructor.
     *
     * @param keyId     key id
     * @param publicKey public key
     */
    public TokenKey {
        Objects.requireNonNull(keyId);
        Objects.requireNonNull(publicKey);
    }
}
