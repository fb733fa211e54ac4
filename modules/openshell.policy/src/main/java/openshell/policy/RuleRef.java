package openshell.policy;

import java.util.Objects;

/**
 * The policy element a decision rests on, named so it can be audited, shown in a 403 body,
 * compared across generations and used to scope credentials to an endpoint.
 *
 * @param block       the {@code network_policies} block name
 * @param endpoint    the endpoint's index in the block's {@code endpoints}
 * @param hostPattern the endpoint's host as written
 * @param kind        which part of the endpoint
 * @param index       the rule's index in its list ({@code rules} or {@code deny_rules}); 0 otherwise
 * @param path        the YAML path, e.g. {@code network_policies.github.endpoints[0].rules[2]}
 * @param line        1-based line in the policy document
 * @param description a short human form, e.g. {@code GET /repos/**} or {@code tcp api.example.com:[443]}
 */
public record RuleRef(String block, int endpoint, String hostPattern, Kind kind, int index, String path, int line,
                      String description) {
    /** Which part of an endpoint decided. */
    public enum Kind {
        /** The endpoint itself: a {@code tcp} endpoint, or the admission of a {@code rest} connection. */
        ENDPOINT,
        /** The endpoint's {@code access} preset. */
        ACCESS,
        /** One of the endpoint's {@code rules}. */
        RULE,
        /** One of the endpoint's {@code deny_rules}. */
        DENY_RULE
    }

    /** Rejects nulls. */
    public RuleRef {
        Objects.requireNonNull(block, "block");
        Objects.requireNonNull(hostPattern, "hostPattern");
        Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(path, "path");
        Objects.requireNonNull(description, "description");
    }

    @Override
    public String toString() {
        return path + " (" + description + ", line " + line + ")";
    }
}
