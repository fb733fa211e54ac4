package openshell.tests.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import openshell.driver.ComputeDriver;
import openshell.driver.LaunchMaterial;
import openshell.driver.LaunchPlan;
import openshell.driver.Provisioned;
import openshell.isolation.AgentSpec;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.WorkloadIdentity;
import openshell.protocol.LaunchBundles;
import openshell.protocol.TokenIssuer;
import org.junit.jupiter.api.Test;

/**
 * HTTPS through mediation, as a user meets it: a real {@code curl https://...} inside a sandbox
 * created by the process driver, to an HTTPS upstream on the host's loopback reached through an
 * operator host alias, whose certificate comes from a private CA the operator gave the supervisor.
 * curl trusts the supervisor's interception certificate only because the runtime added the
 * sandbox's CA to the workload's trust store; the L7 rules decide on the decrypted requests, and
 * a credential placeholder becomes the real value only for the host its provider is bound to.
 */
class HttpsAgentTest {
    private static final Duration AGENT_WAIT = Duration.ofSeconds(240);
    private static final int WORKLOAD_ID = 1000;
    private static final String API = "api.trust.test";
    private static final String OTHER = "other.trust.test";
    private static final String SECRET = "demo-secret-6c1f";

    @Test
    void curlSpeaksHttpsThroughTheInterceptionCaAndL7RulesDecideTheDecryptedRequests() throws Exception {
        if (!"root".equals(System.getProperty("user.name"))) {
            fail("this end-to-end test needs root: the process driver maps a private uid range for each sandbox");
        }
        SandboxDirs dirs = SandboxDirs.create("https");
        Path root = dirs.root();
        Path workspace = dirs.workspace();
        Path pki = Files.createDirectory(root.resolve("pki"));
        DemoPki demo = DemoPki.create(pki, API, OTHER);
        X509Certificate upstreamCa = demo.ca();

        List<String> upstreamSaw = new CopyOnWriteArrayList<>();
        HttpsServer upstream = HttpsServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 16);
        upstream.setHttpsConfigurator(new HttpsConfigurator(demo.server()));
        upstream.createContext("/", exchange -> {
            String auth = exchange.getRequestHeaders().getFirst("Authorization");
            String seen = exchange.getRequestMethod() + " " + exchange.getRequestHeaders().getFirst("Host") + " "
                    + exchange.getRequestURI().getPath() + " auth=" + auth;
            upstreamSaw.add(seen);
            byte[] body = ("upstream saw " + seen).getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(200, body.length);
            exchange.getResponseBody().write(body);
            exchange.close();
        });
        upstream.start();
        int port = upstream.getAddress().getPort();

        Path agent = Files.writeString(workspace.resolve("agent.sh"), agentScript(port));
        Files.writeString(workspace.resolve("JavaGet.java"), JAVA_CLIENT);
        // A Java client reads neither the PEM bundle nor its variables: only its keystore, which the runtime covers too.
        String javaBinary = Path.of(System.getProperty("java.home"), "bin", "java").toRealPath().toString();
        Files.setPosixFilePermissions(agent, PosixFilePermissions.fromString("rwxr-xr-x"));

        String policy = """
                version: 1
                network_policies:
                  demo:
                    endpoints:
                      - host: %1$s
                        port: %3$d
                        protocol: rest
                        rules:
                          - {method: GET, path: /allowed}
                          - {method: GET, path: /java}
                      - host: %2$s
                        port: %3$d
                        protocol: rest
                        rules:
                          - {method: GET, path: /allowed}
                    binaries:
                      - path: /usr/bin/curl
                      - path: %4$s
                """.formatted(API, OTHER, port, javaBinary);
        SandboxId id = new SandboxId("https-" + Long.toHexString(System.nanoTime() & 0xffffff));
        SandboxSessionId session = SandboxSessionId.fresh();
        Map<String, String> env = Map.of("PATH", "/usr/bin:/bin", "HOME", workspace.toString(), "OUT", workspace.toString(),
                "DEMO_TOKEN", "openshell-credential-demo", "JAVA", javaBinary);
        TokenIssuer issuer = TokenIssuer.generate("openshell-gateway", "gateway-key-1", java.time.Clock.systemUTC());
        LaunchBundles.Minted minted = LaunchBundles.mint(LaunchBundles.Request.builder().sandboxId(id.value())
                .sessionId(session.value()).generation(1).policyYaml(policy)
                .agent(new LaunchBundles.Agent(List.of("/bin/bash", agent.toString()), env, workspace.toString()))
                .workload(WORKLOAD_ID, WORKLOAD_ID)
                .addCredential(new LaunchBundles.Credential("demo", SECRET.getBytes(StandardCharsets.US_ASCII), List.of(API)))
                .hostAlias(API, InetAddress.getLoopbackAddress())
                .hostAlias(OTHER, InetAddress.getLoopbackAddress())
                .upstreamAuthority(upstreamCa).build(), issuer, 1);

