package openshell.tests.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import openshell.driver.ComputeDriver;
import openshell.driver.DialDirection;
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
import openshell.tests.support.LoopbackResolver;
import org.junit.jupiter.api.Test;

/**
 * The README's main job, below the gateway: an agent in a sandbox created by the process driver
 * makes an allowed request with curl, one to an undeclared host, the allowed request again from
 * another binary (python3), and a request the L7 rules deny. Loopback only ({@link Loopback}): the
 * upstreams are real servers on 127.0.0.1 reached through operator host aliases (policy never
 * allows loopback otherwise), and one name no alias answers is resolved by the test's own DNS
 * server on loopback, which the supervisor asks because the bundle names it
 * ({@code upstreamResolver}, the gateway's {@code --upstream-resolver}).
 */
class AgentInASandboxTest {
    /** Longest wait for the agent to finish its four requests (two JVM starts, 2 cores). */
    private static final Duration AGENT_WAIT = Duration.ofSeconds(240);
    private static final int WORKLOAD_ID = 1000;
    private static final String ALLOWED_BODY = "allowed-body-7f3a";
    private static final String RESOLVED_BODY = "resolved-body-2b9d";
    /** The L7 endpoint: an operator alias of 127.0.0.1. */
    private static final String API = "api.sandbox.test";
    /** The opaque endpoint: an alias of 127.0.0.1 too. */
    private static final String RAW = "raw.sandbox.test";
    /** A name only the test's resolver knows: the namespace's own address, {@link Loopback#NAMESPACE_ADDRESS}. */
    private static final String RESOLVED = "resolved.sandbox.test";

