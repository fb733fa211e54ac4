package openshell.supervisor;

import java.util.List;

/**
 * What a policy reload did: LOADED with the new generation, or FAILED with every reason (the
 * effective policy is then unchanged, or deny-all when so configured).
 *
 * @param outcome    LOADED or FAILED
 * @param generation the effective generation number after the reload (0 while deny-all)
 * @param reasons    why it failed, one per problem; empty when loaded
 */
record ReloadReport(Outcome outcome, long generation, List<String> reasons) {
    /** The result of a reload. */
    enum Outcome {
        LOADED,
        FAILED
    }

    ReloadReport {
        reasons = List.copyOf(reasons);
    }
}
