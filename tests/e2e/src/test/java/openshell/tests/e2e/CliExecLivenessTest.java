package openshell.tests.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import com.google.protobuf.ByteString;
import io.grpc.stub.StreamObserver;
import io.helidon.webserver.WebServer;
import io.helidon.webserver.grpc.GrpcRouting;
import openshell.protocol.exec.ExecClientFrame;
import openshell.protocol.exec.ExecServerFrame;
import openshell.protocol.exec.ExecStarted;
import openshell.protocol.exec.SandboxExecGrpc;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The CLI's side of the streamed exec's liveness, against a gateway stand-in on a real socket (the
 * real gateway's heartbeats are {@code CliExecStreamTest}'s): a gateway that announced heartbeats
 * and then goes silent is given up after {@code ExecStream.MAX_MISSED_HEARTBEATS} of them, with a
 * clear error and the stream ended from the CLI's side (so a real gateway terminates the command);
 * one that keeps sending them is waited for however long the command runs.
 */
class CliExecLivenessTest {
    /** The stand-in's announced interval: short, so six missed ones take about a second. */
    static final int HEARTBEAT_MILLIS = 200;

    @TempDir
    Path state;

    private WebServer server;

    @AfterEach
    void stop() {
        if (server != null) {
            server.stop();
        }
    }

    /**
     * Starts the stand-in and writes the state a CLI finds a gateway by.
     *
     * @param beats heartbeats it sends after the start, {@link #HEARTBEAT_MILLIS} apart, then an
     *              exit of 0; negative: none, and no exit ever
     * @param ended completed when the CLI ends the stream from its side
     */
    private void gateway(int beats, CompletableFuture<String> ended) throws Exception {
        SandboxExecGrpc.SandboxExecImplBase exec = new SandboxExecGrpc.SandboxExecImplBase() {
            @Override
            public StreamObserver<ExecClientFrame> exec(StreamObserver<ExecServerFrame> out) {
                return new StreamObserver<>() {
                    @Override
                    public void onNext(ExecClientFrame f) {
                        if (!f.hasStart()) {
                            return;
                        }
                        out.onNext(ExecServerFrame.newBuilder().setStarted(ExecStarted.newBuilder().setStdinWindow(16 * 1024)
                                .setOutputWindow(f.getStart().getOutputWindow()).setHeartbeatMillis(HEARTBEAT_MILLIS)).build());
                        out.onNext(ExecServerFrame.newBuilder().setStdout(ByteString.copyFromUtf8("started\n")).build());
                        if (beats >= 0) {
                            Thread.ofVirtual().start(() -> {
                                try {
                                    for (int i = 0; i < beats; i++) {
                                        Thread.sleep(HEARTBEAT_MILLIS);
                                        out.onNext(ExecServerFrame.newBuilder().setHeartbeat(true).build());
                                    }
                                    out.onNext(ExecServerFrame.newBuilder().setExitCode(0).build());
                                    out.onCompleted();
                                } catch (InterruptedException | RuntimeException e) {
                                    ended.complete("the stand-in failed: " + e);
                                }
                            });
                        }
                    }

                    @Override
                    public void onError(Throwable t) {
                        ended.complete("error: " + t);
                    }

                    @Override
                    public void onCompleted() {
                        ended.complete("half-closed");
                    }
                };
            }
        };
        server = WebServer.builder().host("127.0.0.1").port(0).addRouting(GrpcRouting.builder().service(exec)).build().start();
        Files.writeString(state.resolve("gateway.json"), "{\"url\":\"http://127.0.0.1:" + server.port() + "\",\"pid\":"
                + ProcessHandle.current().pid() + "}");
        Files.writeString(state.resolve("api-token"), "stand-in\n");
    }

    @Test
    void aGatewayThatFallsSilentIsGivenUpWithAClearErrorAndTheStreamEndedFromTheCli() throws Exception {
        CompletableFuture<String> ended = new CompletableFuture<>();
        gateway(-1, ended);
        long start = System.nanoTime();
        Cli.Result r = Cli.run(state, "sandbox", "exec", "job", "--no-stdin", "--", "/bin/sleep", "600");
        long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start);
        assertEquals(1, r.exit(), r.out() + r.err());
        assertEquals("started\n", r.out(), "what came before the silence is written out");
        assertTrue(r.err().contains("the gateway sent nothing for") && r.err().contains("heartbeat every "
                + HEARTBEAT_MILLIS + " ms"), r.err());
        assertTrue(seconds < 30, "given up after ~" + 6 * HEARTBEAT_MILLIS + " ms of silence, not " + seconds + " s");
        assertEquals("half-closed", ended.get(10, TimeUnit.SECONDS), "the CLI ended the stream from its side");
    }

    @Test
    void aGatewayThatKeepsSendingHeartbeatsIsWaitedForPastTheSilenceBound() throws Exception {
        CompletableFuture<String> ended = new CompletableFuture<>();
        // 20 beats: 4 s, more than three times the 1.2 s the CLI allows without one.
        gateway(20, ended);
        Cli.Result r = Cli.run(state, "sandbox", "exec", "job", "--no-stdin", "--", "/bin/sleep", "4");
        assertEquals(0, r.exit(), r.out() + r.err());
        assertEquals("started\n", r.out());
    }
}
