package openshell.isolation;

/**
 * The outcome of resolving who made a request: an identity, or the reason there is none. An
 * unresolved identity can only be denied.
 */
public sealed interface IdentityResolution {
    /**
     * The caller was identified.
     *
     * @param identity who
     */
    record Resolved(BinaryIdentity identity) implements IdentityResolution {
        /** Rejects null. */
        public Resolved {
            BackendException.require(identity, "identity");
        }
    }

    /**
     * The caller could not be identified.
     *
     * @param reason why, for audit
     */
    record Unresolved(String reason) implements IdentityResolution {
        /** Rejects null or blank. */
        public Unresolved {
            BackendException.require(reason, "reason");
            if (reason.isBlank()) {
                throw BackendException.invalid("an unresolved identity needs a reason");
            }
        }
    }
}
