package openshell.supervisor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.helidon.webserver.WebServer;
import io.helidon.webserver.grpc.GrpcRouting;
import openshell.protocol.TokenPair;
import openshell.protocol.wire.GatewayMessage;
import openshell.protocol.wire.GatewaySessionGrpc;
import openshell.protocol.wire.PolicyRevision;
import openshell.protocol.wire.RemoteExec;
import openshell.protocol.wire.RemoteExecInput;
import openshell.protocol.wire.SessionConfig;
import openshell.protocol.wire.SupervisorMessage;
import openshell.protocol.wire.TokenRefresh;
import org.junit.jupiter.api.Test;

/**
 * The supervisor's session client over real gRPC against a gateway double (the real gateway's
 * side is tested in openshell.gateway with real tokens): hello, the recorded policy, refresh with
 * acknowledgement, LOADED/FAILED, exec relay, and reconnecting with the newest token.
 */
class GatewaySessionTest {
    static final Duration WAIT = Duration.ofSeconds(60);

    /** The gateway's end, driven by the test through queues. */
    static final class GatewayDouble extends GatewaySessionGrpc.GatewaySessionImplBase {
        final BlockingQueue<SupervisorMessage> received = new LinkedBlockingQueue<>();
        final BlockingQueue<StreamObserver<GatewayMessage>> streams = new LinkedBlockingQueue<>();

        @Override
        public StreamObserver<SupervisorMessage> open(StreamObserver<GatewayMessage> out) {
            streams.add(out);
            return new StreamObserver<>() {
                @Override
                public void onNext(SupervisorMessage m) {
                    received.add(m);
                }

                @Override
                public void onError(Throwable t) {
                }

                @Override
                public void onCompleted() {
                    out.onCompleted();
                }
            };
        }

        /** @return the next message other than the liveness writes (empty log messages) */
        SupervisorMessage next() throws InterruptedException {
            while (true) {
                SupervisorMessage m = received.poll(WAIT.toSeconds(), TimeUnit.SECONDS);
                assertNotNull(m, "nothing from the supervisor within " + WAIT);
                if (!liveness(m)) {
                    return m;
                }
            }
        }

        static boolean liveness(SupervisorMessage m) {
            return m.hasLogs() && m.getLogs().getLinesCount() == 0;
        }

        StreamObserver<GatewayMessage> stream() throws InterruptedException {
            StreamObserver<GatewayMessage> s = streams.poll(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertNotNull(s, "no session opened within " + WAIT);
            return s;
        }
    }

    /** Loads any policy without "bad"; execs echo their stdin and exit 7. */
    static class RecordingHandler implements GatewaySessionHandler {
        final BlockingQueue<String> events = new LinkedBlockingQueue<>();

        @Override
        public PolicyVerdict applyPolicy(long generation, byte[] document) {
            String doc = new String(document, java.nio.charset.StandardCharsets.UTF_8);
            events.add("policy " + generation);
            return doc.contains("bad") ? new PolicyVerdict(false, "invalid") : new PolicyVerdict(true, "");
        }

        @Override
        public void tokensRefreshed(TokenPair tokens) {
            events.add("tokens " + tokens.credentialEpoch());
        }

        @Override
        public ExecControl exec(ExecCommand command, ExecOutput output) {
            List<String> argv = command.argv();
            ByteArrayOutputStream stdin = new ByteArrayOutputStream();
            return new ExecControl() {
                @Override
                public void resize(int columns, int rows) {
                    events.add("resize " + columns + "x" + rows);
                }

                @Override
                public void signal(int number) {
                    events.add("signal " + number);
                }

                @Override
                public void terminate() {
                    events.add("terminate");
                }

                @Override
                public void write(byte[] bytes) {
                    stdin.writeBytes(bytes);
                }

                @Override
                public void close() {
                    output.stdout(stdin.toByteArray());
                    output.stderr(String.join(" ", argv).getBytes(java.nio.charset.StandardCharsets.UTF_8));
                    output.exit(7);
                }
            };
        }