        ComputeDriver driver = dirs.driver();
        SandboxContext context = new SandboxContext(id, session, PolicySnapshot.of(1, policy.getBytes(StandardCharsets.UTF_8)),
                new AgentSpec(List.of("/bin/bash", agent.toString()), env, workspace.toString()),
                new WorkloadIdentity(WORKLOAD_ID, WORKLOAD_ID, List.of()));
        Path hostBundle = Path.of("/etc/ssl/certs/ca-certificates.crt");
        String hostBundleBefore = Files.isRegularFile(hostBundle) ? Files.readString(hostBundle, StandardCharsets.ISO_8859_1) : "";
        Provisioned provisioned = driver.create(new LaunchPlan(context, 1,
                LaunchMaterial.of(minted.supervisorBundle(), minted.runtimeBundle()), Map.of("workspace", workspace.toString())));
        Path sandboxState = dirs.sandboxState(id);
        try {
            Path done = workspace.resolve("done");
            long deadline = System.nanoTime() + AGENT_WAIT.toNanos();
            while (!Files.exists(done) && System.nanoTime() < deadline
                    && !text(sandboxState.resolve("supervisor.log")).contains("the agent ended")
                    && !text(sandboxState.resolve("supervisor.log")).contains("boundary failed")) {
                Thread.sleep(200);
            }
            String supervisor = text(sandboxState.resolve("supervisor.log"));
            String logs = "\n--- supervisor.log\n" + supervisor + "\n--- runtime.log\n" + text(sandboxState.resolve("runtime.log"))
                    + "\n--- agent\n" + text(workspace.resolve("agent.log")) + "\n--- upstream saw " + upstreamSaw;
            assertTrue(Files.exists(done), "the agent did not finish within " + AGENT_WAIT + logs);

            // The runtime put the sandbox's CA into the workload's view of its trust store, and said where.
            assertTrue(text(workspace.resolve("trust.out")).contains("OpenShell sandbox " + id.value() + " interception CA"), logs);
            String variables = text(workspace.resolve("env.out"));
            for (String v : List.of("SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")) {
                assertTrue(variables.contains(v + "=/etc/"), v + " in " + variables + logs);
            }
            // Allowed: curl verified the interception certificate; the supervisor verified the upstream's with the operator CA.
            assertEquals("200", text(workspace.resolve("allowed.code")).strip(), logs);
            assertEquals("upstream saw GET " + API + ":" + port + " /allowed auth=null", text(workspace.resolve("allowed.body")), logs);
            // L7 on the decrypted requests: another path and another method are refused with the JSON body.
            assertEquals("403", text(workspace.resolve("forbidden.code")).strip(), logs);
            assertTrue(text(workspace.resolve("forbidden.body")).startsWith("{"), logs);
            assertEquals("403", text(workspace.resolve("post.code")).strip(), logs);
            assertTrue(text(workspace.resolve("post.body")).contains("no rule allows POST /allowed"), logs);
            // The credential: the real value reached only its host; the placeholder to the other alias was refused.
            assertEquals("200", text(workspace.resolve("credential.code")).strip(), logs);
            assertTrue(text(workspace.resolve("credential.body")).endsWith("auth=Bearer " + SECRET), logs);
            assertEquals("403", text(workspace.resolve("misdirected.code")).strip(), logs);
            assertFalse(text(workspace.resolve("misdirected.body")).contains(SECRET), logs);
            // Java's own trust store (its cacerts, covered with the interception CA added) verified the certificate.
            assertEquals("200 upstream saw GET " + API + ":" + port + " /java auth=null", text(workspace.resolve("java.out")),
                    logs + "\n--- java.err\n" + text(workspace.resolve("java.err")));
            assertEquals(List.of("GET " + API + ":" + port + " /allowed auth=null",
                    "GET " + API + ":" + port + " /allowed auth=Bearer " + SECRET,
                    "GET " + API + ":" + port + " /java auth=null"), upstreamSaw, logs);
            assertFalse(supervisor.contains(SECRET), "no secret in the supervisor's log or audit");
        } finally {
            driver.delete(id, provisioned.state());
            upstream.stop(0);
        }
        String hostBundleAfter = Files.isRegularFile(hostBundle) ? Files.readString(hostBundle, StandardCharsets.ISO_8859_1) : "";
        assertEquals(hostBundleBefore, hostBundleAfter, "the host's trust store is untouched");
        Files.delete(dirs.runRoot());
    }

    /** A plain JDK HTTPS client: default SSLContext, so the default trust store decides. */
    private static final String JAVA_CLIENT = """
            import java.net.URI;
            import java.net.http.HttpClient;
            import java.net.http.HttpRequest;
            import java.net.http.HttpResponse;

            class JavaGet {
                public static void main(String[] args) throws Exception {
                    HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
                    HttpResponse<String> r = client.send(HttpRequest.newBuilder(URI.create(args[0])).build(),
                            HttpResponse.BodyHandlers.ofString());
                    System.out.print(r.statusCode() + " " + r.body());
                }
            }
            """;

    private static String agentScript(int port) {
        return """
                #!/bin/bash
                exec >"$OUT/agent.log" 2>&1
                cd "$OUT"
                env | grep -E '^(SSL_CERT_FILE|CURL_CA_BUNDLE|REQUESTS_CA_BUNDLE|NODE_EXTRA_CA_CERTS)=' >env.out
                grep '^# ' "$SSL_CERT_FILE" >trust.out
                c() { out=$1; shift; curl -sS -o "$out.body" -w '%%{http_code}' --max-time 60 "$@" >"$out.code"; echo $? >"$out.rc"; }
                c allowed https://%1$s:%3$d/allowed
                c forbidden https://%1$s:%3$d/forbidden
                c post -X POST https://%1$s:%3$d/allowed
                c credential -H "Authorization: Bearer $DEMO_TOKEN" https://%1$s:%3$d/allowed
                c misdirected -H "Authorization: Bearer $DEMO_TOKEN" https://%2$s:%3$d/allowed
                "$JAVA" -Xshare:off "$OUT/JavaGet.java" https://%1$s:%3$d/java >java.out 2>java.err
                touch done
                """.formatted(API, OTHER, port);
    }

    private static String text(Path file) {
        try {
            return Files.exists(file) ? Files.readString(file) : "";
        } catch (IOException e) {
            return "(unreadable: " + e.getMessage() + ")";
        }
    }
}
