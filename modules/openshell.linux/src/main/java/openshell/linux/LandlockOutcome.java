package openshell.linux;

/**
 * What the launcher enforced with Landlock, reported to the parent before the target runs, so a
 * best-effort downgrade is never silent.
 *
 * @param abi         the kernel's Landlock ABI (0 if absent)
 * @param requestedFs the file-system rights the plan asked to handle
 * @param handledFs   the rights actually handled (denied unless granted)
 * @param requestedScopes the scopes asked for
 * @param scopes      the scopes actually enforced
 * @param enforced    whether a ruleset was enforced at all
 */
public record LandlockOutcome(int abi, long requestedFs, long handledFs, long requestedScopes, long scopes,
                              boolean enforced) {
    /** @return whether everything the plan asked for is enforced */
    public boolean complete() {
        return enforced && handledFs == requestedFs && scopes == requestedScopes;
    }
}
