package openshell.supervisor;

import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;

import openshell.policy.Decision;
import openshell.policy.DenyCause;
import openshell.policy.Policy;
import openshell.policy.PolicyException;
import openshell.policy.PolicyGeneration;
import openshell.policy.PolicyProblem;

/**
 * The sandbox's effective policy: one atomically swapped reference, so every decision sees exactly
 * one generation. A reload is validated whole before it can become effective; an invalid update
 * either keeps the last valid generation or, when configured, denies everything until a valid one
 * arrives. Listeners (the relay registry) re-check live connections after every change.
 */
final class PolicyInstallation {
    /** What an invalid update does to the effective policy. */
    enum OnInvalid {
        /** The last valid generation stays effective. */
        KEEP_LAST_VALID,
        /** Nothing is allowed until a valid policy is loaded; live relays are closed. */
        DENY_ALL_UNTIL_VALID
    }

    /** The effective state: a generation, or deny-all after an invalid update (lastValid kept for succession). */
    private record State(PolicyGeneration lastValid, boolean denyAll, String denyReason) {
    }

    private final OnInvalid onInvalid;
    private final AtomicReference<State> state;
    private final List<Consumer<Optional<PolicyGeneration>>> listeners = new CopyOnWriteArrayList<>();

    PolicyInstallation(PolicyGeneration first, OnInvalid onInvalid) {
        this.onInvalid = onInvalid;
        this.state = new AtomicReference<>(new State(first, false, ""));
    }

    /** @return the effective generation, or empty while everything is denied */
    Optional<PolicyGeneration> current() {
        State s = state.get();
        return s.denyAll ? Optional.empty() : Optional.of(s.lastValid);
    }

    /** @return the generation number decisions are audited under (0 while deny-all) */
    long number() {
        State s = state.get();
        return s.denyAll ? 0 : s.lastValid.number();
    }

    /** The denial every question gets while no policy is effective. */
    Decision.Deny denyAll() {
        return Decision.Deny.of(DenyCause.NO_ENDPOINT, "no policy is in force: the last update was invalid ("
                + state.get().denyReason + ")");
    }

    void onChange(Consumer<Optional<PolicyGeneration>> listener) {
        listeners.add(listener);
    }

    /**
     * Validates the document whole and installs it as the next generation.
     *
     * @param document the new policy, YAML
     * @return LOADED or FAILED with every reason
     */
    synchronized ReloadReport reload(byte[] document) {
        State before = state.get();
        PolicyGeneration next;
        try {
            next = before.lastValid.successor(Policy.parse(document));
        } catch (PolicyException e) {
            List<String> reasons = e.problems().isEmpty() ? List.of(e.getMessage())
                    : e.problems().stream().map(PolicyProblem::toString).toList();
            if (onInvalid == OnInvalid.DENY_ALL_UNTIL_VALID) {
                state.set(new State(before.lastValid, true, reasons.getFirst()));
                notifyListeners();
                return new ReloadReport(ReloadReport.Outcome.FAILED, 0, reasons);
            }
            return new ReloadReport(ReloadReport.Outcome.FAILED, number(), reasons);
        }
        state.set(new State(next, false, ""));
        notifyListeners();
        return new ReloadReport(ReloadReport.Outcome.LOADED, next.number(), List.of());
    }

    private void notifyListeners() {
        Optional<PolicyGeneration> now = current();
        listeners.forEach(l -> l.accept(now));
    }
}
