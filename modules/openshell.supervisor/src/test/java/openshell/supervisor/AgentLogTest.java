package openshell.supervisor;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import openshell.protocol.CreditedStream;
import openshell.protocol.Initiator;
import openshell.protocol.LaunchTls;
import openshell.protocol.RuntimeEndpoint;
import openshell.protocol.SupervisorEndpoint;
import openshell.protocol.SupervisorLink;
import openshell.protocol.TokenAudience;
import openshell.protocol.TokenGrant;
import openshell.protocol.TokenIssuer;
import openshell.protocol.TokenSlot;
import openshell.protocol.TokenVerifier;
import openshell.protocol.Transport;
import openshell.protocol.wire.ExitStatus;
import openshell.protocol.wire.OutputLost;
import openshell.protocol.wire.ProcessInput;
import openshell.protocol.wire.ProcessOutput;
import openshell.protocol.wire.ResumeOutput;
import openshell.protocol.wire.SandboxRuntimeGrpc;
import org.junit.jupiter.api.Test;

/**
 * The supervisor's follower of the agent's output over a real link, against a scripted runtime
 * service: lines are cut at newlines across chunks, stderr is marked, an attach stream that fails
 * mid-line is resumed from exactly the byte counts received, a gap the runtime reports is said
 * in a line, and the exit ends the log with a line of its own.
 */
class AgentLogTest {
    private static final Duration WAIT = Duration.ofSeconds(10);
    private static final String SANDBOX = "sbx-agent-log";

    @Test
    void linesAcrossChunksAResumeFromTheCountsAndTheGapAndExitAreSaid() throws Exception {
        Script script = new Script(Script::dropThenFinish);
        List<String> lines = follow(script);
        assertEquals(ProcessInput.KindCase.RESUME, script.firsts.poll().getKindCase());
        ResumeOutput second = script.firsts.poll(WAIT.toSeconds(), TimeUnit.SECONDS).getResume();
        assertEquals("1", second.getProcessId());
        assertEquals("hello\nwor".length(), second.getStdoutOffset(), "resumed after exactly the stdout bytes received");
        assertEquals("warn".length(), second.getStderrOffset(), "and the stderr bytes");
        assertEquals(List.of("hello",
                "wor",
                "[openshell] 5 bytes of the agent's stdout were no longer kept by the runtime",
                "ld",
                "[stderr] warning",
                "[stderr] " + "x".repeat(AgentLog.MAX_LINE_BYTES),
                "[stderr] y",
                "no newline at the end",
                "[openshell] the agent ended: Exited[code=0]"), lines);
    }

    /** At the rate bound: the first {@link AgentLog#MAX_LINES_PER_SECOND} lines of a second go, the rest are counted. */
    @Test
    void moreLinesThanTheRateAllowsAreCountedNotForwarded() throws Exception {
        int sent = AgentLog.MAX_LINES_PER_SECOND + 150;
        StringBuilder many = new StringBuilder();
        for (int i = 0; i < sent; i++) {
            many.append("line ").append(i).append('\n');
        }
        List<String> lines = follow(new Script((attach, stream) -> {
            stream.send(ProcessOutput.newBuilder().setStdout(ByteString.copyFromUtf8(many.toString())).build());
            stream.send(ProcessOutput.newBuilder().setExit(ExitStatus.newBuilder().setSignal(15)).build());
            stream.complete();
        }));
        List<String> expected = new java.util.ArrayList<>();
        for (int i = 0; i < AgentLog.MAX_LINES_PER_SECOND; i++) {
            expected.add("line " + i);
        }
        expected.add("[openshell] 150 lines of the agent's output were not forwarded (more than "
                + AgentLog.MAX_LINES_PER_SECOND + " a second)");
        expected.add("[openshell] the agent ended: Signaled[signal=15]");
        assertEquals(expected, lines);
    }

