package openshell.protocol;

import java.util.Objects;

/**
 * What the sandbox runtime learns from its launch bundle, validated: the ids, its TLS server
 * identity and the gateway's verification key. Deliberately nothing else: the runtime lives next
 * to the workload, so it holds no token, no policy and no credential.
 *
 * @param sandboxId       the sandbox
 * @param sessionId       the session (its TLS server name derives from it)
 * @param generation      the runtime generation
 * @param sessionLineage  the session lineage every bearer token must carry
 * @param tokenIssuer     the {@code iss} every bearer token must carry
 * @param verificationKey the gateway's token verification key
 * @param identity        the runtime's TLS server identity
 * @param workloadUid     the user id workload processes run as (never 0)
 * @param workloadGid     the group id workload processes run as (never 0)
 */
public record RuntimeBundle(String sandboxId, String sessionId, long generation, String sessionLineage, String tokenIssuer,
                            TokenKey verificationKey, RuntimeTlsIdentity identity, int workloadUid, int workloadGid) {
    /** The component every supervisor token is minted for. */
    public static final String SUPERVISOR_COMPONENT = "supervisor";

    /**
     * Canonical constructor.
     *
     * @param sandboxId       sandbox
     * @param sessionId       session
     * @param generation      generation
     * @param sessionLineage  lineage
     * @param tokenIssuer     issuer
     * @param verificationKey key
     * @param identity        TLS identity
     * @param workloadUid     workload uid
     * @param workloadGid     workload gid
     */
    public RuntimeBundle {
        Objects.requireNonNull(sandboxId);
        Objects.requireNonNull(sessionId);
        Objects.requireNonNull(sessionLineage);
        Objects.requireNonNull(tokenIssuer);
        Objects.requireNonNull(verificationKey);
        Objects.requireNonNull(identity);
    }

    /**
     * The verifier of the supervisor's sandbox-audience tokens for this launch.
     *
     * @return a fresh verifier (it tracks the highest accepted epoch)
     */
    public TokenVerifier verifier() {
        return TokenVerifier.builder().key(verificationKey).issuer(tokenIssuer).audience(TokenAudience.SANDBOX)
                .sandboxId(sandboxId).runtimeGeneration(generation).sessionLineage(sessionLineage)
                .component(SUPERVISOR_COMPONENT).build();
    }

    @Override
    public String toString() {
        return "RuntimeBundle[sandbox=" + sandboxId + ", session=" + sessionId + ", generation=" + generation
                + ", lineage=" + sessionLineage + ", key=" + verificationKey.keyId() + ", workload=" + workloadUid + ":" + workloadGid + "]";
    }
}
