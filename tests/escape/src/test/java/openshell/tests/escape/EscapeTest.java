package openshell.tests.escape;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import openshell.driver.ComputeDriver;
import openshell.driver.DriverEnvironment;
import openshell.driver.DriverRegistry;
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
 * The escape suite in a real sandbox: the process driver starts the real supervisor and sandbox
 * runtime, whose agent runs every bypass attempt (a C program and a Python script) and then one
 * request the policy allows (curl). Loopback only ({@link Loopback}): the upstream is a plain TCP
 * server on 127.0.0.1 behind an operator host alias, declared in the policy for {@code /usr/bin/curl}
 * only (and {@code getent}, which resolves the alias's stand-in address for the attempts and never
 * connects), and every TCP attempt aims at it: besides each attempt's errno, the upstream must have
 * seen exactly one connection, the allowed one.
 */
class EscapeTest {
    /** Longest wait for the agent (two JVM starts, gcc-built programs, 2 loaded cores). */
    private static final Duration AGENT_WAIT = Duration.ofSeconds(300);
    private static final Duration GCC_WAIT = Duration.ofSeconds(120);
    /** Longest wait for a host helper: the abstract-socket listener's start, a host connect, shmget, ipcs, ipcrm. */
    private static final Duration HELPER_WAIT = Duration.ofSeconds(60);
    private static final int WORKLOAD_ID = 1000;
    private static final String ALLOWED_BODY = "allowed-body-5c1e";
    /** The upstream's name: an operator alias of 127.0.0.1. */
    private static final String UPSTREAM = "upstream.escape.test";

    /** Each attempt of escape.c and attempts.py, and how it must fail. */
    private static Map<String, String> expected() {
        Map<String, String> e = new LinkedHashMap<>();
        e.put("raw-socket", "EPERM");
        e.put("packet-socket", "EAFNOSUPPORT");
        e.put("vsock-socket", "EAFNOSUPPORT");
        e.put("sctp-socket", "EPERM");
        e.put("udp-sendto-outside", "EACCES");
        e.put("udp-connect-outside", "EACCES");
        e.put("udp-sendmsg-outside", "EACCES");
        e.put("udp-sendmmsg-second-outside", "EACCES");
        e.put("udp-sendto-upstream", "EACCES");
        e.put("ipv6-mapped-connect", "EACCES");
        e.put("ipv6-connect-undeclared", "EACCES");
        e.put("tcp-connect-denied-binary", "EACCES");
        // The upstream's real address, the host's loopback: inside, loopback is the sandbox's own and nothing listens there.
        e.put("tcp-connect-host-loopback", "ECONNREFUSED");
        e.put("tcp-nonblocking-connect", "EACCES");
        e.put("tcp-sendto-with-address", "EACCES");
        e.put("tcp-msg-fastopen", "EOPNOTSUPP");
        e.put("bind-wildcard", "EACCES");
        // What resolvers do: the unspecified address with port 0, bound by the runtime to loopback.
        e.put("bind-unspecified-port-0", "127.0.0.1");
        e.put("io-uring-setup", "EPERM");
        e.put("unshare-user-namespace", "EPERM");
        e.put("clone3", "ENOSYS");
        e.put("netlink-add-address", "EPERM");
        e.put("ptrace-runtime", "EPERM");
        e.put("open-runtime-memory", "EACCES");
        e.put("process-vm-readv-runtime", "EPERM");
        e.put("runtime-root", "EACCES");
        e.put("runtime-environ", "EACCES");
        e.put("proc-1-root", "EACCES");
        e.put("runtime-fd", "EACCES");
        e.put("kill-runtime", "EPERM");
        e.put("pidfd-getfd-runtime", "EPERM");
        e.put("chroot", "EPERM");
        e.put("setuid-root", "EPERM");
        e.put("mount-proc", "EPERM");
        // A host abstract Unix socket (the containerd-shim escape, CVE-2020-15257, went through one):
        // abstract names live in a network namespace, and the sandbox has its own.
        e.put("host-abstract-socket", "ECONNREFUSED");
        // A host shared-memory segment any host user may attach (mode 0666): the sandbox has its own
        // IPC namespace, where neither its key nor its id names anything.
        e.put("host-shm-by-key", "ENOENT");
        e.put("host-shm-by-id", "EINVAL");
        // The seccomp filter's own EPERM, whatever the host's sysctls allow (perf_event_open was EACCES
        // here by perf_event_paranoid alone, and joining a session keyring succeeded before the filter said no).
        e.put("bpf-prog-load", "EPERM");
        e.put("perf-event-open", "EPERM");
        e.put("userfaultfd", "EPERM");
        e.put("open-by-handle-at", "EPERM");
        e.put("mknod-char-device", "EPERM");
        e.put("keyctl-join-session", "EPERM");
        e.put("add-key", "EPERM");
        e.put("vfork-child-connect", "EACCES");
        e.put("dup2-during-connect", "EACCES");
        e.put("dup2-send", "not connected");
        e.put("runtime-listeners", "NONE");
        e.put("exec-during-connect", "REPLACED");
        e.put("exec-during-connect-status", "0");
        // The supervisor's link and descriptor lane: in a directory of the sandbox's mapped root.
        e.put("link-socket", "EACCES");
        e.put("descriptor-channel", "EACCES");
        // exec of a setuid-root program: no_new_privs (and an owner unmapped in the sandbox) keep the workload's uid.
        e.put("setuid-exec", WORKLOAD_ID + " " + WORKLOAD_ID);
        return e;
    }