    /** Follows the scripted agent over a real link until its log ends; returns every line handed on, in order. */
    private static List<String> follow(Script script) throws Exception {
        Path directory = Files.createTempDirectory("osl");
        TokenIssuer issuer = TokenIssuer.generate("openshell-gateway", "gateway-key-1", Clock.systemUTC());
        LaunchTls tls = LaunchTls.issue("session-agent-log");
        Transport where = Transport.unix(directory.resolve("s.sock"));
        TokenSlot slot = new TokenSlot(issuer.mintPair(new TokenGrant(SANDBOX, 1, "lineage-1", "supervisor",
                Duration.ofMinutes(30)), 1), Clock.systemUTC());
        try (SupervisorEndpoint supervisor = SupervisorEndpoint.builder().transport(where).initiator(Initiator.RUNTIME)
                .pin(tls.pin()).tokens(slot).build()) {
            supervisor.listen();
            TokenVerifier verifier = TokenVerifier.builder().key(issuer.verificationKey()).issuer("openshell-gateway")
                    .audience(TokenAudience.SANDBOX).sandboxId(SANDBOX).runtimeGeneration(1).build();
            try (RuntimeEndpoint runtime = RuntimeEndpoint.builder().transport(where).initiator(Initiator.RUNTIME)
                    .identity(tls.runtime()).verifier(verifier).addService(script).build().start()) {
                SupervisorLink link = supervisor.connect();
                assertEquals(1, runtime.linkCount(), "the runtime dialed in");
                // Calls other than attach are served on the attached link only.
                SandboxRuntimeGrpc.newBlockingStub(link.channel()).attach(openshell.protocol.wire.AttachRequest.newBuilder()
                        .setSupervisorId("supervisor-a").build());
                List<List<String>> batches = new CopyOnWriteArrayList<>();
                try (AgentLog log = AgentLog.follow(new RemoteCalls(link), "1", batches::add)) {
                    try {
                        log.ended().get(WAIT.toSeconds(), TimeUnit.SECONDS);
                    } catch (java.util.concurrent.TimeoutException e) {
                        throw new AssertionError("the log never ended; lines " + batches + ", attaches " + script.firsts, e);
                    }
                }
                return batches.stream().flatMap(List::stream).toList();
            }
        } finally {
            Files.deleteIfExists(directory.resolve("s.sock"));
            Files.deleteIfExists(directory);
        }
    }

    /** attachProcess as a runtime would answer it: the first attach fails mid-line, the second finishes. */
    private static final class Script extends SandboxRuntimeGrpc.SandboxRuntimeImplBase {
        final LinkedBlockingQueue<ProcessInput> firsts = new LinkedBlockingQueue<>();
        private final java.util.function.BiConsumer<Integer, CreditedStream<ProcessInput, ProcessOutput>> answer;
        private int attaches;

        Script(java.util.function.BiConsumer<Integer, CreditedStream<ProcessInput, ProcessOutput>> answer) {
            this.answer = answer;
        }

        @Override
        public void attach(openshell.protocol.wire.AttachRequest request,
                           StreamObserver<openshell.protocol.wire.AttachResult> observer) {
            observer.onNext(openshell.protocol.wire.AttachResult.getDefaultInstance());
            observer.onCompleted();
        }

        @Override
        public StreamObserver<ProcessInput> attachProcess(StreamObserver<ProcessOutput> raw) {
            int attach = ++attaches;
            java.util.concurrent.atomic.AtomicReference<CreditedStream<ProcessInput, ProcessOutput>> self =
                    new java.util.concurrent.atomic.AtomicReference<>();
            CreditedStream<ProcessInput, ProcessOutput> stream = CreditedStream.create(CreditedStream.Kind.RUNTIME_PROCESS,
                    new StreamObserver<>() {
                        @Override
                        public void onNext(ProcessInput input) {
                            firsts.add(input);
                            Thread.ofVirtual().start(() -> answer.accept(attach, self.get()));
                        }

                        @Override
                        public void onError(Throwable t) {
                        }

                        @Override
                        public void onCompleted() {
                        }
                    }, Thread.ofVirtual().factory());
            self.set(stream);
            stream.connect(raw);
            return stream.inbound();
        }

        static void dropThenFinish(int attach, CreditedStream<ProcessInput, ProcessOutput> stream) {
            if (attach == 1) {
                stream.send(stdout("hel"));
                stream.send(stdout("lo\nwor"));
                stream.send(ProcessOutput.newBuilder().setStderr(ByteString.copyFromUtf8("warn")).build());
                stream.fail(Status.UNAVAILABLE.withDescription("the test drops the stream"));
                return;
            }
            stream.send(ProcessOutput.newBuilder().setLost(OutputLost.newBuilder().setBytes(5)).build());
            stream.send(stdout("ld\n"));
            stream.send(ProcessOutput.newBuilder().setStderr(ByteString.copyFromUtf8("ing\n" + "x".repeat(AgentLog.MAX_LINE_BYTES)
                    + "y\n")).build());
            stream.send(stdout("no newline at the end"));
            stream.send(ProcessOutput.newBuilder().setExit(ExitStatus.newBuilder().setCode(0)).build());
            stream.complete();
        }

        private static ProcessOutput stdout(String text) {
            return ProcessOutput.newBuilder().setStdout(ByteString.copyFrom(text, StandardCharsets.UTF_8)).build();
        }
    }
}
