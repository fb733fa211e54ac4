package openshell.policy;

import java.util.Objects;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * What the engine decided: allow, naming the rule that allowed it, or deny, with the cause, a
 * reason for a human and, when a deny rule refused it, that rule.
 */
public sealed interface Decision permits Decision.Allow, Decision.Deny {
    /** @return whether the request is allowed */
    boolean allowed();

    /** @return a one-line explanation for audit and {@code policy explain} */
    String reason();

    /**
     * An allow. Under an endpoint's {@code enforcement: audit} a request its rules would refuse is
     * allowed too, and {@link #wouldDeny} carries the denial it would have been: the supervisor
     * forwards it and writes that denial in the audit line.
     */
    final class Allow implements Decision {
        private final RuleRef rule;
        private final Inspection inspection;
        private final boolean hostDeclaredExactly;
        private final Deny wouldDeny;

        private Allow(RuleRef rule, Inspection inspection, boolean hostDeclaredExactly, Deny wouldDeny) {
            this.rule = Objects.requireNonNull(rule, "rule");
            this.inspection = Objects.requireNonNull(inspection, "inspection");
            this.hostDeclaredExactly = hostDeclaredExactly;
            this.wouldDeny = wouldDeny;
        }

        /**
         * @param rule                the rule (or endpoint) that allowed it
         * @param inspection          how the connection must be relayed
         * @param hostDeclaredExactly whether an allowing endpoint names this exact host or address
         *                            (what {@link AddressClass#permitted} needs for private addresses)
         * @return the allow
         */
        public static Allow of(RuleRef rule, Inspection inspection, boolean hostDeclaredExactly) {
            return new Allow(rule, inspection, hostDeclaredExactly, null);
        }

        static Allow audited(RuleRef endpoint, boolean hostDeclaredExactly, Deny wouldDeny) {
            return new Allow(endpoint, Inspection.HTTP, hostDeclaredExactly, Objects.requireNonNull(wouldDeny, "wouldDeny"));
        }

        /** @return the rule (or endpoint) that allowed it; for an audited request, its endpoint */
        public RuleRef rule() {
            return rule;
        }

        /** @return how the connection must be relayed */
        public Inspection inspection() {
            return inspection;
        }

        /** @return whether an allowing endpoint names this exact host or address */
        public boolean hostDeclaredExactly() {
            return hostDeclaredExactly;
        }

        /**
         * @return the denial an {@code enforcement: enforce} endpoint would have given: present only
         *         for a request forwarded under {@code enforcement: audit}
         */
        public Optional<Deny> wouldDeny() {
            return Optional.ofNullable(wouldDeny);
        }

        @Override
        public boolean allowed() {
            return true;
        }

        @Override
        public String reason() {
            if (wouldDeny != null) {
                return "audit: would be denied (" + wouldDeny.cause() + wouldDeny.rule().map(r -> " by " + r).orElse("")
                        + "): " + wouldDeny.reason() + "; forwarded because " + rule + " has enforcement: audit";
            }
            return "allowed by " + rule + (inspection == Inspection.HTTP ? "; HTTP requests inspected" : "");
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Allow a && a.rule.equals(rule) && a.inspection == inspection
                    && a.hostDeclaredExactly == hostDeclaredExactly && Objects.equals(a.wouldDeny, wouldDeny);
        }

        @Override
        public int hashCode() {
            return Objects.hash(rule, inspection, hostDeclaredExactly, wouldDeny);
        }

        @Override
        public String toString() {
            return "Allow[" + reason() + "]";
        }
    }

    /** A deny. */
    final class Deny implements Decision {
        private final DenyCause cause;
        private final RuleRef rule;
        /** Built on first use: most denials are counted, not read, and a reason costs more than the decision. */
        private final Supplier<String> reasonSource;
        private volatile String reason;

        private Deny(DenyCause cause, Supplier<String> reasonSource, RuleRef rule) {
            this.cause = Objects.requireNonNull(cause, "cause");
            this.reasonSource = Objects.requireNonNull(reasonSource, "reason");
            this.rule = rule;
        }

        private Deny(DenyCause cause, String reason, RuleRef rule) {
            this(cause, () -> reason, rule);
            this.reason = Objects.requireNonNull(reason, "reason");
        }

        static Deny lazily(DenyCause cause, Supplier<String> reason) {
            return new Deny(cause, reason, null);
        }

        /**
         * @param cause  why
         * @param reason a one-line explanation
         * @return a deny not tied to a rule (default deny, identity, address, malformed request)
         */
        public static Deny of(DenyCause cause, String reason) {
            return new Deny(cause, reason, null);
        }

        /**
         * @param rule   the deny rule that matched
         * @param reason a one-line explanation
         * @return a deny by that rule
         */
        public static Deny byRule(RuleRef rule, String reason) {
            return new Deny(DenyCause.DENY_RULE, reason, Objects.requireNonNull(rule, "rule"));
        }

        /** @return why */
        public DenyCause cause() {
            return cause;
        }

        @Override
        public boolean allowed() {
            return false;
        }

        @Override
        public String reason() {
            String r = reason;
            if (r == null) {
                r = Objects.requireNonNull(reasonSource.get(), "reason");
                reason = r;
            }
            return r;
        }

        /** @return the deny rule that refused, if one did */
        public Optional<RuleRef> rule() {
            return Optional.ofNullable(rule);
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Deny d && d.cause == cause && d.reason().equals(reason()) && Objects.equals(d.rule, rule);
        }

        @Override
        public int hashCode() {
            return Objects.hash(cause, reason(), rule);
        }

        @Override
        public String toString() {
            return "Deny[" + cause + ": " + reason() + "]";
        }
    }
}