        /** Port 9 has nothing listening; any other echoes "port P: " and its input at the half-close, then ends. */
        @Override
        public ExecControl forward(int port, ExecOutput output) {
            if (port == 9) {
                throw new openshell.isolation.BackendException(openshell.isolation.BackendException.Kind.FAILED,
                        "nothing listens on 127.0.0.1:9");
            }
            events.add("forward " + port);
            ByteArrayOutputStream in = new ByteArrayOutputStream();
            return new ExecControl() {
                @Override
                public void resize(int columns, int rows) {
                }

                @Override
                public void signal(int number) {
                }

                @Override
                public void terminate() {
                    events.add("closed " + port);
                }

                @Override
                public void write(byte[] bytes) {
                    in.writeBytes(bytes);
                }

                @Override
                public void close() {
                    output.stdout(("port " + port + ": " + in).getBytes(java.nio.charset.StandardCharsets.UTF_8));
                    output.exit(0);
                }
            };
        }
    }

    /**
     * Forward relays share the exec relay: input with credit, the connection's bytes as stdout, its end as
     * exit 0; a port nothing listens on, a port out of range and a forward that also names a command end
     * with an error event and start nothing.
     */
    @Test
    void forwardRelaysConnectionsAndRefusesBadOnes() throws Exception {
        GatewayDouble gateway = new GatewayDouble();
        WebServer server = WebServer.builder().host("127.0.0.1").port(0)
                .addRouting(GrpcRouting.builder().service(gateway)).build().start();
        RecordingHandler handler = new RecordingHandler();
        TokenPair first = new TokenPair("gateway-token-1", "sandbox-token-1", 1, Instant.now().plusSeconds(600));
        try (GatewaySession session = GatewaySession.open(GatewaySession.channels("http://127.0.0.1:" + server.port()),
                "sb-one", 4, first, 1, handler)) {
            StreamObserver<GatewayMessage> out = gateway.stream();
            assertTrue(gateway.next().hasHello());
            out.onNext(GatewayMessage.newBuilder().setConfig(SessionConfig.newBuilder().setPolicyGeneration(1)).build());
            session.opened().get(WAIT.toSeconds(), TimeUnit.SECONDS);

            out.onNext(GatewayMessage.newBuilder().setExec(RemoteExec.newBuilder().setExecId("f1").setForwardPort(8080))
                    .build());
            out.onNext(GatewayMessage.newBuilder().setExecInput(RemoteExecInput.newBuilder().setExecId("f1")
                    .setData(ByteString.copyFromUtf8("GET /")).setClose(true)).build());
            assertEquals(5, gateway.next().getExecEvent().getStdinCredit());
            assertEquals("port 8080: GET /", gateway.next().getExecEvent().getStdout().toStringUtf8());
            assertEquals(0, gateway.next().getExecEvent().getExitCode());
            assertEquals("forward 8080", handler.events.poll(WAIT.toSeconds(), TimeUnit.SECONDS));

            out.onNext(GatewayMessage.newBuilder().setExec(RemoteExec.newBuilder().setExecId("f2").setForwardPort(9))
                    .build());
            SupervisorMessage refused = gateway.next();
            assertEquals("f2", refused.getExecEvent().getExecId());
            assertTrue(refused.getExecEvent().getError().contains("nothing listens on 127.0.0.1:9"), refused.toString());

            out.onNext(GatewayMessage.newBuilder().setExec(RemoteExec.newBuilder().setExecId("f3").setForwardPort(65536))
                    .build());
            assertTrue(gateway.next().getExecEvent().getError().contains("port 1..65535"));
            out.onNext(GatewayMessage.newBuilder().setExec(RemoteExec.newBuilder().setExecId("f4").setForwardPort(80)
                    .addArgv("/bin/sh")).build());
            assertTrue(gateway.next().getExecEvent().getError().contains("with argv"));
            assertTrue(handler.events.isEmpty(), "nothing started for the refused forwards: " + handler.events);
        } finally {
            server.stop();
        }
    }

