package openshell.policy;

import java.util.Objects;
import openshell.isolation.IdentityResolution;

/**
 * A connection that some generation admitted, kept by the supervisor with its relay so that a new
 * generation can {@linkplain PolicyGeneration#recheck re-check} it and the relay be closed if it is
 * no longer allowed.
 *
 * @param identity    who opened it
 * @param destination where to
 * @param decision    the allow it was admitted under
 */
public record Admission(IdentityResolution identity, Destination destination, Decision.Allow decision) {
    /** Rejects nulls. */
    public Admission {
        Objects.requireNonNull(identity, "identity");
        Objects.requireNonNull(destination, "destination");
        Objects.requireNonNull(decision, "decision");
    }
}