    @Test
    void anAgentIsAllowedOneRequestAndDeniedAnUndeclaredHostAnotherBinaryAndAnL7Rule() throws Exception {
        if (!"root".equals(System.getProperty("user.name"))) {
            fail("this end-to-end test needs root: the process driver maps a private uid range for each sandbox");
        }
        Loopback.assertOnly();
        InetAddress loopback = InetAddress.getLoopbackAddress();
        List<String> upstreamSaw = new CopyOnWriteArrayList<>();
        com.sun.net.httpserver.HttpHandler handler = exchange -> {
            upstreamSaw.add(exchange.getRequestMethod() + " " + exchange.getRequestURI().getPath());
            String path = exchange.getRequestURI().getPath();
            byte[] body = (path.equals("/allowed") ? ALLOWED_BODY : path.equals("/resolved") ? RESOLVED_BODY
                    : "upstream-should-never-answer").getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(200, body.length);
            exchange.getResponseBody().write(body);
            exchange.close();
        };
        HttpServer upstream = HttpServer.create(new InetSocketAddress(loopback, 0), 16);
        upstream.createContext("/", handler);
        upstream.start();
        // The resolved name's upstream: on the namespace's own address, which the resolver answers for it.
        HttpServer named = HttpServer.create(new InetSocketAddress(Loopback.NAMESPACE_ADDRESS, 0), 16);
        named.createContext("/", handler);
        named.start();
        LoopbackResolver dns = LoopbackResolver.start(Map.of(RESOLVED, Loopback.NAMESPACE_ADDRESS), 0);
        String base = "http://" + API + ":" + upstream.getAddress().getPort();
        // An opaque endpoint: the supervisor relays it natively (the runtime hands the socket over).
        ServerSocket echo = new ServerSocket(0, 16, loopback);
        Thread echoing = Thread.ofPlatform().daemon().name("echo").start(() -> echoUntilClosed(echo));

        SandboxDirs dirs = SandboxDirs.create("agent");
        Path workspace = dirs.workspace();
        Path runRoot = dirs.runRoot();
        Path agent = Files.writeString(workspace.resolve("agent.sh"), agentScript(base,
                "http://" + RESOLVED + ":" + named.getAddress().getPort(), echo.getLocalPort()));
        Files.setPosixFilePermissions(agent, PosixFilePermissions.fromString("rwxr-xr-x"));

        String policy = """
                version: 1
                network_policies:
                  demo:
                    endpoints:
                      - host: "%1$s"
                        port: %2$d
                        protocol: rest
                        rules:
                          - {method: GET, path: /allowed}
                    binaries:
                      - path: /usr/bin/curl
                      - path: /usr/bin/getent
                  raw:
                    endpoints:
                      - host: "%4$s"
                        port: %3$d
                        protocol: tcp
                    binaries:
                      - path: "/usr/bin/python3*"
                  resolved:
                    endpoints:
                      - host: "%5$s"
                        port: %6$d
                        protocol: rest
                        rules:
                          - {method: GET, path: /resolved}
                    binaries:
                      - path: /usr/bin/curl
                """.formatted(API, upstream.getAddress().getPort(), echo.getLocalPort(), RAW, RESOLVED, named.getAddress().getPort());
        SandboxId id = new SandboxId("e2e-" + Long.toHexString(System.nanoTime() & 0xffffff));
        SandboxSessionId session = SandboxSessionId.fresh();
        Map<String, String> env = Map.of("PATH", "/usr/bin:/bin", "HOME", workspace.toString(), "OUT", workspace.toString());
        TokenIssuer issuer = TokenIssuer.generate("openshell-gateway", "gateway-key-1", java.time.Clock.systemUTC());
        LaunchBundles.Minted minted = LaunchBundles.mint(LaunchBundles.Request.builder().sandboxId(id.value())
                .sessionId(session.value()).generation(1).policyYaml(policy)
                .agent(new LaunchBundles.Agent(List.of("/bin/bash", agent.toString()), env, workspace.toString()))
                .workload(WORKLOAD_ID, WORKLOAD_ID)
                .hostAlias(API, loopback).hostAlias(RAW, loopback)
                .upstreamResolver(dns.address()).build(), issuer, 1);

        ComputeDriver driver = dirs.driver();
        SandboxContext context = new SandboxContext(id, session, PolicySnapshot.of(1, policy.getBytes(StandardCharsets.UTF_8)),
                new AgentSpec(List.of("/bin/bash", agent.toString()), env, workspace.toString()),
                new WorkloadIdentity(WORKLOAD_ID, WORKLOAD_ID, List.of()));
        Provisioned provisioned = driver.create(new LaunchPlan(context, 1,
                LaunchMaterial.of(minted.supervisorBundle(), minted.runtimeBundle()), Map.of("workspace", workspace.toString())));
        Path supervisorLog = dirs.sandboxState(id).resolve("supervisor.log");
        Path runtimeLog = dirs.sandboxState(id).resolve("runtime.log");
        try {
            assertEquals(DialDirection.RUNTIME_INITIATED, provisioned.direction());
            Path done = workspace.resolve("done");
            long deadline = System.nanoTime() + AGENT_WAIT.toNanos();
            while (!Files.exists(done) && System.nanoTime() < deadline && !text(supervisorLog).contains("the agent ended")
                    && !text(supervisorLog).contains("boundary failed")) {
                Thread.sleep(200);
            }
            String logs = "\n--- supervisor.log\n" + text(supervisorLog) + "\n--- runtime.log\n" + text(runtimeLog)
                    + "\n--- agent\n" + text(workspace.resolve("agent.log"));
            assertTrue(Files.exists(done), "the agent did not finish within " + AGENT_WAIT + logs);

            String supervisor = text(supervisorLog);
            assertTrue(supervisor.lines().anyMatch(l -> l.startsWith("{\"ready\":true,\"admin\":\"http://127.0.0.1:")), logs);

            // Denied: an undeclared host (its name is not answered, and nothing is dialled).
            assertFalse(text(workspace.resolve("undeclared.code")).strip().equals("200"), logs);
            assertFalse(text(workspace.resolve("undeclared.rc")).strip().equals("0"), logs);
            // Denied: the allowed URL from another binary; the connect fails with EACCES.
            String python = text(workspace.resolve("python.out"));
            assertTrue(python.startsWith("denied") && python.contains("PermissionError(13"), python + logs);
            // Denied by the L7 rule: the supervisor answers 403 with a JSON body naming why.
            assertEquals("403", text(workspace.resolve("forbidden.code")).strip(), logs);
            assertTrue(text(workspace.resolve("forbidden.body")).contains("{"), logs);
            assertFalse(upstreamSaw.contains("GET /forbidden"), "the upstream never saw the denied request: " + upstreamSaw);
            // Allowed: curl reaches the upstream through the supervisor.
            assertEquals("200", text(workspace.resolve("allowed.code")).strip(), logs);
            assertEquals(ALLOWED_BODY, text(workspace.resolve("allowed.body")), logs);
            assertTrue(upstreamSaw.contains("GET /allowed"), upstreamSaw.toString());
            // The workload dialled the alias's stand-in: the host's loopback is never the sandbox's address for it.
            assertTrue(text(workspace.resolve("standin")).strip().startsWith("198.18."), text(workspace.resolve("standin")) + logs);
            // Allowed, the name resolved by the operator's resolver on loopback and nothing else.
            assertEquals("200", text(workspace.resolve("resolved.code")).strip(), logs);
            assertEquals(RESOLVED_BODY, text(workspace.resolve("resolved.body")), logs);
            assertTrue(dns.asked().contains(RESOLVED + "/1"), "the supervisor asked the test's resolver: " + dns.asked());
            assertTrue(dns.asked().stream().allMatch(q -> q.startsWith(RESOLVED + "/")),
                    "aliases and denied names are never resolved: " + dns.asked());

            // Allowed and relayed natively: 1 MiB each way through the handed-off socket, the
            // client's half-close reaching the server, the echo coming back whole after it.
            String raw = text(workspace.resolve("raw.out"));
            assertTrue(raw.startsWith("echoed 1048576 "), raw + logs);
            assertTrue(raw.strip().endsWith(" same"), raw + logs);

            // One audit line per decision, with the binary that made it.
            List<String> audit = supervisor.lines().filter(l -> l.startsWith("{\"time\"")).toList();
            assertTrue(audit.stream().anyMatch(l -> l.contains("\"decision\":\"allow\"") && l.contains("/usr/bin/curl")
                    && l.contains(API)), audit.toString());
            Loopback.assertDialledOnlyLoopback(supervisor);
            assertTrue(audit.stream().anyMatch(l -> l.contains("\"decision\":\"deny\"") && l.contains("python3")), audit.toString());
            assertTrue(audit.stream().anyMatch(l -> l.contains("\"decision\":\"deny\"") && l.contains("/forbidden")), audit.toString());
            assertTrue(audit.stream().anyMatch(l -> l.contains("\"decision\":\"allow\"") && l.contains("\"relay\":\"native\"")
                    && l.contains("python3")), audit.toString());

            // The connects and the DNS query were announced and decided on the descriptor lane, not
            // on a gRPC stream each (the supervisor reports the lane's count when the agent ended).
            long laneDeadline = System.nanoTime() + AGENT_WAIT.toNanos();
            java.util.Optional<String> laneLine = java.util.Optional.empty();
            while (laneLine.isEmpty() && System.nanoTime() < laneDeadline) {
                laneLine = text(supervisorLog).lines().filter(l -> l.contains("the descriptor lane carried")).findFirst();
                if (laneLine.isEmpty()) {
                    Thread.sleep(200);
                }
            }
            java.util.regex.Matcher lane = java.util.regex.Pattern.compile("carried (\\d+) connects and (\\d+) DNS queries")
                    .matcher(laneLine.orElse(""));
            assertTrue(lane.find(), "no lane count in the supervisor's log" + logs);
            assertTrue(Long.parseLong(lane.group(1)) >= 3, laneLine.get());
            assertTrue(Long.parseLong(lane.group(2)) >= 1, laneLine.get());
        } finally {
            driver.delete(id, provisioned.state());
            upstream.stop(0);
            named.stop(0);
            dns.close();
            echo.close();
            echoing.join(10_000);
        }
        assertFalse(Files.exists(runRoot.resolve(id.value())), "the run directory is gone");
        Files.delete(runRoot);
    }