    /**
     * The supervisor's bridge over a real TCP connection (what a boundary's port forward hands it): bytes both
     * ways, the half-close reaches the service, which still answers, and the service's close ends the relay
     * with exit 0 after everything it sent.
     */
    @Test
    void bridgeRelaysARealConnectionAndItsHalfClose() throws Exception {
        try (java.net.ServerSocket service = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            Thread.ofVirtual().start(() -> {
                try (java.net.Socket s = service.accept()) {
                    byte[] request = s.getInputStream().readAllBytes();
                    s.getOutputStream().write(("got " + request.length + " bytes").getBytes(
                            java.nio.charset.StandardCharsets.UTF_8));
                } catch (java.io.IOException ignored) {
                    // The assertions below say what went wrong.
                }
            });
            SessionClientProvider.Bridge bridge = new SessionClientProvider.Bridge(new openshell.supervisor.spi
                    .GatewaySessionClient.Callback() {
                @Override
                public openshell.supervisor.spi.GatewaySessionClient.Revision applyPolicy(byte[] policyYaml) {
                    throw new AssertionError("no policy here");
                }

                @Override
                public void refreshTokens(String gatewayToken, String sandboxToken, long epoch, Instant expiresAt) {
                }

                @Override
                public openshell.isolation.ByteChannel forward(openshell.isolation.LoopbackTarget target) {
                    try {
                        java.net.Socket socket = new java.net.Socket(target.address(), target.port());
                        return new openshell.isolation.ByteChannel() {
                            @Override
                            public java.io.InputStream input() {
                                try {
                                    return socket.getInputStream();
                                } catch (java.io.IOException e) {
                                    throw new java.io.UncheckedIOException(e);
                                }
                            }

                            @Override
                            public java.io.OutputStream output() {
                                try {
                                    return new java.io.FilterOutputStream(socket.getOutputStream()) {
                                        @Override
                                        public void close() throws java.io.IOException {
                                            socket.shutdownOutput();
                                        }
                                    };
                                } catch (java.io.IOException e) {
                                    throw new java.io.UncheckedIOException(e);
                                }
                            }

                            @Override
                            public void close() {
                                try {
                                    socket.close();
                                } catch (java.io.IOException ignored) {
                                    // Closing twice is fine.
                                }
                            }
                        };
                    } catch (java.io.IOException e) {
                        throw new java.io.UncheckedIOException(e);
                    }
                }
            });
            ByteArrayOutputStream received = new ByteArrayOutputStream();
            java.util.concurrent.CompletableFuture<Integer> exit = new java.util.concurrent.CompletableFuture<>();
            GatewaySessionHandler.ExecControl control = bridge.forward(service.getLocalPort(),
                    new GatewaySessionHandler.ExecOutput() {
                        @Override
                        public void stdout(byte[] bytes) {
                            synchronized (received) {
                                received.writeBytes(bytes);
                            }
                        }

                        @Override
                        public void stderr(byte[] bytes) {
                            exit.completeExceptionally(new AssertionError("a connection has no stderr"));
                        }

                        @Override
                        public void exit(int code) {
                            exit.complete(code);
                        }

                        @Override
                        public void error(String reason) {
                            exit.completeExceptionally(new AssertionError(reason));
                        }
                    });
            control.write(new byte[70_000]);
            control.close();
            assertEquals(0, exit.get(WAIT.toSeconds(), TimeUnit.SECONDS));
            synchronized (received) {
                assertEquals("got 70000 bytes", received.toString(java.nio.charset.StandardCharsets.UTF_8));
            }
        }
    }

