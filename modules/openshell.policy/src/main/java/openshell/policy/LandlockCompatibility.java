package openshell.policy;

/**
 * What the sandbox runtime does when the kernel cannot enforce the filesystem policy with Landlock.
 * The default, when the section is absent, is {@link #HARD_REQUIREMENT}: fail closed.
 */
public enum LandlockCompatibility {
    /** Apply what the kernel supports and start anyway (YAML {@code best_effort}). */
    BEST_EFFORT,
    /** Refuse to start the workload unless every rule is enforced (YAML {@code hard_requirement}). */
    HARD_REQUIREMENT
}
