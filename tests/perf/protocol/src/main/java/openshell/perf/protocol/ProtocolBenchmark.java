package openshell.perf.protocol;


import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import com.google.protobuf.ByteString;
import io.grpc.stub.StreamObserver;

import openshell.protocol.CreditedStream;
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
 * Measures, over real Unix and TCP sockets with TLS and bearer tokens: bytes per second
 * through one relay stream in each direction, and the round trip of a small control call,
 * idle and while an upload relay runs. Writes one JSON object.
 */
public final class ProtocolBenchmark {
    private static final String ISSUER = "bench-gateway";
    private static final String SANDBOX = "bench";
    private static final long GENERATION = 1;
    private static final Duration WAIT = Duration.ofMinutes(5);
    private static final int MAX_LOADED_CALLS = 200;

    private ProtocolBenchmark() {
    }

    /**
     * Runs the benchmark.
     *
     * @param args {@code --relay-mib N --control-calls N --out FILE}
     * @throws Exception on failure
     */
    public static void main(String[] args) throws Exception {
        int relayMib = 200;
        int controlCalls = 2000;
        Path out = Path.of("protocol-bench.json");
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
            case "--relay-mib" -> relayMib = Integer.parseInt(args[i + 1]);
            case "--control-calls" -> controlCalls = Integer.parseInt(args[i + 1]);
            case "--out" -> out = Path.of(args[i + 1]);
            default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        Map<String, Object> result = run(relayMib, controlCalls);
        String json = toJson(result);
        Files.createDirectories(out.toAbsolutePath().getParent());
        Files.writeString(out, json);
        System.out.println(json);
    }

    static Map<String, Object> run(int relayMib, int controlCalls) throws Exception {
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("relay_mib", relayMib);
        result.put("control_calls", controlCalls);
        result.put("cores", Runtime.getRuntime().availableProcessors());
        for (String kind : List.of("unix", "tcp")) {
            result.put(kind, runOne(kind, relayMib, controlCalls));
        }
        return result;
    }

    private static Map<String, Object> runOne(String kind, int relayMib, int controlCalls) throws Exception {
        Path directory = Files.createTempDirectory("osp-bench");
        TokenIssuer issuer = TokenIssuer.generate(ISSUER, "k1", Clock.systemUTC());
        LaunchTls tls = LaunchTls.issue("bench");
        Transport where = kind.equals("unix")
                ? Transport.unix(directory.resolve("b.sock"))
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
            for (int i = 0; i < Math.min(100, controlCalls); i++) {
                confirm(stub, "warm-" + i);
            }
            List<Long> idle = new ArrayList<>();
            for (int i = 0; i < controlCalls; i++) {
                long t0 = System.nanoTime();
                confirm(stub, "idle-" + i);
                idle.add(System.nanoTime() - t0);
            }
            figures.put("control_rtt_idle_us", percentiles(idle));

            long bytes = (long) relayMib * 1024 * 1024;
            List<Long> loaded = new ArrayList<>();
            double uploadSeconds = upload(link, bytes, stub, loaded);
            figures.put("relay_upload_mib_per_s", round(relayMib / uploadSeconds));
            figures.put("control_rtt_during_upload_us", percentiles(loaded));
            double downloadSeconds = download(link, bytes);
            figures.put("relay_download_mib_per_s", round(relayMib / downloadSeconds));
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

    private static double upload(SupervisorLink link, long bytes, SandboxRuntimeGrpc.SandboxRuntimeBlockingStub stub,
                                 List<Long> loaded) throws Exception {
        CountDownLatch done = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CreditedStream<RelayDown, RelayUp> up = relay(link, observer(done, failure, null));
        up.send(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder().setConnectionId("sink").setAllow(true))
                .build());
        ByteString chunk = ByteString.copyFrom(new byte[BenchRuntime.CHUNK]);
        AtomicLong sent = new AtomicLong();
        long start = System.nanoTime();
        Thread sender = Thread.ofVirtual().start(() -> {
            while (sent.get() < bytes) {
                up.send(RelayUp.newBuilder().setData(chunk).build());
                sent.addAndGet(chunk.size());
            }
            up.send(RelayUp.newBuilder().setHalfClose(true).build());
        });
        int call = 0;
        // At most MAX_LOADED_CALLS samples, one per 10 ms while the upload runs.
        while (sent.get() < bytes && call < MAX_LOADED_CALLS) {
            long t0 = System.nanoTime();
            confirm(stub, "loaded-" + call++);
            loaded.add(System.nanoTime() - t0);
            Thread.sleep(10);
        }
        sender.join(WAIT);
        await(done, failure);
        return (System.nanoTime() - start) / 1e9;
    }

