package openshell.tests.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
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
 * Clients nobody here wrote (curl, wget, python3's urllib, node's fetch, git over smart HTTP),
 * in a process-driver sandbox, against upstreams that close the connection right after their
 * response (HTTP/1.0, and HTTP/1.1 with {@code Connection: close}) on {@code protocol: rest}
 * endpoints, plain and inside intercepted TLS. Every byte an upstream sent before closing must
 * reach the workload, in order, before its end of stream; so must the supervisor's own 403. The
 * upstreams listen on the host's loopback and are reached through operator host aliases.
 */
class RealClientsTest {
    /** Longest wait for the agent's loops (two JVM starts and ~2,500 mediated requests on 2 cores). */
    private static final Duration AGENT_WAIT = Duration.ofSeconds(420);
    /** Requests per client and server in the loops (the issue's floor). */
    private static final int LOOP = 200;
    /** Requests per client over intercepted TLS, and of the supervisor's own 403. */
    private static final int TLS_LOOP = 100;
    private static final int DENIED_LOOP = 50;
    private static final int SMALL = 20_000;
    private static final int LARGE = 4 * 1024 * 1024;
    private static final int WORKLOAD_ID = 1000;
    private static final String H10 = "h10.close.test";
    private static final String H11 = "h11.close.test";
    private static final String TLS = "tls.close.test";
    private static final String GIT = "git.close.test";