    /** Echoes each connection: everything until the client's half-close, then closes. */
    private static void echoUntilClosed(ServerSocket server) {
        while (!server.isClosed()) {
            try (Socket s = server.accept()) {
                byte[] all = s.getInputStream().readAllBytes();
                s.getOutputStream().write(all);
                s.shutdownOutput();
            } catch (IOException e) {
                // closed at the end of the test, or a client that went away
            }
        }
    }

    /**
     * The agent: six requests, each outcome written to the workspace for the test to read. python3
     * asks for the allowed URL at the address getent was given for its name (the alias's stand-in;
     * getent may resolve it, and never connects; "hosts", as getaddrinfo's AI_ADDRCONFIG would not ask in a
     * namespace with loopback only): the name is not answered for python3, and the
     * connect itself must be refused.
     */
    private static String agentScript(String base, String resolvedBase, int echoPort) {
        return """
                #!/bin/bash
                exec >"$OUT/agent.log" 2>&1
                cd "$OUT"
                id
                curl -sS -o allowed.body -w '%%{http_code}' --max-time 60 %1$s/allowed >allowed.code; echo $? >allowed.rc
                standin=$(getent hosts %5$s | awk 'NR == 1 {print $1}'); echo "$standin" >standin
                curl -sS -o /dev/null -w '%%{http_code}' --max-time 60 http://undeclared.example.test/ >undeclared.code; echo $? >undeclared.rc
                curl -sS -o resolved.body -w '%%{http_code}' --max-time 60 %4$s/resolved >resolved.code; echo $? >resolved.rc
                STANDIN="$standin" /usr/bin/python3 - >python.out 2>&1 <<'PY'
                import os, urllib.request
                try:
                    urllib.request.urlopen('%1$s/allowed'.replace('%5$s', os.environ['STANDIN']), timeout=60).read()
                    print('allowed')
                except Exception as e:
                    print('denied', repr(e))
                PY
                curl -sS -o forbidden.body -w '%%{http_code}' --max-time 60 %1$s/forbidden >forbidden.code; echo $? >forbidden.rc
                /usr/bin/python3 - >raw.out 2>&1 <<'PY'
                import hashlib, os, socket, threading
                data = os.urandom(1 << 20)
                s = socket.create_connection(('%2$s', %3$d), timeout=60)
                def send():
                    s.sendall(data)
                    s.shutdown(socket.SHUT_WR)
                t = threading.Thread(target=send)
                t.start()
                got = bytearray()
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    got += chunk
                t.join()
                print('echoed', len(got), 'same' if hashlib.sha256(got).digest() == hashlib.sha256(data).digest() else 'different')
                PY
                touch done
                """.formatted(base, RAW, echoPort, resolvedBase, API);
    }

    private static String text(Path file) {
        try {
            return Files.exists(file) ? Files.readString(file) : "";
        } catch (IOException e) {
            return "(unreadable: " + e.getMessage() + ")";
        }
    }
}
