package openshell.protocol;

import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

import openshell.protocol.wire.ConfirmRequest;
import openshell.protocol.wire.ConfirmResult;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class ControlLedgerTest {
    private static ConfirmRequest request(String id, String policy) {
        return RequestDigest.stamp(ConfirmRequest.newBuilder().setPolicyDigest(policy).build(), id);
    }

    @Test
    void replayReturnsRecordedOutcomeWithoutRunning() {
        ControlLedger ledger = new ControlLedger(1);
        AtomicInteger runs = new AtomicInteger();
        ConfirmResult first = ledger.execute(request("r", "p"), () -> ConfirmResult.newBuilder()
                .setConfirmed(runs.incrementAndGet() == 1).build());
        ConfirmResult again = ledger.execute(request("r", "p"), () -> ConfirmResult.newBuilder()
                .setConfirmed(runs.incrementAndGet() == 1).build());
        assertEquals(first, again);
        assertEquals(1, runs.get());
    }

    @Test
    void recordedRefusalIsReplayedToo() {
        ControlLedger ledger = new ControlLedger(1);
        AtomicInteger runs = new AtomicInteger();
        for (int i = 0; i < 2; i++) {
            ProtocolException refused = assertThrows(ProtocolException.class, () -> ledger.execute(request("r", "p"), () -> {
                runs.incrementAndGet();
                throw new ProtocolException(Refusal.EXEC_EXPIRED, "late");
            }));
            assertEquals(Refusal.EXEC_EXPIRED, refused.refusal());
        }
        assertEquals(1, runs.get());
    }

    @Test
    void sameIdOtherDigestIsRefusedAndChangesNothing() {
        ControlLedger ledger = new ControlLedger(1);
        ledger.execute(request("r", "p"), () -> ConfirmResult.getDefaultInstance());
        assertEquals(Refusal.DIGEST_MISMATCH, assertThrows(ProtocolException.class,
                () -> ledger.execute(request("r", "q"), () -> ConfirmResult.getDefaultInstance())).refusal());
        ConfirmRequest forged = request("s", "p").toBuilder().setPolicyDigest("q").build();
        assertEquals(Refusal.DIGEST_INVALID, assertThrows(ProtocolException.class,
                () -> ledger.execute(forged, () -> ConfirmResult.getDefaultInstance())).refusal());
        assertEquals(1, ledger.size());
    }

    @Test
    void capacityIsTheBoundAndTheOldestIsForgottenFirst() {
        ControlLedger ledger = new ControlLedger(1);
        AtomicInteger runs = new AtomicInteger();
        for (int i = 0; i < ProtocolLimits.LEDGER_CAPACITY; i++) {
            ledger.execute(request("r" + i, "p"), () -> {
                runs.incrementAndGet();
                return ConfirmResult.getDefaultInstance();
            });
        }
        assertEquals(ProtocolLimits.LEDGER_CAPACITY, ledger.size());
        ledger.execute(request("r0", "p"), ConfirmResult::getDefaultInstance);
        assertEquals(ProtocolLimits.LEDGER_CAPACITY, runs.get(), "r0 is still remembered at the bound");
        ledger.execute(request("overflow", "p"), ConfirmResult::getDefaultInstance);
        assertEquals(ProtocolLimits.LEDGER_CAPACITY, ledger.size());
        ledger.execute(request("r0", "p"), () -> {
            runs.incrementAndGet();
            return ConfirmResult.getDefaultInstance();
        });
        assertEquals(ProtocolLimits.LEDGER_CAPACITY + 1, runs.get(), "past the bound the oldest entry is gone");
    }
}