    /** How the README writes the i386 attempt's outcome: the filter's SIGSYS, or SIGSEGV without i386 emulation. */
    private static final String I386_OUTCOME = "SYS or SEGV";

    /**
     * The docs read the suite: the README's table holds exactly the attempts of {@link #expected()}
     * and the i386 syscall, each with its outcome, and no README writes down a count of its own.
     */
    @Test
    void theReadmeListsExactlyTheSuitesAttempts() throws Exception {
        // target/test-classes -> target -> tests/escape
        Path module = Path.of(EscapeTest.class.getProtectionDomain().getCodeSource().getLocation().toURI())
                .getParent().getParent();
        String readme = Files.readString(module.resolve("README.md"));
        int start = readme.indexOf("<!-- attempts");
        int end = readme.indexOf("<!-- /attempts -->");
        assertTrue(start >= 0 && end > start, "tests/escape/README.md has no attempts table");
        Map<String, String> documented = new LinkedHashMap<>();
        java.util.regex.Matcher row = java.util.regex.Pattern.compile("(?m)^\\| `([^`]+)` \\| (.+) \\|$")
                .matcher(readme.substring(start, end));
        while (row.find()) {
            assertEquals(null, documented.put(row.group(1), row.group(2)), "listed twice: " + row.group(1));
        }
        Map<String, String> suite = new LinkedHashMap<>(expected());
        suite.put("i386-syscall", I386_OUTCOME);
        assertEquals(suite, documented, "tests/escape/README.md's table and the suite");
        java.util.regex.Pattern count = java.util.regex.Pattern.compile("\\b\\d+ (bypass )?attempts\\b|`escape` \\(\\d+");
        for (Path doc : List.of(module.resolve("README.md"), module.resolve("../../README.md"))) {
            java.util.regex.Matcher m = count.matcher(Files.readString(doc));
            if (m.find()) {
                fail(doc.normalize() + " writes down a count of attempts: " + m.group());
            }
        }
    }

    @Test
    void everyBypassAttemptFailsAsExpectedAndOnlyTheAllowedRequestReachesTheUpstream() throws Exception {
        if (!"root".equals(System.getProperty("user.name"))) {
            fail("this suite needs root: the process driver maps a private uid range for each sandbox");
        }
        Loopback.assertOnly();
        try (Upstream upstream = new Upstream(InetAddress.getLoopbackAddress()); AbstractListener hostSocket = new AbstractListener();
             HostSharedMemory shm = new HostSharedMemory()) {
            // Control: the host's own processes reach it, so a refusal inside is the namespace's doing.
            hostSocket.connectFromHost();
            assertEquals(1, hostSocket.accepted(), "the host reaches its abstract socket");
            run(upstream, hostSocket.name + " " + shm.id + " " + shm.key);
            assertEquals(1, hostSocket.accepted(), "nothing in the sandbox reached the host's abstract socket");
        }
    }

