package openshell.protocol;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

import io.grpc.stub.StreamObserver;

import openshell.protocol.wire.AttachRequest;
import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;
import openshell.protocol.wire.SandboxRuntimeGrpc;

/**
 * One real launch for the acceptance tests: gateway key, launch TLS, a runtime endpoint
 * serving {@link TestRuntime}, and a supervisor endpoint, over a real Unix or TCP socket in
 * either dial direction.
 */
final class Launch implements AutoCloseable {
    static final String SANDBOX = "sbx-7";
    static final long GENERATION = 3;
    static final String LINEAGE = "lineage-1";
    static final String ISSUER = "openshell-gateway";
    static final Duration CALL_DEADLINE = Duration.ofSeconds(20);

    enum Kind { UNIX, TCP }

    final Kind kind;
    final Initiator initiator;
    final TokenIssuer issuer;
    final LaunchTls tls = LaunchTls.issue("session-1");
    final TestRuntime service = new TestRuntime(GENERATION, Clock.systemUTC());
    final TokenVerifier verifier;
    final TokenSlot slot;
    final RuntimeEndpoint runtime;
    final SupervisorEndpoint supervisor;
    private final Path directory;

    Launch(Kind kind, Initiator initiator) {
        this(kind, initiator, TokenIssuer.generate(ISSUER, "gateway-key-1", Clock.systemUTC()));
    }

    Launch(Kind kind, Initiator initiator, TokenIssuer issuer) {
        this.issuer = issuer;
        this.kind = kind;
        this.initiator = initiator;
        try {
            this.directory = Files.createTempDirectory("osp");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        this.verifier = TokenVerifier.builder()
                .key(issuer.verificationKey())
                .issuer(ISSUER)
                .audience(TokenAudience.SANDBOX)
                .sandboxId(SANDBOX)
                .runtimeGeneration(GENERATION)
                .sessionLineage(LINEAGE)
                .build();
        this.slot = new TokenSlot(issuer.mintPair(grant(), 1), Clock.systemUTC());
        Transport where = kind == Kind.UNIX
                ? Transport.unix(directory.resolve("p.sock"))
                : Transport.tcp(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
        if (initiator == Initiator.SUPERVISOR) {
            runtime = endpoint(where).start();
            supervisor = supervisor(runtime.listening().orElseThrow());
        } else {
            supervisor = supervisor(where);
            Transport dialTo = supervisor.listen();
            runtime = endpoint(dialTo).start();
        }
    }

    /** The supervisor's end of a relay under message credits, as the real supervisor opens it. */
    static CreditedStream<RelayDown, RelayUp> relay(SupervisorLink link, StreamObserver<RelayDown> handler) {
        CreditedStream<RelayDown, RelayUp> stream = CreditedStream.create(CreditedStream.Kind.SUPERVISOR_RELAY, handler,
                Thread.ofVirtual().factory());
        stream.connect(async(link).relay(stream.inbound()));
        return stream;
    }

    static TokenGrant grant() {
        return new TokenGrant(SANDBOX, GENERATION, LINEAGE, "supervisor", Duration.ofMinutes(30));
    }

    private RuntimeEndpoint endpoint(Transport where) {
        return RuntimeEndpoint.builder()
                .transport(where)
                .initiator(initiator)
                .identity(tls.runtime())
                .verifier(verifier)
                .addService(service)
                .build();
    }

    private SupervisorEndpoint supervisor(Transport where) {
        return SupervisorEndpoint.builder()
                .transport(where)
                .initiator(initiator)
                .pin(tls.pin())
                .tokens(slot)
                .build();
    }

    SupervisorLink link() {
        return supervisor.connect();
    }

    /** Another supervisor endpoint with its own token slot, dialing this runtime (supervisor-initiated only). */
    SupervisorLink dialWith(TokenSlot tokens) {
        if (initiator != Initiator.SUPERVISOR) {
            throw new IllegalStateException("only a listening runtime takes extra supervisors");
        }
        return SupervisorEndpoint.builder()
                .transport(runtime.listening().orElseThrow())
                .initiator(Initiator.SUPERVISOR)
                .pin(tls.pin())
                .tokens(tokens)
                .build()
                .connect();
    }

    static SandboxRuntimeGrpc.SandboxRuntimeBlockingStub blocking(SupervisorLink link) {
        return SandboxRuntimeGrpc.newBlockingStub(link.channel())
                .withDeadlineAfter(CALL_DEADLINE.toMillis(), TimeUnit.MILLISECONDS);
    }

    static SandboxRuntimeGrpc.SandboxRuntimeStub async(SupervisorLink link) {
        return SandboxRuntimeGrpc.newStub(link.channel());
    }

    static AttachRequest attachRequest(String requestId) {
        return RequestDigest.stamp(AttachRequest.newBuilder().setSupervisorId("supervisor-A").build(), requestId);
    }

    /** A link that has attached, ready for control calls. */
    SupervisorLink attached() {
        SupervisorLink link = link();
        blocking(link).attach(attachRequest("attach-" + System.nanoTime()));
        return link;
    }

    @Override
    public void close() {
        supervisor.close();
        runtime.close();
        try (var files = Files.list(directory)) {
            for (Path file : files.toList()) {
                Files.deleteIfExists(file);
            }
            Files.deleteIfExists(directory);
        } catch (IOException ignored) {
            // temp files
        }
    }
}
