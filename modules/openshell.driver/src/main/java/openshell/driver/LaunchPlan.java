package openshell.driver;

import java.util.Map;
import java.util.Objects;
import java.util.regex.Pattern;

import openshell.isolation.SandboxContext;

/**
 * One launch of one sandbox, as admission decided it.
 *
 * @param context           the isolation context (ids, policy, agent, workload identity)
 * @param runtimeGeneration the launch's generation, positive, higher than any earlier launch's
 * @param material          the sealed per-launch secrets
 * @param options           driver options from trusted configuration or the operator's request
 *                          (e.g. {@code workspace}); each driver validates its own and rejects
 *                          unknown ones
 */
public record LaunchPlan(SandboxContext context, long runtimeGeneration, LaunchMaterial material,
                         Map<String, String> options) {
    /** Most options accepted. */
    public static final int MAX_OPTIONS = 32;
    private static final Pattern OPTION = Pattern.compile("[a-z][a-z0-9.-]{0,62}");

    /** Validates and copies. */
    public LaunchPlan {
        Objects.requireNonNull(context, "context");
        Objects.requireNonNull(material, "material");
        Objects.requireNonNull(options, "options");
        if (runtimeGeneration < 1) {
            throw DriverException.invalid("runtime generation must be positive: " + runtimeGeneration);
        }
        if (options.size() > MAX_OPTIONS) {
            throw DriverException.invalid("at most " + MAX_OPTIONS + " driver options, got " + options.size());
        }
        options.forEach((k, v) -> {
            if (k == null || v == null || !OPTION.matcher(k).matches()) {
                throw DriverException.invalid("invalid driver option name '" + k + "'");
            }
        });
        options = Map.copyOf(options);
    }
}
