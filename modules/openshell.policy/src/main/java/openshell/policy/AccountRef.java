package openshell.policy;

/**
 * A user or group the workload runs as, written in the policy as a number or a name. Root is
 * refused at the type: id 0 and the name {@code root} are invalid, so no launcher can be handed a
 * root workload from a policy.
 */
public sealed interface AccountRef {
    /**
     * A numeric id.
     *
     * @param value 1 or more
     */
    record Id(int value) implements AccountRef {
        /** Refuses 0 and negative ids. */
        public Id {
            if (value < 1) {
                throw new PolicyException("an account id must be positive (never root): " + value);
            }
        }
    }

    /**
     * A name the launcher resolves inside the workload's image.
     *
     * @param value a POSIX account name, never {@code root}
     */
    record Name(String value) implements AccountRef {
        /** Refuses malformed names and root. */
        public Name {
            if (value == null || !value.matches("[a-z_][a-z0-9_-]{0,31}") || value.equals("root")) {
                throw new PolicyException("an account name must match [a-z_][a-z0-9_-]{0,31} and not be root: " + value);
            }
        }
    }
}
