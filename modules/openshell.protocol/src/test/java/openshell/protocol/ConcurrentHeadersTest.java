package openshell.protocol;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import org.junit.jupiter.api.Test;

import openshell.protocol.wire.ConfirmRequest;
import openshell.protocol.wire.ConfirmResult;
import openshell.protocol.wire.ExecRequest;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Many calls started at the same instant on a fresh link, over real TLS on a real socket: the
 * runtime's server compresses their response headers and trailers against one dynamic table, and
 * the supervisor's client decodes each on the call's own thread. Before the supervisor flattened
 * every header block on the connection's reader, a call whose headers referred to an entry that
 * another call's headers had not yet added failed, and took the link down ("Dynamic table does
 * not contain required header"): seen in CI while the sandbox image trained its cache. Every call
 * must come back with its own answer, on every link, and the link must stay up.
 */
class ConcurrentHeadersTest {
    /** Fresh links: the race is on the first blocks of a connection, when the table fills. */
    private static final int LINKS = 24;
    /** Calls started at once on each link. */
    private static final int CALLS = 64;

    @Test
    void callsStartedTogetherOnAFreshLinkAllGetTheirOwnAnswer() throws InterruptedException {
        for (int round = 0; round < LINKS; round++) {
            try (Launch launch = new Launch(Launch.Kind.UNIX, Initiator.RUNTIME);
                 SupervisorLink link = launch.attached();
                 ExecutorService threads = Executors.newVirtualThreadPerTaskExecutor()) {
                CountDownLatch go = new CountDownLatch(1);
                List<Future<String>> calls = new ArrayList<>();
                for (int i = 0; i < CALLS; i++) {
                    String id = "r" + round + "-c" + i;
                    boolean refused = i % 3 == 0;
                    calls.add(threads.submit(() -> {
                        go.await();
                        if (refused) {
                            // An exec without an admission deadline is refused: its trailers carry a status and a message.
                            try {
                                Launch.blocking(link).exec(RequestDigest.stamp(ExecRequest.getDefaultInstance(), id));
                                return "admitted";
                            } catch (StatusRuntimeException e) {
                                return e.getStatus().getCode().name();
                            }
                        }
                        ConfirmResult result = Launch.blocking(link).confirm(RequestDigest.stamp(
                                ConfirmRequest.newBuilder().setPolicyDigest("digest-" + id).build(), id));
                        return result.getConfirmed() ? "confirmed" : "not confirmed";
                    }));
                }
                go.countDown();
                for (int i = 0; i < CALLS; i++) {
                    String answer;
                    try {
                        answer = calls.get(i).get();
                    } catch (ExecutionException e) {
                        fail("round " + round + ", call " + i + " failed: " + e.getCause(), e.getCause());
                        return;
                    }
                    String expected = i % 3 == 0 ? Status.Code.FAILED_PRECONDITION.name() : "confirmed";
                    assertEquals(expected, answer, "round " + round + ", call " + i);
                }
                assertTrue(link.isOpen(), "round " + round + ": the link is still up after its calls");
            }
        }
    }
}