    /**
     * The agent's first lines come before the first session opened: they are kept and arrive, in
     * order, once it has; past the bound the oldest go and one line says how many.
     */
    @Test
    void logLinesFromBeforeTheSessionOpenedArriveOnceItHas() throws Exception {
        GatewayDouble gateway = new GatewayDouble();
        WebServer server = WebServer.builder().host("127.0.0.1").port(0)
                .addRouting(GrpcRouting.builder().service(gateway)).build().start();
        TokenPair first = new TokenPair("gateway-token-1", "sandbox-token-1", 1, Instant.now().plusSeconds(600));
        try (GatewaySession session = GatewaySession.open(GatewaySession.channels("http://127.0.0.1:" + server.port()),
                "sb-log", 1, first, 1, new RecordingHandler())) {
            int extra = 5;
            List<String> early = new java.util.ArrayList<>();
            for (int i = 0; i < GatewaySession.MAX_PENDING_LOG_LINES + extra; i++) {
                early.add("early " + i);
            }
            session.log(early.subList(0, 1));
            StreamObserver<GatewayMessage> out = gateway.stream();
            assertTrue(gateway.next().hasHello());
            // Connected but not open yet: still kept.
            session.log(early.subList(1, early.size()));
            out.onNext(GatewayMessage.newBuilder().setConfig(SessionConfig.newBuilder().setPolicyGeneration(1)
                    .setPolicyDocument(ByteString.copyFromUtf8("version: 1\n"))).build());
            session.opened().get(WAIT.toSeconds(), TimeUnit.SECONDS);
            session.log(List.of("after"));
            List<String> arrived = new java.util.ArrayList<>();
            while (!arrived.contains("after")) {
                SupervisorMessage m = gateway.next();
                assertTrue(m.hasLogs(), m.toString());
                assertTrue(m.getLogs().getLinesCount() <= GatewaySession.PENDING_LOG_LINES_PER_MESSAGE, m.toString());
                arrived.addAll(m.getLogs().getLinesList());
            }
            List<String> expected = new java.util.ArrayList<>();
            expected.add("[openshell] " + extra + " earlier lines of the agent's output were dropped while no gateway session was open");
            expected.addAll(early.subList(extra, early.size()));
            expected.add("after");
            assertEquals(expected, arrived);
        } finally {
            server.stop();
        }
    }

    @Test
    void sessionCarriesPolicyTokensAndExecsAndReconnectsWithTheNewestToken() throws Exception {
        GatewayDouble gateway = new GatewayDouble();
        WebServer server = WebServer.builder().host("127.0.0.1").port(0)
                .addRouting(GrpcRouting.builder().service(gateway)).build().start();
        RecordingHandler handler = new RecordingHandler();
        TokenPair first = new TokenPair("gateway-token-1", "sandbox-token-1", 1, Instant.now().plusSeconds(600));
        try (GatewaySession session = GatewaySession.open(GatewaySession.channels("http://127.0.0.1:" + server.port()),
                "sb-one", 4, first, 1, handler)) {
            StreamObserver<GatewayMessage> out = gateway.stream();
            SupervisorMessage hello = gateway.next();
            assertEquals("gateway-token-1", hello.getHello().getGatewayToken());
            assertEquals("sb-one", hello.getHello().getSandboxId());
            assertEquals(4, hello.getHello().getRuntimeGeneration());

            // The gateway recorded generation 2 while the supervisor was away: it is applied on config.
            out.onNext(GatewayMessage.newBuilder().setConfig(SessionConfig.newBuilder().setPolicyGeneration(2)
                    .setPolicyDocument(ByteString.copyFromUtf8("version: 1\n"))).build());
            session.opened().get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertEquals("policy 2", handler.events.poll(WAIT.toSeconds(), TimeUnit.SECONDS));

            out.onNext(GatewayMessage.newBuilder().setTokens(TokenRefresh.newBuilder().setGatewayToken("gateway-token-2")
                    .setSandboxToken("sandbox-token-2").setCredentialEpoch(2)
                    .setExpiresAtEpochSecond(Instant.now().plusSeconds(600).getEpochSecond())).build());
            assertEquals(2, gateway.next().getTokenAck().getCredentialEpoch());
            assertEquals("tokens 2", handler.events.poll(WAIT.toSeconds(), TimeUnit.SECONDS));

            out.onNext(GatewayMessage.newBuilder().setPolicy(PolicyRevision.newBuilder().setRevisionId("r1").setGeneration(3)
                    .setDocument(ByteString.copyFromUtf8("bad"))).build());
            SupervisorMessage failed = gateway.next();
            assertEquals("r1", failed.getPolicyOutcome().getRevisionId());
            assertEquals("FAILED", failed.getPolicyOutcome().getResult().name());

            out.onNext(GatewayMessage.newBuilder().setExec(RemoteExec.newBuilder().setExecId("e1").addArgv("/bin/cat"))
                    .build());
            out.onNext(GatewayMessage.newBuilder().setExecInput(RemoteExecInput.newBuilder().setExecId("e1")
                    .setData(ByteString.copyFromUtf8("hello")).setClose(true)).build());
            // The written stdin comes back as credit; then the output and, last, the exit code.
            assertEquals(5, gateway.next().getExecEvent().getStdinCredit());
            assertEquals("hello", gateway.next().getExecEvent().getStdout().toStringUtf8());
            assertEquals("/bin/cat", gateway.next().getExecEvent().getStderr().toStringUtf8());
            assertEquals(7, gateway.next().getExecEvent().getExitCode());

            // An idle session writes an empty log message each LIVENESS_INTERVAL: what notices a dead gateway.
            gateway.received.clear();
            SupervisorMessage idle = gateway.received.poll(GatewaySession.LIVENESS_INTERVAL.multipliedBy(4).toSeconds(),
                    TimeUnit.SECONDS);
            assertNotNull(idle, "no liveness write within " + GatewaySession.LIVENESS_INTERVAL.multipliedBy(4));
            assertTrue(GatewayDouble.liveness(idle), idle.toString());

            // The gateway ends the stream: the supervisor comes back with the newest token.
            out.onError(Status.UNAVAILABLE.asRuntimeException());
            gateway.stream();
            SupervisorMessage again = gateway.next();
            assertTrue(again.hasHello(), again.toString());
            assertEquals("gateway-token-2", again.getHello().getGatewayToken());
            assertEquals(2, again.getHello().getPolicyGeneration(), "reports the policy it enforces");
        } finally {
            server.stop();
        }
    }

