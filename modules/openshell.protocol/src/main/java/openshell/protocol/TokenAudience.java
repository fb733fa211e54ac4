package openshell.protocol;

/**
 * The two JWT profiles a gateway mints per launch. The same supervisor holds both; each
 * verifier accepts exactly one audience, so a token shown to the gateway is useless to a
 * sandbox runtime and the other way round.
 */
public enum TokenAudience {
    /** Presented by the supervisor to the gateway. */
    GATEWAY("openshell-gateway"),
    /** Presented by the supervisor to the sandbox runtime on every RPC and stream. */
    SANDBOX("openshell-sandbox");

    private final String claim;

    TokenAudience(String claim) {
        this.claim = claim;
    }

    /**
     * The {@code aud} claim value.
     *
     * @return the claim value
     */
    public String claim() {
        return claim;
    }
}
