package openshell.policy;

import java.util.List;

/**
 * The one unchecked exception of the policy module: a policy document or a request to the engine
 * was refused. A policy with any problem is rejected whole, so this carries every problem found,
 * never just the first.
 */
public final class PolicyException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** Serialization keeps the message only; the problems are for the caller in this process. */
    private final transient List<PolicyProblem> problems;

    /**
     * @param problems every problem found (copied, at least one)
     */
    public PolicyException(List<PolicyProblem> problems) {
        super(summary(problems));
        this.problems = List.copyOf(problems);
    }

    /**
     * @param message one problem with the request as a whole
     */
    public PolicyException(String message) {
        this(List.of(new PolicyProblem("$", 0, 0, message)));
    }

    /** @return every problem, in document order */
    public List<PolicyProblem> problems() {
        return problems == null ? List.of() : problems;
    }

    private static String summary(List<PolicyProblem> problems) {
        if (problems.isEmpty()) {
            throw new IllegalArgumentException("a policy exception needs at least one problem");
        }
        StringBuilder s = new StringBuilder("policy rejected with ").append(problems.size())
                .append(problems.size() == 1 ? " problem" : " problems");
        int shown = 0;
        for (PolicyProblem p : problems) {
            if (shown++ == 10) {
                s.append("\n  ...");
                break;
            }
            s.append("\n  ").append(p);
        }
        return s.toString();
    }
}