    @Test
    void everyByteAnUpstreamSentBeforeClosingReachesEachClient() throws Exception {
        if (!"root".equals(System.getProperty("user.name"))) {
            fail("this end-to-end test needs root: the process driver maps a private uid range for each sandbox");
        }
        // Listed as users write it: /usr/bin/python3 is a symlink (to python3.11 on Debian), and the
        // kernel reports the target; the supervisor expands policy paths in the workload's view.
        String python = "/usr/bin/python3";
        realPath(python);
        assertTrue(Files.isSymbolicLink(Path.of(python)), python + " is a symlink here, or this test shows nothing of expansion");
        String node = realPath("/usr/bin/node");
        String wget = realPath("/usr/bin/wget");
        String gitRemote = realPath("/usr/lib/git-core/git-remote-http");
        realPath("/usr/bin/git");

        SandboxDirs dirs = SandboxDirs.create("clients");
        Path root = dirs.root();
        Path workspace = dirs.workspace();
        Path pki = Files.createDirectory(root.resolve("pki"));
        DemoPki demo = DemoPki.create(pki, TLS);

        Path gitRoot = Files.createDirectory(root.resolve("git"));
        Files.setPosixFilePermissions(gitRoot, PosixFilePermissions.fromString("rwxr-xr-x"));
        String commit = bareRepository(gitRoot);

        try (ClosingHttpServer h10 = ClosingHttpServer.start(true, null);
             ClosingHttpServer h11 = ClosingHttpServer.start(false, null);
             ClosingHttpServer tls = ClosingHttpServer.start(true, demo.server());
             GitServer git = GitServer.start(gitRoot)) {
            Files.write(workspace.resolve("expected-small"), ClosingHttpServer.body(SMALL));
            Files.write(workspace.resolve("expected-large"), ClosingHttpServer.body(LARGE));
            Files.writeString(workspace.resolve("urllib_loop.py"), PYTHON_LOOP);
            Files.writeString(workspace.resolve("fetch_loop.js"), NODE_LOOP);
            Files.writeString(workspace.resolve("linger.py"), PYTHON_LINGER);
            Path agent = Files.writeString(workspace.resolve("agent.sh"), agentScript(h10.port(), h11.port(), tls.port(), git.port()));
            Files.setPosixFilePermissions(agent, PosixFilePermissions.fromString("rwxr-xr-x"));

            String policy = """
                    version: 1
                    network_policies:
                      closing:
                        endpoints:
                          - {host: %1$s, port: %2$d, protocol: rest, rules: [{method: GET, path: "/len/**"}, {method: GET, path: "/eof/**"}]}
                          - {host: %3$s, port: %4$d, protocol: rest, rules: [{method: GET, path: "/len/**"}, {method: GET, path: "/chunked/**"}]}
                          - {host: %5$s, port: %6$d, protocol: rest, rules: [{method: GET, path: "/len/**"}, {method: GET, path: "/eof/**"}]}
                        binaries:
                          - path: /usr/bin/curl
                          - path: %7$s
                          - path: %8$s
                          - path: %9$s
                      git:
                        endpoints:
                          - {host: %10$s, port: %11$d, protocol: rest, rules: [{method: GET, path: "/cgi-bin/git/**"}, {method: POST, path: "/cgi-bin/git/**"}]}
                        binaries:
                          - path: %12$s
                    """.formatted(H10, h10.port(), H11, h11.port(), TLS, tls.port(), wget, python, node, GIT, git.port(), gitRemote);
            SandboxId id = new SandboxId("clients-" + Long.toHexString(System.nanoTime() & 0xffffff));
            SandboxSessionId session = SandboxSessionId.fresh();
            Map<String, String> env = Map.of("PATH", "/usr/bin:/bin", "HOME", workspace.toString(), "OUT", workspace.toString());
            TokenIssuer issuer = TokenIssuer.generate("openshell-gateway", "gateway-key-1", java.time.Clock.systemUTC());
            LaunchBundles.Request.Builder request = LaunchBundles.Request.builder().sandboxId(id.value())
                    .sessionId(session.value()).generation(1).policyYaml(policy)
                    .agent(new LaunchBundles.Agent(List.of("/bin/bash", agent.toString()), env, workspace.toString()))
                    .workload(WORKLOAD_ID, WORKLOAD_ID)
                    .upstreamAuthority(demo.ca());
            for (String name : List.of(H10, H11, TLS, GIT)) {
                request.hostAlias(name, InetAddress.getLoopbackAddress());
            }
            LaunchBundles.Minted minted = LaunchBundles.mint(request.build(), issuer, 1);

            ComputeDriver driver = dirs.driver();
            SandboxContext context = new SandboxContext(id, session, PolicySnapshot.of(1, policy.getBytes(StandardCharsets.UTF_8)),
                    new AgentSpec(List.of("/bin/bash", agent.toString()), env, workspace.toString()),
                    new WorkloadIdentity(WORKLOAD_ID, WORKLOAD_ID, List.of()));
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
                String logs = "\n--- agent\n" + text(workspace.resolve("agent.log")) + "\n--- results\n"
                        + text(workspace.resolve("results")) + "\n--- runtime.log (tail)\n" + tail(text(sandboxState.resolve("runtime.log")))
                        + "\n--- supervisor.log (tail)\n" + tail(text(sandboxState.resolve("supervisor.log")));
                assertTrue(Files.exists(done), "the agent did not finish within " + AGENT_WAIT + logs);

                Map<String, String> results = new LinkedHashMap<>();
                for (String line : text(workspace.resolve("results")).strip().split("\n")) {
                    String[] parts = line.split(" ", 2);
                    results.put(parts[0], parts.length > 1 ? parts[1] : "");
                }
                Map<String, Integer> expected = new LinkedHashMap<>();
                for (String client : List.of("curl", "wget", "python", "node")) {
                    expected.put(client + "-h10", LOOP);
                    expected.put(client + "-h11", LOOP);
                }
                expected.put("curl-tls", TLS_LOOP);
                expected.put("python-tls", TLS_LOOP);
                for (String big : List.of("h10-len", "h10-eof", "h11-len", "h11-chunked", "tls-len", "tls-eof")) {
                    expected.put("large-curl-" + big, 1);
                }
                expected.put("large-python-h10-eof", 1);
                expected.put("denied-403", DENIED_LOOP);
                expected.put("denied-403-tls", DENIED_LOOP);
                List<String> wrong = new ArrayList<>();
                expected.forEach((name, count) -> {
                    String got = results.getOrDefault(name, "(missing)");
                    if (!got.startsWith(count + " ") && !got.equals(String.valueOf(count))) {
                        wrong.add(name + ": " + got + " of " + count);
                    }
                });
                assertEquals(List.of(), wrong, "complete responses per client and server" + logs);
                assertEquals(commit, text(workspace.resolve("git.out")).strip(), "git clone over smart HTTP from an HTTP/1.0 server" + logs);
                // A workload that keeps its side open after the end is cut at RELAY_LINGER (10 s), not before, not never.
                java.util.regex.Matcher linger = java.util.regex.Pattern.compile("cut after ([0-9.]+) s, (\\d+) bytes")
                        .matcher(text(workspace.resolve("linger.out")));
                assertTrue(linger.find(), "linger: " + text(workspace.resolve("linger.out")) + logs);
                double cutAfter = Double.parseDouble(linger.group(1));
                assertTrue(cutAfter >= 9.5 && cutAfter < 20, "cut after " + cutAfter + " s, RELAY_LINGER is 10 s");
                assertTrue(Integer.parseInt(linger.group(2)) > 100, "the response came whole first: " + linger.group(2));
                // The upstreams answered every allowed request exactly once (nothing retried behind the client's back).
                assertEquals(4 * LOOP + 2 + 1 + 1, h10.answered(), logs);
                assertEquals(4 * LOOP + 2, h11.answered(), logs);
                assertEquals(2 * TLS_LOOP + 2, tls.answered(), logs);
            } finally {
                driver.delete(id, provisioned.state());
            }
            Files.delete(dirs.runRoot());
        }
    }

    /** One process, {@code n} sequential requests (urllib always sends {@code Connection: close}). */
    private static final String PYTHON_LOOP = """
            import sys, urllib.request
            n = int(sys.argv[1]); expected = open(sys.argv[2], 'rb').read(); urls = sys.argv[3:]
            ok = 0; errors = {}
            for i in range(n):
                try:
                    with urllib.request.urlopen(urls[i % len(urls)], timeout=60) as r:
                        body = r.read()
                    if body == expected:
                        ok += 1
                    else:
                        errors['short %d' % len(body)] = errors.get('short %d' % len(body), 0) + 1
                except Exception as e:
                    k = type(e).__name__ + ':' + str(e)[:60]
                    errors[k] = errors.get(k, 0) + 1
            print(ok, errors)
            """;

    /**
     * A client that reads a response to its end and then keeps its side open, writing: the relay
     * drops what it sends and cuts it once {@code RELAY_LINGER} (10 s) has passed.
     */
    private static final String PYTHON_LINGER = """
            import socket, sys, time
            s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60)
            s.sendall(b'GET /eof/100 HTTP/1.1\\r\\nHost: %s:%s\\r\\n\\r\\n' % (sys.argv[1].encode(), sys.argv[2].encode()))
            got = b''
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
            ended = time.monotonic()
            try:
                while time.monotonic() - ended < 40:
                    s.send(b'x')
                    time.sleep(0.2)
                print('never cut', len(got))
            except OSError as e:
                print('cut after %.1f s, %d bytes read first' % (time.monotonic() - ended, len(got)))
            """;

    /** One process, {@code n} sequential fetches (undici). */
    private static final String NODE_LOOP = """
            const fs = require('fs');
            const [n, expectedFile, ...urls] = process.argv.slice(2);
            const expected = fs.readFileSync(expectedFile);
            (async () => {
              let ok = 0; const errors = {};
              for (let i = 0; i < Number(n); i++) {
                try {
                  const r = await fetch(urls[i % urls.length]);
                  const body = Buffer.from(await r.arrayBuffer());
                  if (body.equals(expected)) ok++; else errors['short ' + body.length] = (errors['short ' + body.length] || 0) + 1;
                } catch (e) {
                  const k = (e.cause && (e.cause.code || e.cause.name)) || e.name;
                  errors[k] = (errors[k] || 0) + 1;
                }
              }
              console.log(ok, JSON.stringify(errors));
            })();
            """;

    private static String agentScript(int h10, int h11, int tls, int git) {
        return """
                #!/bin/bash
                exec >"$OUT/agent.log" 2>&1
                cd "$OUT"
                N=%5$d; T=%6$d; D=%7$d
                H10="http://%8$s:%1$d"; H11="http://%9$s:%2$d"; TLS="https://%10$s:%3$d"
                # name n expected url... : n sequential runs of a command, counting the complete bodies
                count() {
                  local name=$1 n=$2 expected=$3 tool=$4; shift 4; local urls=("$@") ok=0 i
                  for ((i = 0; i < n; i++)); do
                    rm -f got
                    case $tool in
                      curl) curl -sS -o got --max-time 60 "${urls[i %% ${#urls[@]}]}" 2>>curl.err ;;
                      wget) wget -q -O got --timeout=60 --tries=1 "${urls[i %% ${#urls[@]}]}" 2>>wget.err ;;
                    esac
                    cmp -s got "$expected" && ok=$((ok + 1))
                  done
                  echo "$name $ok" >>results
                }
                count curl-h10 $N expected-small curl "$H10/len/%4$d" "$H10/eof/%4$d"
                count curl-h11 $N expected-small curl "$H11/len/%4$d" "$H11/chunked/%4$d"
                count wget-h10 $N expected-small wget "$H10/len/%4$d" "$H10/eof/%4$d"
                count wget-h11 $N expected-small wget "$H11/len/%4$d" "$H11/chunked/%4$d"
                count curl-tls $T expected-small curl "$TLS/len/%4$d" "$TLS/eof/%4$d"
                echo "python-h10 $(python3 urllib_loop.py $N expected-small "$H10/len/%4$d" "$H10/eof/%4$d" 2>&1)" >>results
                echo "python-h11 $(python3 urllib_loop.py $N expected-small "$H11/len/%4$d" "$H11/chunked/%4$d" 2>&1)" >>results
                echo "python-tls $(python3 urllib_loop.py $T expected-small "$TLS/len/%4$d" "$TLS/eof/%4$d" 2>&1)" >>results
                echo "node-h10 $(node fetch_loop.js $N expected-small "$H10/len/%4$d" "$H10/eof/%4$d" 2>&1)" >>results
                echo "node-h11 $(node fetch_loop.js $N expected-small "$H11/len/%4$d" "$H11/chunked/%4$d" 2>&1)" >>results
                for v in h10-len h10-eof h11-len h11-chunked tls-len tls-eof; do
                  case $v in h10-*) base=$H10 ;; h11-*) base=$H11 ;; tls-*) base=$TLS ;; esac
                  count large-curl-$v 1 expected-large curl "$base/${v#*-}/%11$d"
                done
                echo "large-python-h10-eof $(python3 urllib_loop.py 1 expected-large "$H10/eof/%11$d" 2>&1)" >>results
                # The supervisor's own 403, on a connection it then closes: its whole JSON body arrives.
                denied() {
                  local name=$1 url=$2 ok=0 i
                  for ((i = 0; i < D; i++)); do
                    rm -f got
                    code=$(curl -sS -o got -w '%%{http_code}' -H 'Connection: close' --max-time 60 "$url" 2>>curl.err)
                    [ "$code" = 403 ] && [ "$(tail -c 1 got)" = "}" ] && grep -q '"cause":"' got && ok=$((ok + 1))
                  done
                  echo "$name $ok" >>results
                }
                denied denied-403 "$H11/denied/5"
                denied denied-403-tls "$TLS/denied/5"
                git clone -q "http://%12$s:%13$d/cgi-bin/git/repo.git" clone >git.err 2>&1 \\
                  && git -C clone log -1 --format=%%H >git.out
                python3 linger.py %8$s %1$d >linger.out 2>&1
                touch done
                """.formatted(h10, h11, tls, SMALL, LOOP, TLS_LOOP, DENIED_LOOP, H10, H11, TLS, LARGE, GIT, git);
    }

    /** A bare repository with one commit under {@code root}/repo.git; returns the commit's id. */
    private static String bareRepository(Path root) throws Exception {
        Path source = root.resolve("source");
        run(root, "git", "init", "-q", "-b", "main", source.toString());
        Files.writeString(source.resolve("README"), "cloned through the sandbox's mediation\n");
        run(source, "git", "add", "README");
        run(source, "git", "-c", "user.name=test", "-c", "user.email=test@close.test", "commit", "-q", "-m", "one");
        run(root, "git", "clone", "-q", "--bare", source.toString(), root.resolve("repo.git").toString());
        // The CGI server runs git http-backend as nobody: it must read the repository.
        run(root, "chmod", "-R", "a+rX", root.toString());
        return run(source, "git", "rev-parse", "HEAD").strip();
    }

    private static String run(Path dir, String... argv) throws Exception {
        Process p = new ProcessBuilder(argv).directory(dir.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            fail(String.join(" ", argv) + " failed: " + out);
        }
        return out;
    }

    /**
     * {@code git http-backend} behind Python's CGI server, which speaks HTTP/1.0 and ends every
     * response by closing: the upstream the issue saw git fail against with "Empty reply".
     */
    private record GitServer(Process process, int port) implements AutoCloseable {
        private static final String SERVER = """
                import http.server, sys
                class Handler(http.server.CGIHTTPRequestHandler):
                    cgi_directories = ['/cgi-bin']
                    def log_message(self, *args):
                        pass
                s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
                print(s.server_address[1], flush=True)
                s.serve_forever()
                """;

        static GitServer start(Path root) throws Exception {
            Path cgi = Files.createDirectory(root.resolve("cgi-bin"));
            Files.setPosixFilePermissions(cgi, PosixFilePermissions.fromString("rwxr-xr-x"));
            Path script = Files.writeString(cgi.resolve("git"), """
                    #!/bin/sh
                    export GIT_PROJECT_ROOT=%s GIT_HTTP_EXPORT_ALL=1
                    export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'
                    exec git http-backend
                    """.formatted(root));
            Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("rwxr-xr-x"));
            Process p = new ProcessBuilder("python3", "-W", "ignore", "-c", SERVER).directory(root.toFile())
                    .redirectError(ProcessBuilder.Redirect.DISCARD).start();
            String line = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.US_ASCII)).readLine();
            if (line == null || !line.matches("[0-9]+")) {
                p.destroyForcibly();
                fail("the git CGI server did not start: " + line);
            }
            return new GitServer(p, Integer.parseInt(line));
        }

        @Override
        public void close() {
            process.destroy();
            try {
                if (!process.waitFor(10, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                }
            } catch (InterruptedException e) {
                process.destroyForcibly();
                Thread.currentThread().interrupt();
            }
        }
    }

    private static String realPath(String path) throws IOException {
        Path p = Path.of(path);
        if (!Files.isExecutable(p)) {
            fail(path + " is missing: this test runs the real client (.ci/run installs it)");
        }
        return p.toRealPath().toString();
    }

    private static String tail(String text) {
        return text.length() <= 6_000 ? text : text.substring(text.length() - 6_000);
    }

    private static String text(Path file) {
        try {
            return Files.exists(file) ? Files.readString(file) : "";
        } catch (IOException e) {
            return "(unreadable: " + e.getMessage() + ")";
        }
    }
}