    /** @param hostObjects the host's abstract socket name, shared-memory id and key, for escape's argv */
    private static void run(Upstream upstream, String hostObjects) throws Exception {
        Path work = Path.of(System.getProperty("openshell.mains.work.dir"));
        Files.createDirectories(work);
        Path root = Files.createTempDirectory(work, "run");
        Files.setPosixFilePermissions(root, PosixFilePermissions.fromString("rwx--x--x"));
        Path bin = Files.createDirectory(root.resolve("bin"));
        Files.setPosixFilePermissions(bin, PosixFilePermissions.fromString("rwxr-xr-x"));
        // Short: the channel socket's path must fit a sockaddr_un (108 bytes).
        Path runRoot = Files.createTempDirectory(Path.of("/tmp"), "osesc");
        Files.setPosixFilePermissions(runRoot, PosixFilePermissions.fromString("rwx--x--x"));
        Path stateRoot = Files.createDirectory(root.resolve("state"));
        Path workspace = Files.createDirectory(root.resolve("workspace"));
        Files.setPosixFilePermissions(workspace, PosixFilePermissions.fromString("rwxrwxrwx"));
        String modulePath = readableModulePath(Files.createDirectory(root.resolve("lib")));
        Path supervisorLauncher = launcher(bin.resolve("openshell-supervisor"), modulePath,
                "openshell.supervisor/openshell.supervisor.SupervisorMain");
        Path runtimeLauncher = launcher(bin.resolve("openshell-sandbox"), modulePath,
                "openshell.sandbox/openshell.sandbox.SandboxMain");
        compile("escape", workspace, "rwxr-xr-x");
        // Setuid root, owned by host root: what an image's setuid program looks like from inside.
        compile("euid", workspace, "rwsr-xr-x");
        copyResource("attempts.py", workspace.resolve("attempts.py"));
        Path agent = Files.writeString(workspace.resolve("agent.sh"), agentScript(upstream.port(), hostObjects));
        Files.setPosixFilePermissions(agent, PosixFilePermissions.fromString("rwxr-xr-x"));

        String policy = """
                version: 1
                network_policies:
                  only-curl:
                    endpoints:
                      - host: "%s"
                        port: %d
                        protocol: tcp
                    binaries:
                      - path: /usr/bin/curl
                      - path: /usr/bin/getent
                """.formatted(UPSTREAM, upstream.port());
        SandboxId id = new SandboxId("esc-" + Long.toHexString(System.nanoTime() & 0xffffff));
        SandboxSessionId session = SandboxSessionId.fresh();
        Map<String, String> env = Map.of("PATH", "/usr/bin:/bin", "HOME", workspace.toString(), "OUT", workspace.toString());
        List<String> argv = List.of("/bin/bash", agent.toString());
        TokenIssuer issuer = TokenIssuer.generate("openshell-gateway", "gateway-key-1", Clock.systemUTC());
        LaunchBundles.Minted minted = LaunchBundles.mint(LaunchBundles.Request.builder().sandboxId(id.value())
                .sessionId(session.value()).generation(1).policyYaml(policy)
                .agent(new LaunchBundles.Agent(argv, env, workspace.toString()))
                .workload(WORKLOAD_ID, WORKLOAD_ID).hostAlias(UPSTREAM, InetAddress.getLoopbackAddress()).build(), issuer, 1);
        ComputeDriver driver = DriverRegistry.load().driver("process", new DriverEnvironment(stateRoot, Map.of(
                "supervisor.launcher", supervisorLauncher.toString(), "runtime.launcher", runtimeLauncher.toString(),
                "run.root", runRoot.toString())));
        SandboxContext context = new SandboxContext(id, session, PolicySnapshot.of(1, policy.getBytes(StandardCharsets.UTF_8)),
                new AgentSpec(argv, env, workspace.toString()), new WorkloadIdentity(WORKLOAD_ID, WORKLOAD_ID, List.of()));
        Provisioned provisioned = driver.create(new LaunchPlan(context, 1,
                LaunchMaterial.of(minted.supervisorBundle(), minted.runtimeBundle()), Map.of("workspace", workspace.toString())));
        Path supervisorLog = stateRoot.resolve("process/sandboxes").resolve(id.value()).resolve("supervisor.log");
        Path runtimeLog = stateRoot.resolve("process/sandboxes").resolve(id.value()).resolve("runtime.log");
        try {
            Path done = workspace.resolve("done");
            long deadline = System.nanoTime() + AGENT_WAIT.toNanos();
            while (!Files.exists(done) && System.nanoTime() < deadline && !text(supervisorLog).contains("the agent ended")
                    && !text(supervisorLog).contains("boundary failed")) {
                Thread.sleep(200);
            }
            String logs = "\n--- supervisor.log\n" + text(supervisorLog) + "\n--- runtime.log\n" + text(runtimeLog)
                    + "\n--- agent\n" + text(workspace.resolve("agent.log"));
            assertTrue(Files.exists(done), "the agent did not finish within " + AGENT_WAIT + logs);

            Map<String, String> actual = new LinkedHashMap<>();
            for (String file : List.of("escape.out", "python.out")) {
                for (String line : text(workspace.resolve(file)).lines().toList()) {
                    String[] parts = line.split(" ", 2);
                    actual.put(parts[0], parts.length > 1 ? parts[1] : "");
                }
            }
            // The swapped-in socket was never connected: Linux says EPIPE or ENOTCONN, by state.
            actual.computeIfPresent("dup2-send", (k, v) -> v.equals("EPIPE") || v.equals("ENOTCONN") ? "not connected" : v);
            actual.put("setuid-exec", text(workspace.resolve("setuid.out")).strip());
            // int 0x80 never runs: the filter kills it (SIGSYS) where the kernel has i386 emulation,
            // and the CPU faults (SIGSEGV) where it has none.
            String i386 = actual.remove("i386-syscall");
            assertTrue("SYS".equals(i386) || "SEGV".equals(i386), "i386 syscall: " + i386 + logs);
            assertEquals(expected(), actual, "each attempt and how it failed" + logs);

            // Control: the allowed binary reaches the same upstream, so the failures above are the walls.
            assertEquals("200", text(workspace.resolve("allowed.code")).strip(), logs);
            assertEquals(ALLOWED_BODY, text(workspace.resolve("allowed.body")), logs);
            assertEquals(List.of("GET /allowed HTTP/1.1"), upstream.firstLines(),
                    "only the allowed request may reach the upstream" + logs);
            // Every mediated attempt was decided by the supervisor as a denial for the binary that made it.
            List<String> audit = text(supervisorLog).lines().filter(l -> l.startsWith("{\"time\"")).toList();
            assertTrue(audit.stream().anyMatch(l -> l.contains("\"decision\":\"deny\"") && l.contains(workspace + "/escape")),
                    audit.toString());
            assertTrue(audit.stream().anyMatch(l -> l.contains("\"decision\":\"allow\"") && l.contains("/usr/bin/curl")),
                    audit.toString());
            Loopback.assertDialledOnlyLoopback(text(supervisorLog));
        } finally {
            driver.delete(id, provisioned.state());
            Files.deleteIfExists(runRoot);
        }
    }