    /**
     * Once the agent ended, the supervisor waits (bounded) for the gateway's execs before it closes
     * the session: an exec that ends during the wait reports its exit; one that does not end is
     * left to end with the sandbox when the wait is up.
     */
    @Test
    void awaitExecsEndedWaitsForAnExitAndIsBounded() throws Exception {
        GatewayDouble gateway = new GatewayDouble();
        WebServer server = WebServer.builder().host("127.0.0.1").port(0)
                .addRouting(GrpcRouting.builder().service(gateway)).build().start();
        TokenPair first = new TokenPair("gateway-token-1", "sandbox-token-1", 1, Instant.now().plusSeconds(600));
        try (GatewaySession session = GatewaySession.open(GatewaySession.channels("http://127.0.0.1:" + server.port()),
                "sb-drain", 1, first, 1, new RecordingHandler())) {
            StreamObserver<GatewayMessage> out = gateway.stream();
            assertTrue(gateway.next().hasHello());
            out.onNext(GatewayMessage.newBuilder().setConfig(SessionConfig.newBuilder().setPolicyGeneration(1)
                    .setPolicyDocument(ByteString.copyFromUtf8("version: 1\n"))).build());
            session.opened().get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertTrue(session.awaitExecsEnded(Duration.ZERO), "no exec runs yet");

            out.onNext(GatewayMessage.newBuilder().setExec(RemoteExec.newBuilder().setExecId("e1").addArgv("/bin/cat"))
                    .build());
            out.onNext(GatewayMessage.newBuilder().setExecInput(RemoteExecInput.newBuilder().setExecId("e1")
                    .setData(ByteString.copyFromUtf8("x"))).build());
            assertEquals(1, gateway.next().getExecEvent().getStdinCredit(), "the exec runs");
            Duration bound = Duration.ofMillis(300);
            long started = System.nanoTime();
            assertEquals(false, session.awaitExecsEnded(bound), "a running exec is waited for no longer than the bound");
            assertTrue(System.nanoTime() - started >= bound.toNanos());

            // The exec ends while the supervisor waits: the wait ends with it, and the exit was sent first.
            java.util.concurrent.CompletableFuture<Boolean> waited = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
                try {
                    return session.awaitExecsEnded(WAIT);
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            Thread.sleep(100);
            assertEquals(false, waited.isDone(), "still waiting for the exec");
            out.onNext(GatewayMessage.newBuilder().setExecInput(RemoteExecInput.newBuilder().setExecId("e1")
                    .setClose(true)).build());
            assertEquals(true, waited.get(WAIT.toSeconds(), TimeUnit.SECONDS));
            assertEquals("x", gateway.next().getExecEvent().getStdout().toStringUtf8());
            assertEquals("/bin/cat", gateway.next().getExecEvent().getStderr().toStringUtf8());
            assertEquals(7, gateway.next().getExecEvent().getExitCode());
        } finally {
            server.stop();
        }
    }

    /** Counts the stdin bytes of each exec and, at the half-close, prints their number and exits 0. */
    static class CountingHandler extends RecordingHandler {
        @Override
        public ExecControl exec(ExecCommand command, ExecOutput output) {
            long[] count = new long[1];
            return new ExecControl() {
                @Override
                public void write(byte[] bytes) {
                    count[0] += bytes.length;
                }

                @Override
                public void close() {
                    output.stdout(Long.toString(count[0]).getBytes(java.nio.charset.StandardCharsets.UTF_8));
                    output.exit(0);
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
            };
        }
    }

    @Test
    void fourMebibytesOfStdinFlowThroughTheSessionWithinTheWindow() throws Exception {
        GatewayDouble gateway = new GatewayDouble();
        WebServer server = WebServer.builder().host("127.0.0.1").port(0)
                .addRouting(GrpcRouting.builder().service(gateway)).build().start();
        TokenPair first = new TokenPair("gateway-token-1", "sandbox-token-1", 1, Instant.now().plusSeconds(600));
        try (GatewaySession session = GatewaySession.open(GatewaySession.channels("http://127.0.0.1:" + server.port()),
                "sb-one", 4, first, 1, new CountingHandler())) {
            StreamObserver<GatewayMessage> out = gateway.stream();
            assertTrue(gateway.next().hasHello());
            out.onNext(GatewayMessage.newBuilder().setConfig(SessionConfig.newBuilder().setPolicyGeneration(1)).build());
            session.opened().get(WAIT.toSeconds(), TimeUnit.SECONDS);
            // The gateway's stdin window: bytes in flight to a Helidon 4.1.7 client stay well inside HTTP/2's 64 KiB.
            int window = 16 * 1024;
            out.onNext(GatewayMessage.newBuilder().setExec(RemoteExec.newBuilder().setExecId("big").addArgv("/bin/cat")
                    .setStdinWindow(window)).build());
            long total = 4L * 1024 * 1024;
            long sent = 0;
            long credit = window;
            // The gateway's piece size: a message to Helidon 4.1.7's client must fit one HTTP/2 frame.
            byte[] chunk = new byte[8 * 1024];
            while (sent < total) {
                while (credit < chunk.length) {
                    credit += gateway.next().getExecEvent().getStdinCredit();
                }
                out.onNext(GatewayMessage.newBuilder().setExecInput(RemoteExecInput.newBuilder().setExecId("big")
                        .setData(ByteString.copyFrom(chunk))).build());
                credit -= chunk.length;
                sent += chunk.length;
            }
            out.onNext(GatewayMessage.newBuilder().setExecInput(RemoteExecInput.newBuilder().setExecId("big")
                    .setClose(true)).build());
            SupervisorMessage m;
            do {
                m = gateway.next();
            } while (m.getExecEvent().hasStdinCredit());
            assertEquals(Long.toString(total), m.getExecEvent().getStdout().toStringUtf8());
            assertEquals(0, gateway.next().getExecEvent().getExitCode());
        } finally {
            server.stop();
        }
    }

    /**
     * Messages far larger than one HTTP/2 frame, and more in flight than the 64 KiB window: a
     * 300 KiB policy document and stdin in 100 KiB pieces to eight execs at once. The gateway's
     * server splits each across frames; the session's calls reassemble them, and the one session
     * stays up (no reconnect). Helidon 4.1.7's own gRPC client ended the session on each of these.
     */
    @Test
    void messagesLargerThanAFrameAndTheWindowArriveWholeOnTheOneSession() throws Exception {
        GatewayDouble gateway = new GatewayDouble();
        WebServer server = WebServer.builder().host("127.0.0.1").port(0)
                .addRouting(GrpcRouting.builder().service(gateway)).build().start();
        TokenPair first = new TokenPair("gateway-token-1", "sandbox-token-1", 1, Instant.now().plusSeconds(600));
        java.util.concurrent.atomic.AtomicInteger policyBytes = new java.util.concurrent.atomic.AtomicInteger();
        CountingHandler handler = new CountingHandler() {
            @Override
            public PolicyVerdict applyPolicy(long generation, byte[] document) {
                policyBytes.set(document.length);
                return new PolicyVerdict(true, "");
            }
        };
        try (GatewaySession session = GatewaySession.open(GatewaySession.channels("http://127.0.0.1:" + server.port()),
                "sb-one", 4, first, 1, handler)) {
            StreamObserver<GatewayMessage> out = gateway.stream();
            assertTrue(gateway.next().hasHello());
            out.onNext(GatewayMessage.newBuilder().setConfig(SessionConfig.newBuilder().setPolicyGeneration(1)).build());
            session.opened().get(WAIT.toSeconds(), TimeUnit.SECONDS);

            byte[] document = "#".repeat(300 * 1024).getBytes(java.nio.charset.StandardCharsets.UTF_8);
            out.onNext(GatewayMessage.newBuilder().setPolicy(PolicyRevision.newBuilder().setRevisionId("big")
                    .setGeneration(2).setDocument(ByteString.copyFrom(document))).build());
            SupervisorMessage loaded = gateway.next();
            assertEquals("LOADED", loaded.getPolicyOutcome().getResult().name(), loaded.toString());
            assertEquals(document.length, policyBytes.get(), "the whole document arrived");

            int execs = 8;
            int window = 256 * 1024;
            byte[] piece = new byte[100 * 1024];
            for (int e = 0; e < execs; e++) {
                out.onNext(GatewayMessage.newBuilder().setExec(RemoteExec.newBuilder().setExecId("x" + e)
                        .addArgv("/bin/cat").setStdinWindow(window)).build());
            }
            // Two pieces each (200 KiB, inside each window): 1.6 MiB in flight to the supervisor at once.
            for (int round = 0; round < 2; round++) {
                for (int e = 0; e < execs; e++) {
                    out.onNext(GatewayMessage.newBuilder().setExecInput(RemoteExecInput.newBuilder().setExecId("x" + e)
                            .setData(ByteString.copyFrom(piece))).build());
                }
            }
            for (int e = 0; e < execs; e++) {
                out.onNext(GatewayMessage.newBuilder().setExecInput(RemoteExecInput.newBuilder().setExecId("x" + e)
                        .setClose(true)).build());
            }
            java.util.Map<String, String> counted = new java.util.HashMap<>();
            java.util.Set<String> exited = new java.util.HashSet<>();
            while (exited.size() < execs) {
                SupervisorMessage m = gateway.next();
                assertTrue(m.hasExecEvent(), m.toString());
                if (m.getExecEvent().hasStdout()) {
                    counted.put(m.getExecEvent().getExecId(), m.getExecEvent().getStdout().toStringUtf8());
                } else if (m.getExecEvent().hasExitCode()) {
                    exited.add(m.getExecEvent().getExecId());
                } else {
                    assertTrue(m.getExecEvent().hasStdinCredit(), m.toString());
                }
            }
            for (int e = 0; e < execs; e++) {
                assertEquals(Integer.toString(2 * piece.length), counted.get("x" + e), "stdin of x" + e);
            }
            assertTrue(gateway.streams.isEmpty(), "the session never reconnected");
        } finally {
            server.stop();
        }
    }
}
