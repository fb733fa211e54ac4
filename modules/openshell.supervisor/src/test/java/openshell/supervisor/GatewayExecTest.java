package openshell.supervisor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/** The supervisor's per-exec flow control at its bounds. */
class GatewayExecTest {
    static final long WAIT_SECONDS = 60;

    @Test
    void outputStopsAtTheWindowUntilTheGatewayGrantsCredit() throws Exception {
        GatewayExec exec = new GatewayExec("e", 1000, 0);
        assertEquals(600, exec.awaitOutputCredit(600));
        assertEquals(400, exec.awaitOutputCredit(600), "only what is left of the window");
        CompletableFuture<Integer> blocked = CompletableFuture.supplyAsync(() -> {
            try {
                return exec.awaitOutputCredit(600);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        assertFalse(blocked.isDone(), "no credit, no output");
        exec.grantOutput(250);
        assertEquals(250, blocked.get(WAIT_SECONDS, TimeUnit.SECONDS));
        exec.grantOutput(5000);
        assertEquals(1000, exec.awaitOutputCredit(5000), "credit never exceeds the window");
    }

    @Test
    void closingWakesAWaitingPump() throws Exception {
        GatewayExec exec = new GatewayExec("e", 16, 0);
        assertEquals(16, exec.awaitOutputCredit(16));
        CompletableFuture<Integer> blocked = CompletableFuture.supplyAsync(() -> {
            try {
                return exec.awaitOutputCredit(1);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        exec.close();
        assertEquals(-1, blocked.get(WAIT_SECONDS, TimeUnit.SECONDS));
    }

    @Test
    void windowsDefaultCapAndRefuseAtTheirBounds() {
        assertEquals(GatewayExec.DEFAULT_OUTPUT_WINDOW, new GatewayExec("e", 0, 0).outputWindow());
        assertEquals(GatewayExec.DEFAULT_STDIN_WINDOW, new GatewayExec("e", 0, 0).stdinWindow());
        assertEquals(GatewayExec.MAX_OUTPUT_WINDOW, new GatewayExec("e", Integer.MAX_VALUE, 0).outputWindow());
        assertEquals(GatewayExec.MAX_STDIN_WINDOW, new GatewayExec("e", 0, GatewayExec.MAX_STDIN_WINDOW).stdinWindow());
        assertThrows(IllegalArgumentException.class, () -> new GatewayExec("e", 0, GatewayExec.MAX_STDIN_WINDOW + 1));
        assertThrows(IllegalArgumentException.class, () -> new GatewayExec("e", 0, -1), "unsigned: 4 GiB - 1");
    }

    @Test
    void stdinUpToTheWindowIsQueuedOneByteMoreIsAViolation() {
        GatewayExec exec = new GatewayExec("e", 0, 100);
        assertTrue(exec.offerStdin(new byte[60], false));
        assertTrue(exec.offerStdin(new byte[40], false), "exactly the window");
        assertFalse(exec.offerStdin(new byte[1], false), "one byte past the window");
    }

    @Test
    void stdinFlowsInOrderReturnsCreditPerChunkAndEndsWithTheHalfClose() throws Exception {
        GatewayExec exec = new GatewayExec("e", 0, 100);
        ByteArrayOutputStream written = new ByteArrayOutputStream();
        CompletableFuture<Boolean> closed = new CompletableFuture<>();
        exec.started(new GatewaySessionHandler.ExecControl() {
            @Override
            public void write(byte[] bytes) {
                written.writeBytes(bytes);
            }

            @Override
            public void close() {
                closed.complete(true);
            }

            @Override
            public void resize(int columns, int rows) {
            }

            @Override
            public void signal(int number) {
            }

            @Override
            public void terminate() {
            }
        });
        assertTrue(exec.offerStdin("abc".getBytes(), false));
        assertTrue(exec.offerStdin("de".getBytes(), true));
        List<Integer> credits = new CopyOnWriteArrayList<>();
        exec.pumpStdin(credits::add);
        assertEquals("abcde", written.toString());
        assertEquals(List.of(3, 2), credits);
        assertTrue(closed.get(WAIT_SECONDS, TimeUnit.SECONDS));
        assertTrue(exec.offerStdin(new byte[0], false), "an empty frame after the close is harmless");
        assertFalse(exec.offerStdin(new byte[1], false), "data after the close is a violation");
    }
}