    /**
     * The agent: the C attempts, the Python attempts, the setuid exec, then the allowed request.
     * The attempts aim at the address DNS gives the sandbox for the upstream's name (getent
     * "hosts": getaddrinfo's AI_ADDRCONFIG would not ask with loopback only).
     */
    private static String agentScript(int port, String hostObjects) {
        return """
                #!/bin/bash
                exec >"$OUT/agent.log" 2>&1
                cd "$OUT"
                id
                RT=""
                for p in /proc/[0-9]*; do
                    if tr '\\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q 'openshell.sandbox/openshell.sandbox.SandboxMain'; then
                        RT=${p#/proc/}; break
                    fi
                done
                echo "runtime pid: $RT"
                UP=$(getent hosts %3$s | awk 'NR == 1 {print $1}')
                echo "upstream stand-in: $UP"
                ./escape "$RT" "$UP" %1$d %2$s >escape.out; echo "escape exit $?"
                /usr/bin/python3 attempts.py "$UP" %1$d >python.out; echo "python exit $?"
                ./euid >setuid.out; echo "euid exit $?"
                curl -sS -o allowed.body -w '%%{http_code}' --max-time 60 http://%3$s:%1$d/allowed >allowed.code
                touch done
                """.formatted(port, hostObjects, UPSTREAM);
    }

