package openshell.protocol;

import java.time.Clock;
import java.util.Objects;

/**
 * The supervisor's holder of the current token pair. It never hands out an expired token
 * (fails closed instead) and never goes back to a lower or equal epoch.
 */
public final class TokenSlot {
    private final Clock clock;
    private volatile TokenPair pair;

    /**
     * A slot holding its first pair.
     *
     * @param first the first pair
     * @param clock the clock expiry is judged by
     */
    public TokenSlot(TokenPair first, Clock clock) {
        this.pair = Objects.requireNonNull(first);
        this.clock = Objects.requireNonNull(clock);
    }

    /**
     * Replaces the pair with one of a strictly higher epoch.
     *
     * @param next the refreshed pair
     */
    public synchronized void refresh(TokenPair next) {
        if (next.credentialEpoch() <= pair.credentialEpoch()) {
            throw new ProtocolException(Refusal.TOKEN_STALE_EPOCH, "refresh epoch " + next.credentialEpoch()
                    + " is not above " + pair.credentialEpoch());
        }
        pair = next;
    }

    /**
     * The current pair, if it has not expired.
     *
     * @return the pair
     * @throws ProtocolException {@link Refusal#TOKEN_EXPIRED} if it has
     */
    public TokenPair current() {
        TokenPair now = pair;
        if (!clock.instant().isBefore(now.expiresAt())) {
            throw new ProtocolException(Refusal.TOKEN_EXPIRED, "token pair of epoch " + now.credentialEpoch()
                    + " expired; refresh it");
        }
        return now;
    }
}
