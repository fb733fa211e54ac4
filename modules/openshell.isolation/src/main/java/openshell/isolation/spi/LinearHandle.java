package openshell.isolation.spi;

import java.util.concurrent.atomic.AtomicReference;

import openshell.isolation.BackendException;

/**
 * The consumed-once state every typestate handle needs: live until one transition succeeds,
 * then rejecting every call. A failed transition leaves the handle live, because an error never
 * advances state.
 */
public final class LinearHandle {
    private final String name;
    private final AtomicReference<State> state = new AtomicReference<>(State.LIVE);

    private enum State { LIVE, TRANSITIONING, CONSUMED }

    /** @param name what the handle is, for error messages ({@code "bound boundary"}) */
    public LinearHandle(String name) {
        this.name = name;
    }

    /**
     * Throws unless the handle is live and no transition is running.
     *
     * @throws BackendException INVALID if consumed or mid-transition
     */
    public void checkLive() {
        State s = state.get();
        if (s != State.LIVE) {
            throw new BackendException(BackendException.Kind.INVALID, name + " is "
                    + (s == State.CONSUMED ? "consumed" : "in a transition") + "; use the handle its transition returned");
        }
    }

    /**
     * Runs a transition that consumes the handle if, and only if, it returns normally.
     *
     * @param transition the step
     * @param <T>        the next handle
     * @return what the transition returned
     * @throws BackendException INVALID if the handle is not live; whatever the transition throws
     */
    public <T> T transition(java.util.function.Supplier<T> transition) {
        if (!state.compareAndSet(State.LIVE, State.TRANSITIONING)) {
            // Not live, or it was mid-transition a moment ago: either way this call must not run.
            State s = state.get();
            throw new BackendException(BackendException.Kind.INVALID, name + " is "
                    + (s == State.CONSUMED ? "consumed" : "in a transition") + "; use the handle its transition returned");
        }
        boolean done = false;
        try {
            T next = transition.get();
            done = true;
            return next;
        } finally {
            state.set(done ? State.CONSUMED : State.LIVE);
        }
    }

    /** Consumes the handle without a successor (the boundary was terminated). */
    public void consume() {
        state.set(State.CONSUMED);
    }

    /** @return whether the handle still accepts calls */
    public boolean live() {
        return state.get() == State.LIVE;
    }
}