    private static void compile(String name, Path into, String mode) throws Exception {
        Path source = into.resolve(name + ".c");
        copyResource(name + ".c", source);
        Path binary = into.resolve(name);
        Process gcc = new ProcessBuilder("gcc", "-O1", "-Wall", "-o", binary.toString(), source.toString())
                .redirectErrorStream(true).start();
        String output = new String(gcc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(gcc.waitFor(GCC_WAIT.toSeconds(), TimeUnit.SECONDS), "gcc did not finish within " + GCC_WAIT);
        assertEquals(0, gcc.exitValue(), "gcc (install it with apt-get install gcc): " + output);
        Files.setPosixFilePermissions(binary, PosixFilePermissions.fromString(mode.replace('s', 'x')));
        if (mode.contains("s")) {
            // chmod(2) keeps the setuid bit; Java's permission view cannot express it.
            Process chmod = new ProcessBuilder("chmod", "4755", binary.toString()).redirectErrorStream(true).start();
            assertTrue(chmod.waitFor(GCC_WAIT.toSeconds(), TimeUnit.SECONDS));
            assertEquals(0, chmod.exitValue());
        }
    }

    private static void copyResource(String name, Path to) throws IOException {
        try (InputStream in = EscapeTest.class.getResourceAsStream("/escape/" + name)) {
            if (in == null) {
                throw new IOException("missing test resource /escape/" + name);
            }
            Files.copy(in, to, StandardCopyOption.REPLACE_EXISTING);
        }
        Files.setPosixFilePermissions(to, PosixFilePermissions.fromString("rw-r--r--"));
    }

    /**
     * An abstract Unix socket bound in the test's network namespace by a host process (Java
     * cannot bind abstract names), counting the connections it accepts.
     */
    private static final class AbstractListener implements AutoCloseable {
        private static final String SERVE = """
                import socket, sys
                s = socket.socket(socket.AF_UNIX)
                s.bind('\\0' + sys.argv[1])
                s.listen(8)
                print('listening', flush=True)
                while True:
                    c, _ = s.accept()
                    print('accepted', flush=True)
                    c.close()
                """;
        private static final String CONNECT = """
                import socket, sys
                socket.socket(socket.AF_UNIX).connect('\\0' + sys.argv[1])
                """;
        final String name = "openshell-escape-" + Long.toHexString(System.nanoTime());
        private final Process process;
        private final List<String> lines = new CopyOnWriteArrayList<>();
        private final java.util.concurrent.CountDownLatch listening = new java.util.concurrent.CountDownLatch(1);

        AbstractListener() throws Exception {
            process = new ProcessBuilder("/usr/bin/python3", "-c", SERVE, name).redirectErrorStream(true).start();
            Thread.ofPlatform().daemon(true).name("escape-abstract-listener").start(() -> {
                try (var out = new java.io.BufferedReader(new java.io.InputStreamReader(process.getInputStream(),
                        StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = out.readLine()) != null) {
                        lines.add(line);
                        if (line.equals("listening")) {
                            listening.countDown();
                        }
                    }
                } catch (IOException e) {
                    // the listener is gone; accepted() says what it saw
                }
            });
            assertTrue(listening.await(HELPER_WAIT.toSeconds(), TimeUnit.SECONDS), "the host listener did not start: " + lines);
        }

        void connectFromHost() throws Exception {
            onHost("the host's connect", "/usr/bin/python3", "-c", CONNECT, name);
            long deadline = System.nanoTime() + HELPER_WAIT.toNanos();
            while (accepted() < 1 && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
        }

        long accepted() {
            return lines.stream().filter("accepted"::equals).count();
        }

        @Override
        public void close() {
            process.destroyForcibly();
        }
    }

    /** A System V shared-memory segment of the host, mode 0666: any host user could attach it. */
    private static final class HostSharedMemory implements AutoCloseable {
        private static final String CREATE = """
                import ctypes, sys
                libc = ctypes.CDLL(None, use_errno=True)
                shmid = libc.shmget(int(sys.argv[1], 0), 4096, 0o1000 | 0o666)
                print(shmid if shmid >= 0 else 'errno %d' % ctypes.get_errno())
                """;
        final String key = "0x6f73" + String.format("%04x", ProcessHandle.current().pid() & 0xffff);
        final int id;

        HostSharedMemory() throws IOException {
            String output = onHost("shmget on the host", "/usr/bin/python3", "-c", CREATE, key).strip();
            assertTrue(output.matches("[0-9]+"), "the host's shared-memory segment: " + output);
            id = Integer.parseInt(output);
            // Control: the segment is there on the host, open to every user.
            String shown = onHost("ipcs", "ipcs", "-m", "-i", Integer.toString(id));
            assertTrue(shown.contains("mode=0666"), "the host shows its segment: " + shown);
        }

        @Override
        public void close() throws IOException {
            onHost("removing the host's segment " + id, "ipcrm", "-m", Integer.toString(id));
        }
    }

    /**
     * Runs a helper on the host and waits for it ({@link #HELPER_WAIT}).
     *
     * @return its output (stdout and stderr)
     */
    private static String onHost(String what, String... command) throws IOException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        try {
            assertTrue(p.waitFor(HELPER_WAIT.toSeconds(), TimeUnit.SECONDS), what + " did not finish within " + HELPER_WAIT);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted: " + what, e);
        }
        assertEquals(0, p.exitValue(), what + ": " + output);
        return output;
    }

    /** A plain TCP upstream: records each connection's first line and answers it with a small HTTP response. */
    private static final class Upstream implements AutoCloseable {
        private final ServerSocket server;
        private final List<String> firstLines = new CopyOnWriteArrayList<>();

        Upstream(InetAddress host) throws IOException {
            server = new ServerSocket();
            server.bind(new InetSocketAddress(host, 0), 16);
            Thread.ofPlatform().daemon(true).name("escape-upstream").start(this::serve);
        }

        int port() {
            return server.getLocalPort();
        }

        List<String> firstLines() {
            return List.copyOf(firstLines);
        }

        private void serve() {
            while (!server.isClosed()) {
                try (Socket s = server.accept()) {
                    s.setSoTimeout((int) Duration.ofSeconds(10).toMillis());
                    String line = readLine(s.getInputStream());
                    firstLines.add(line);
                    if (line.startsWith("GET /allowed ")) {
                        while (!readLine(s.getInputStream()).isEmpty()) {
                            // skip the headers
                        }
                        OutputStream out = s.getOutputStream();
                        out.write(("HTTP/1.1 200 OK\r\nContent-Length: " + ALLOWED_BODY.length()
                                + "\r\nConnection: close\r\n\r\n" + ALLOWED_BODY).getBytes(StandardCharsets.US_ASCII));
                        out.flush();
                    }
                } catch (IOException e) {
                    if (!server.isClosed()) {
                        firstLines.add("(connection failed: " + e.getMessage() + ")");
                    }
                }
            }
        }

        private static String readLine(InputStream in) throws IOException {
            StringBuilder line = new StringBuilder();
            int b;
            while ((b = in.read()) >= 0 && b != '\n') {
                if (b != '\r') {
                    line.append((char) b);
                }
            }
            return line.toString();
        }

        @Override
        public void close() throws IOException {
            server.close();
        }
    }

    private static String readableModulePath(Path lib) throws IOException {
        Files.setPosixFilePermissions(lib, PosixFilePermissions.fromString("rwxr-xr-x"));
        List<String> entries = new ArrayList<>();
        for (String entry : Files.readString(Path.of(System.getProperty("openshell.mains.module.path.file"))).strip()
                .split(File.pathSeparator)) {
            Path source = Path.of(entry);
            if (Files.isRegularFile(source)) {
                Path copy = lib.resolve(source.getFileName());
                Files.copy(source, copy, StandardCopyOption.REPLACE_EXISTING);
                Files.setPosixFilePermissions(copy, PosixFilePermissions.fromString("rw-r--r--"));
                entries.add(copy.toString());
            } else {
                entries.add(entry);
            }
        }
        return String.join(File.pathSeparator, entries);
    }

    private static Path launcher(Path file, String modulePath, String mainModule) throws IOException {
        String script = "#!/bin/sh\nexec " + Path.of(System.getProperty("java.home"), "bin", "java")
                + " --enable-native-access=com.sun.jna,openshell.protocol --add-exports=java.base/sun.nio.ch=openshell.protocol -Djna.boot.library.path=" + System.getProperty("openshell.mains.jna.dir")
                + " -Djna.nounpack=true -Djna.noclasspath=true" + nativeLauncherOption(file)
                + " --add-modules ALL-MODULE-PATH -p " + modulePath + " -m " + mainModule + " \"$@\"\n";
        Files.writeString(file, script);
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rwxr-xr-x"));
        return file;
    }

    private static String text(Path file) {
        try {
            return Files.exists(file) ? Files.readString(file) : "";
        } catch (IOException e) {
            return "(unreadable: " + e.getMessage() + ")";
        }
    }

    /**
     * The build's native workload launcher, copied beside {@code file} where the sandbox's mapped
     * root can run it, as the runtime's {@code -Dopenshell.launcher} option.
     */
    private static String nativeLauncherOption(Path file) throws IOException {
        Path copy = file.resolveSibling("openshell-launcher");
        Files.copy(Path.of(System.getProperty("openshell.mains.launcher")), copy, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        Files.setPosixFilePermissions(copy, java.nio.file.attribute.PosixFilePermissions.fromString("rwxr-xr-x"));
        return " -Dopenshell.launcher=" + copy;
    }
}
