package openshell.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import com.google.protobuf.ByteString;
import openshell.protocol.wire.GatewayMessage;
import openshell.protocol.wire.RemoteExecEvent;
import org.junit.jupiter.api.Test;

/** The gateway's per-exec windows on the session hop, at their bounds (the session is a recorder). */
class SessionExecTest {
    private final List<GatewayMessage> sent = new CopyOnWriteArrayList<>();
    private final SessionExec exec = new SessionExec("e1", sent::add);

    private static RemoteExecEvent stdout(int bytes) {
        return RemoteExecEvent.newBuilder().setExecId("e1").setStdout(ByteString.copyFrom(new byte[bytes])).build();
    }

    @Test
    void outputUpToTheWindowIsHeldOneByteMoreLosesAndTerminatesTheExec() throws Exception {
        assertTrue(exec.deliver(stdout(SessionExec.OUTPUT_WINDOW - 1)));
        assertTrue(exec.deliver(stdout(1)), "exactly the window");
        assertFalse(exec.deliver(stdout(1)), "one byte past the window");
        assertTrue(sent.getLast().getExecControl().getTerminate(), "the exec is terminated");
        assertEquals(SessionExec.OUTPUT_WINDOW - 1, exec.next(Duration.ZERO).orElseThrow().getStdout().size());
        assertEquals(1, exec.next(Duration.ZERO).orElseThrow().getStdout().size());
        assertTrue(exec.next(Duration.ZERO).orElseThrow().getError().contains("window"), "then the reason");
    }

    @Test
    void grantedOutputMakesRoomAgainAndIsForwardedAsCredit() {
        assertTrue(exec.deliver(stdout(SessionExec.OUTPUT_WINDOW)));
        exec.grantOutput(10);
        assertEquals(10, sent.getLast().getExecControl().getOutputCredit());
        assertTrue(exec.deliver(stdout(10)), "room for what was passed on");
        assertFalse(exec.deliver(stdout(1)));
    }

    /**
     * Seen in CI: the agent ended, the supervisor sent an exec's output and exit, and the session
     * ended before the relay passed the output on. Granting its credit then threw, and the caller
     * got neither the exit nor another frame.
     */
    @Test
    void outputCreditAfterTheSessionEndedIsDroppedAndTheQueuedExitStillComes() throws Exception {
        java.util.concurrent.atomic.AtomicBoolean ended = new java.util.concurrent.atomic.AtomicBoolean();
        SessionExec late = new SessionExec("e2", m -> {
            if (ended.get()) {
                throw new GatewayException(GatewayException.Reason.UNAVAILABLE, "the session ended");
            }
        });
        assertTrue(late.deliver(RemoteExecEvent.newBuilder().setExecId("e2")
                .setStdout(ByteString.copyFromUtf8("before")).build()));
        assertTrue(late.deliver(RemoteExecEvent.newBuilder().setExecId("e2").setExitCode(5).build()));
        ended.set(true);
        late.lose("the sandbox's supervisor is gone");
        assertEquals("before", late.next(Duration.ZERO).orElseThrow().getStdout().toStringUtf8());
        late.grantOutput(6);
        assertEquals(5, late.next(Duration.ZERO).orElseThrow().getExitCode(), "the exit, not the loss");
    }

    @Test
    void emptyOutputIsDroppedSoTheQueueHoldsAtMostOneEventPerByte() throws Exception {
        assertTrue(exec.deliver(stdout(0)));
        assertTrue(exec.next(Duration.ZERO).isEmpty());
    }

    @Test
    void stdinUpToTheWindowIsSentMoreIsRefusedUntilCreditComesBack() {
        exec.stdin(new byte[SessionExec.STDIN_WINDOW], false);
        GatewayException e = assertThrows(GatewayException.class, () -> exec.stdin(new byte[1], false));
        assertEquals(GatewayException.Reason.INVALID, e.reason());
        int pieces = SessionExec.STDIN_WINDOW / SessionExec.MAX_STDIN_PIECE;
        assertEquals(pieces, sent.size(), "the refused stdin was not sent");
        exec.deliver(RemoteExecEvent.newBuilder().setExecId("e1").setStdinCredit(1).build());
        exec.stdin(new byte[1], true);
        assertTrue(sent.getLast().getExecInput().getClose());
        assertThrows(GatewayException.class, () -> exec.stdin(new byte[0], false), "nothing after the close");
    }

    @Test
    void stdinGoesOutInPiecesThatFitOneFrameAndOnlyTheLastCarriesTheClose() {
        exec.stdin(new byte[SessionExec.MAX_STDIN_PIECE + 1], true);
        assertEquals(2, sent.size());
        assertEquals(SessionExec.MAX_STDIN_PIECE, sent.get(0).getExecInput().getData().size());
        assertEquals(1, sent.get(1).getExecInput().getData().size());
        assertFalse(sent.get(0).getExecInput().getClose());
        assertTrue(sent.get(1).getExecInput().getClose());
    }

    @Test
    void terminateAfterTheExitSendsNothing() throws Exception {
        exec.deliver(RemoteExecEvent.newBuilder().setExecId("e1").setExitCode(0).build());
        exec.terminate();
        assertTrue(sent.isEmpty());
        exec.deliver(stdout(5));
        assertEquals(0, exec.next(Duration.ZERO).map(RemoteExecEvent::getExitCode).orElseThrow());
    }
}