    private static double download(SupervisorLink link, long bytes) throws Exception {
        CountDownLatch done = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicLong received = new AtomicLong();
        long start = System.nanoTime();
        CreditedStream<RelayDown, RelayUp> up = relay(link, observer(done, failure, received));
        up.send(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder().setConnectionId("source-" + bytes)
                .setAllow(true)).build());
        await(done, failure);
        if (received.get() < bytes) {
            throw new IllegalStateException("download delivered " + received.get() + " of " + bytes);
        }
        return (System.nanoTime() - start) / 1e9;
    }

    /** The supervisor's end of a relay under message credits, as the product opens it. */
    private static CreditedStream<RelayDown, RelayUp> relay(SupervisorLink link, StreamObserver<RelayDown> handler) {
        CreditedStream<RelayDown, RelayUp> stream = CreditedStream.create(CreditedStream.Kind.SUPERVISOR_RELAY, handler,
                Thread.ofVirtual().factory());
        stream.connect(SandboxRuntimeGrpc.newStub(link.channel()).relay(stream.inbound()));
        return stream;
    }

    private static StreamObserver<RelayDown> observer(CountDownLatch done, AtomicReference<Throwable> failure,
                                                      AtomicLong received) {
        return new StreamObserver<>() {
            @Override
            public void onNext(RelayDown value) {
                if (received != null) {
                    received.addAndGet(value.getData().size());
                }
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
        };
    }

    private static void await(CountDownLatch done, AtomicReference<Throwable> failure) throws Exception {
        if (!done.await(WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("relay did not finish within " + WAIT);
        }
        if (failure.get() != null) {
            throw new IllegalStateException("relay failed", failure.get());
        }
    }

    private static void confirm(SandboxRuntimeGrpc.SandboxRuntimeBlockingStub stub, String id) {
        stub.withDeadlineAfter(WAIT.toMillis(), TimeUnit.MILLISECONDS)
                .confirm(RequestDigest.stamp(ConfirmRequest.newBuilder().setPolicyDigest("p").build(), id));
    }

    private static Map<String, Object> percentiles(List<Long> nanos) {
        List<Long> sorted = new ArrayList<>(nanos);
        Collections.sort(sorted);
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("n", sorted.size());
        if (sorted.isEmpty()) {
            return p;
        }
        p.put("p50", sorted.get(sorted.size() / 2) / 1000);
        p.put("p99", sorted.get(Math.min(sorted.size() - 1, (int) (sorted.size() * 0.99))) / 1000);
        p.put("max", sorted.get(sorted.size() - 1) / 1000);
        return p;
    }

    private static double round(double value) {
        return Math.round(value * 10) / 10.0;
    }

    static String toJson(Object value) {
        if (value instanceof Map<?, ?> map) {
            StringBuilder json = new StringBuilder("{");
            for (Map.Entry<?, ?> entry : map.entrySet()) {
                if (json.length() > 1) {
                    json.append(", ");
                }
                json.append('"').append(entry.getKey()).append("\": ").append(toJson(entry.getValue()));
            }
            return json.append('}').toString();
        }
        if (value instanceof String text) {
            return '"' + text + '"';
        }
        if (value instanceof Double number) {
            return String.format(Locale.ROOT, "%.1f", number);
        }
        return String.valueOf(value);
    }

}
