package openshell.supervisor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import io.helidon.webserver.WebServer;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.DenyReason;
import openshell.isolation.Executable;
import openshell.isolation.IdentityResolution;
import openshell.isolation.SandboxId;
import openshell.isolation.dns.DnsMessage;
import openshell.policy.Policy;
import openshell.policy.PolicyGeneration;

/**
 * One sandbox's mediation wired to the workload test double ({@link TestMediationSource}) and to
 * real loopback upstreams: a TCP echo server and a Helidon HTTP server that echoes what it got.
 */
final class Fixture implements AutoCloseable {
    static final Duration WAIT = Duration.ofSeconds(30);

    final TestMediationSource source = new TestMediationSource();
    final List<String> audit = new CopyOnWriteArrayList<>();
    final SandboxMediation mediation;
    final PolicyInstallation policies;

    private Fixture(SandboxMediation.Builder b, PolicyInstallation policies) {
        this.policies = policies;
        this.mediation = b.audit(audit::add).build();
        mediation.start(source);
    }

    static Fixture start(String policyYaml, Consumer<SandboxMediation.Builder> configure) {
        return start(policyYaml, PolicyInstallation.OnInvalid.KEEP_LAST_VALID, configure);
    }

    static Fixture start(String policyYaml, PolicyInstallation.OnInvalid onInvalid, Consumer<SandboxMediation.Builder> configure) {
        PolicyInstallation policies = new PolicyInstallation(PolicyGeneration.first(Policy.parse(policyYaml)), onInvalid);
        SandboxMediation.Builder b = SandboxMediation.builder().sandbox(new SandboxId("sbx-test")).policies(policies);
        configure.accept(b);
        return new Fixture(b, policies);
    }

    /**
     * As {@link #start(String, Consumer)}, with a descriptor channel in {@code dir}: every open the
     * workload double makes can be handed off, so opaque connections are relayed natively.
     */
    static Fixture startNative(String policyYaml, java.nio.file.Path dir, Consumer<SandboxMediation.Builder> configure)
            throws IOException {
        int uid = (Integer) java.nio.file.Files.getAttribute(java.nio.file.Path.of("/proc/self"), "unix:uid");
        HandoffListener listener = HandoffListener.listen(dir.resolve("link.sock"), uid).orElseThrow();
        Fixture f = start(policyYaml, b -> {
            configure.accept(b);
            b.handoff(listener);
        });
        f.source.handOffVia(listener.path());
        return f;
    }

    static IdentityResolution who(String path) {
        return new IdentityResolution.Resolved(BinaryIdentity.of(Executable.of(path)));
    }

    static InetAddress loopback() {
        return InetAddress.getLoopbackAddress();
    }

    /** Asks the DNS plane for the name's A record, as the workload's resolver would, so the answer is pinned. */
    byte[] resolve(IdentityResolution who, String name) throws Exception {
        int before = audit.size();
        TestMediationSource.Query q = source.query(who, DnsMessage.query(4242, name, DnsMessage.TYPE_A));
        byte[] response = q.response.get(WAIT.toSeconds(), TimeUnit.SECONDS);
        awaitAudit("dns", before);
        return response;
    }

    /** Opens and expects it admitted; returns the workload's socket. */
    Socket connect(IdentityResolution who, InetAddress address, int port) throws Exception {
        int before = audit.size();
        TestMediationSource.Open o = source.open(who, address, port);
        DenyReason r = o.outcome.get(WAIT.toSeconds(), TimeUnit.SECONDS);
        assertEquals(null, r, () -> "expected an allow; audit: " + audit);
        Socket workload = o.workload.get(WAIT.toSeconds(), TimeUnit.SECONDS);
        awaitAudit("connect", before);
        return workload;
    }

    DenyReason denied(IdentityResolution who, InetAddress address, int port) throws Exception {
        int before = audit.size();
        TestMediationSource.Open o = source.open(who, address, port);
        DenyReason r = o.outcome.get(WAIT.toSeconds(), TimeUnit.SECONDS);
        assertTrue(r != null, "expected a denial");
        awaitAudit("connect", before);
        return r;
    }

    /**
     * Waits for an audit line of {@code kind} after the first {@code before} lines: the line of a
     * decision is written right after the decision went out, so it may trail the outcome.
     */
    void awaitAudit(String kind, int before) throws InterruptedException {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            for (int i = before; i < audit.size(); i++) {
                if (audit.get(i).contains("\"kind\":\"" + kind + "\"")) {
                    return;
                }
            }
            Thread.sleep(5);
        }
        throw new AssertionError("no " + kind + " audit line within " + WAIT + " in " + audit);
    }

    String lastAudit(String kind) {
        for (int i = audit.size() - 1; i >= 0; i--) {
            if (audit.get(i).contains("\"kind\":\"" + kind + "\"")) {
                return audit.get(i);
            }
        }
        throw new AssertionError("no " + kind + " audit line in " + audit);
    }

    @Override
    public void close() {
        mediation.close();
    }

    /** A loopback TCP server that echoes every byte and half-closes when its client does. */
    static final class EchoServer implements AutoCloseable {
        final ServerSocket server;
        private final Thread loop;

        EchoServer() throws IOException {
            server = new ServerSocket(0, 50, loopback());
            loop = Thread.ofPlatform().daemon().start(() -> {
                while (!server.isClosed()) {
                    try {
                        Socket s = server.accept();
                        Thread.ofVirtual().start(() -> echo(s));
                    } catch (IOException e) {
                        return;
                    }
                }
            });
        }

        private static void echo(Socket s) {
            try (s; InputStream in = s.getInputStream(); OutputStream out = s.getOutputStream()) {
                in.transferTo(out);
                s.shutdownOutput();
            } catch (IOException e) {
                // The test closed its side.
            }
        }

        int port() {
            return server.getLocalPort();
        }

        @Override
        public void close() throws IOException {
            server.close();
            try {
                loop.join(WAIT.toMillis());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** A real HTTP server on loopback that answers every request with what it received. */
    static WebServer httpUpstream() {
        return WebServer.builder().host("127.0.0.1").port(0)
                .routing(r -> r.any((req, res) -> {
                    String auth = req.headers().first(io.helidon.http.HeaderNames.AUTHORIZATION).orElse("-");
                    String body = req.content().hasEntity() ? req.content().as(String.class) : "";
                    res.send(req.prologue().method().text() + " " + req.path().rawPath() + " auth=" + auth
                            + " body=" + body);
                }))
                .build().start();
    }

    /** Sends raw bytes as the workload. */
    static void send(Socket s, String text) throws IOException {
        s.getOutputStream().write(text.getBytes(StandardCharsets.ISO_8859_1));
        s.getOutputStream().flush();
    }

    /** Reads one response as the workload: status, headers, body. */
    static Response read(HttpInput in, String method) throws IOException {
        HttpHead head = HttpParser.readResponse(in, method);
        java.io.ByteArrayOutputStream body = new java.io.ByteArrayOutputStream();
        HttpParser.copyBody(in, body, head, new byte[4096], n -> { });
        return new Response(head.status(), head, body.toString(StandardCharsets.UTF_8));
    }

    record Response(int status, HttpHead head, String body) {
    }

    static Map<String, InetAddress> aliasToLoopback(String... names) {
        java.util.HashMap<String, InetAddress> m = new java.util.HashMap<>();
        for (String n : names) {
            m.put(n, loopback());
        }
        return m;
    }
}
