package openshell.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import io.grpc.stub.StreamObserver;
import openshell.protocol.exec.ExecClientFrame;
import openshell.protocol.exec.ExecServerFrame;
import openshell.protocol.exec.ExecStart;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The streamed exec's authentication: without the API token in the first frame nothing is looked
 * up and nothing runs (the sandbox lookup and the sessions are absent here, so touching them would
 * fail the test).
 */
class ExecEndpointTest {
    @TempDir
    Path state;

    static final class Recorder implements StreamObserver<ExecServerFrame> {
        final List<ExecServerFrame> frames = new CopyOnWriteArrayList<>();
        volatile boolean completed;

        @Override
        public void onNext(ExecServerFrame f) {
            frames.add(f);
        }

        @Override
        public void onError(Throwable t) {
        }

        @Override
        public void onCompleted() {
            completed = true;
        }
    }

    private List<ExecServerFrame> startWith(String token) {
        ExecEndpoint endpoint = new ExecEndpoint(null, null, ApiToken.loadOrCreate(state));
        Recorder out = new Recorder();
        endpoint.exec(out).onNext(ExecClientFrame.newBuilder().setStart(ExecStart.newBuilder().setApiToken(token)
                .setSandbox("anything").addArgv("/bin/true")).build());
        assertTrue(out.completed, "the stream is ended");
        return out.frames;
    }

    @Test
    void aStartWithoutTheTokenIsRefusedBeforeAnythingIsLookedUp() throws Exception {
        assertTrue(startWith("").getFirst().getError().startsWith("UNAUTHENTICATED"));
        String real = Files.readString(state.resolve(ApiToken.FILE)).strip();
        assertTrue(startWith(real + "x").getFirst().getError().startsWith("UNAUTHENTICATED"), "a near miss");
        assertEquals(1, startWith("wrong").size());
    }

    private List<ExecServerFrame> forward(ExecStart.Builder start) {
        ExecEndpoint endpoint = new ExecEndpoint(null, null, ApiToken.loadOrCreate(state));
        Recorder out = new Recorder();
        String real;
        try {
            real = Files.readString(state.resolve(ApiToken.FILE)).strip();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        endpoint.exec(out).onNext(ExecClientFrame.newBuilder().setStart(start.setApiToken(real).setSandbox("anything"))
                .build());
        assertTrue(out.completed, "the stream is ended");
        return out.frames;
    }

    /** A forward past the port range, or one that also names something to run, is refused before any lookup. */
    @Test
    void aBadForwardIsRefusedBeforeAnythingIsLookedUp() {
        String beyond = forward(ExecStart.newBuilder().setForwardPort(ExecEndpoint.MAX_PORT + 1)).getFirst().getError();
        assertTrue(beyond.startsWith("INVALID: forward port out of range 1..65535: 65536"), beyond);
        String both = forward(ExecStart.newBuilder().setForwardPort(ExecEndpoint.MAX_PORT).addArgv("/bin/sh"))
                .getFirst().getError();
        assertTrue(both.startsWith("INVALID: a forward runs nothing"), both);
        String terminal = forward(ExecStart.newBuilder().setForwardPort(80).setTerminal(
                openshell.protocol.exec.TerminalSize.newBuilder().setColumns(80).setRows(24))).getFirst().getError();
        assertTrue(terminal.startsWith("INVALID: a forward runs nothing"), terminal);
    }

    @Test
    void aFirstFrameThatIsNotAStartEndsTheStream() {
        ExecEndpoint endpoint = new ExecEndpoint(null, null, ApiToken.loadOrCreate(state));
        Recorder out = new Recorder();
        endpoint.exec(out).onNext(ExecClientFrame.newBuilder().setStdinClose(true).build());
        assertTrue(out.completed);
        assertTrue(out.frames.getFirst().getError().contains("ExecStart"));
    }
}
