package openshell.perf.protocol;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import com.google.protobuf.ByteString;
import io.grpc.stub.StreamObserver;

import openshell.protocol.Initiator;
import openshell.protocol.LaunchTls;
import openshell.protocol.RequestDigest;
import openshell.protocol.RuntimeEndpoint;
import openshell.protocol.SupervisorEndpoint;
import openshell.protocol.SupervisorLink;
import openshell.protocol.TokenAudience;
import openshell.protocol.TokenGrant;
import openshell.protocol.TokenIssuer;
import openshell.protocol.TokenSlot;
import openshell.protocol.TokenVerifier;
import openshell.protocol.Transport;
import openshell.protocol.wire.AttachRequest;
import openshell.protocol.wire.ConfirmRequest;
import openshell.protocol.wire.RelayDecision;
import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;
import openshell.protocol.wire.SandboxRuntimeGrpc;

/**
 * How many sequential calls and short streams (decision, a few bytes, half-close: one
 * mediated TCP connection) one link carries per second, over real Unix and TCP sockets
 * with TLS and bearer tokens, all on one link for its whole run. Sequential on purpose: it
 * measures the per-stream cost, and a link that leaks finished streams fails here after
 * about MAX_CONCURRENT_STREAMS of them. Writes one JSON object.
 */
public final class LinkLifetimeBenchmark {
    private static final String ISSUER = "bench-gateway";
    private static final String SANDBOX = "bench";
    private static final long GENERATION = 1;
    private static final Duration WAIT = Duration.ofSeconds(30);

    private LinkLifetimeBenchmark() {
    }

    /**
     * Runs the benchmark.
     *
     * @param args {@code --calls N --streams N --out FILE}
     * @throws Exception on failure
     */
    public static void main(String[] args) throws Exception {
        int calls = 10_000;
        int streams = 5_000;
        Path out = Path.of("link-lifetime-bench.json");
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
            case "--calls" -> calls = Integer.parseInt(args[i + 1]);
            case "--streams" -> streams = Integer.parseInt(args[i + 1]);
            case "--out" -> out = Path.of(args[i + 1]);
            default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        String json = ProtocolBenchmark.toJson(run(calls, streams));
        Files.createDirectories(out.toAbsolutePath().getParent());
        Files.writeString(out, json);
        System.out.println(json);
    }

    static Map<String, Object> run(int calls, int streams) throws Exception {
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("calls", calls);
        result.put("streams", streams);
        result.put("cores", Runtime.getRuntime().availableProcessors());
        for (String kind : List.of("unix", "tcp")) {
            result.put(kind, runOne(kind, calls, streams));
        }
        return result;
    }

    private static Map<String, Object> runOne(String kind, int calls, int streams) throws Exception {
        Path directory = Files.createTempDirectory("osp-life");
        TokenIssuer issuer = TokenIssuer.generate(ISSUER, "k1", Clock.systemUTC());
        LaunchTls tls = LaunchTls.issue("bench");
        Transport where = kind.equals("unix")
                ? Transport.unix(directory.resolve("l.sock"))
                : Transport.tcp(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
        Map<String, Object> figures = new LinkedHashMap<>();
        try (RuntimeEndpoint runtime = RuntimeEndpoint.builder()
                .transport(where)
                .initiator(Initiator.SUPERVISOR)
                .identity(tls.runtime())
                .verifier(TokenVerifier.builder().key(issuer.verificationKey()).issuer(ISSUER)
                        .audience(TokenAudience.SANDBOX).sandboxId(SANDBOX).runtimeGeneration(GENERATION).build())
                .addService(new BenchRuntime(GENERATION))
                .build()
                .start();
             SupervisorLink link = SupervisorEndpoint.builder()
                     .transport(runtime.listening().orElseThrow())
                     .initiator(Initiator.SUPERVISOR)
                     .pin(tls.pin())
                     .tokens(new TokenSlot(issuer.mintPair(new TokenGrant(SANDBOX, GENERATION, "bench", "supervisor",
                             Duration.ofMinutes(60)), 1), Clock.systemUTC()))
                     .build()
                     .connect()) {
            SandboxRuntimeGrpc.SandboxRuntimeBlockingStub stub = SandboxRuntimeGrpc.newBlockingStub(link.channel());
            stub.attach(RequestDigest.stamp(AttachRequest.newBuilder().setSupervisorId("bench").build(), "attach"));
            long start = System.nanoTime();
            for (int i = 0; i < calls; i++) {
                stub.withDeadlineAfter(WAIT.toMillis(), TimeUnit.MILLISECONDS)
                        .confirm(RequestDigest.stamp(ConfirmRequest.newBuilder().setPolicyDigest("p").build(), "c" + i));
            }
            figures.put("calls_per_s", rate(calls, System.nanoTime() - start));
            ByteString ping = ByteString.copyFromUtf8("ping");
            start = System.nanoTime();
            for (int i = 0; i < streams; i++) {
                shortStream(link, "s" + i, ping);
            }
            figures.put("streams_per_s", rate(streams, System.nanoTime() - start));
            figures.put("link_open_after", link.isOpen());
        } finally {
            try (var files = Files.list(directory)) {
                for (Path file : files.toList()) {
                    Files.deleteIfExists(file);
                }
            }
            Files.deleteIfExists(directory);
        }
        return figures;
    }

    private static void shortStream(SupervisorLink link, String id, ByteString data) throws InterruptedException {
        CountDownLatch done = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicReference<RelayDown> answer = new AtomicReference<>();
        StreamObserver<RelayUp> up = SandboxRuntimeGrpc.newStub(link.channel()).relay(new StreamObserver<>() {
            @Override
            public void onNext(RelayDown value) {
                answer.set(value);
            }

            @Override
            public void onError(Throwable t) {
                failure.set(t);
                done.countDown();
            }

            @Override
            public void onCompleted() {
                done.countDown();
            }
        });
        up.onNext(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder().setConnectionId(id).setAllow(true)).build());
        up.onNext(RelayUp.newBuilder().setData(data).build());
        up.onNext(RelayUp.newBuilder().setHalfClose(true).build());
        up.onCompleted();
        if (!done.await(WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("stream " + id + " did not end within " + WAIT);
        }
        if (failure.get() != null) {
            throw new IllegalStateException("stream " + id + " failed", failure.get());
        }
        if (answer.get() == null || !answer.get().getData().toStringUtf8().equals(Integer.toString(data.size()))) {
            throw new IllegalStateException("stream " + id + " answered " + answer.get());
        }
    }

    private static double rate(int count, long nanos) {
        return Math.round(count / (nanos / 1e9) * 10) / 10.0;
    }
}
