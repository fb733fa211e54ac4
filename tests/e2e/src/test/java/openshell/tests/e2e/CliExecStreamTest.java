package openshell.tests.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import io.grpc.stub.StreamObserver;
import io.helidon.common.tls.Tls;
import io.helidon.webclient.grpc.GrpcClient;
import openshell.protocol.exec.ExecClientFrame;
import openshell.protocol.exec.ExecServerFrame;
import openshell.protocol.exec.ExecStart;
import openshell.protocol.exec.SandboxExecGrpc;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The streamed exec end to end: the CLI as a separate process, a real gateway, the process
 * driver, the real supervisor and sandbox runtime, one sandbox for the whole class. Stdin is
 * streamed (4 MiB through {@code sha256sum}), interactive (a line echoed back before the next is
 * sent), half-closed (end of input makes {@code cat} exit), output separate on pipes and merged on
 * a PTY, the PTY's size follows the CLI's terminal (a real pseudo-terminal made by a small Python
 * harness, resized while the command runs), and exit codes come through.
 */
class CliExecStreamTest {
    static final String POLICY = """
            version: 1
            network_policies:
              api:
                endpoints:
                  - host: api.example.test
                    port: 443
                    protocol: tcp
                binaries:
                  - path: /usr/bin/curl
            """;
    /** Longest wait for one expected line or exit; generous for a loaded 2-core machine. */
    static final long WAIT_SECONDS = 120;

    @TempDir
    static Path tmp;

    private static Path state;

    private static Map<String, String> env;

    @BeforeAll
    static void sandbox() throws Exception {
        state = tmp.resolve("home");
        env = launchers();
        assertEquals(0, Cli.run(state, env, "gateway", "start", "--background", "--port", "0").exit());
        Path policy = Files.writeString(tmp.resolve("policy.yaml"), POLICY);
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        Path workspace = Files.createDirectories(tmp.resolve("workspace"));
        Files.setPosixFilePermissions(workspace, PosixFilePermissions.fromString("rwxrwxrwx"));
        Cli.Result created = Cli.run(state, env, "sandbox", "create", "--policy", policy.toString(), "--name", "io",
                "--workspace", workspace.toString(), "--", "/bin/sleep", "900");
        assertEquals(0, created.exit(), "sandbox create failed: " + created.out() + created.err());
    }

    @AfterAll
    static void cleanUp() throws Exception {
        if (state != null && Files.exists(state.resolve("gateway.json"))) {
            Cli.run(state, env, "sandbox", "delete", "io");
            Cli.run(state, env, "gateway", "stop");
        }
    }

    /**
     * A silent command's stream shows it is alive: the gateway announces its heartbeat in the
     * started frame and sends one only after that long without another frame, then the exit.
     * (The CLI takes more than {@code ExecStream.MAX_MISSED_HEARTBEATS} missed as a lost connection.)
     */
    @Test
    void aSilentExecIsKeptAliveByHeartbeatsAfterEachQuietInterval() throws Exception {
        String url = GatewayUnderTest.parse(Files.readString(state.resolve("gateway.json"))).getString("url");
        String token = Files.readString(state.resolve("api-token")).strip();
        GrpcClient client = GrpcClient.builder().baseUri(url).tls(Tls.builder().enabled(false).build()).build();
        StreamRecorder<ExecServerFrame> recorder = new StreamRecorder<>();
        StreamObserver<ExecClientFrame> requests = SandboxExecGrpc.newStub(client.channel()).exec(recorder);
        requests.onNext(ExecClientFrame.newBuilder().setStart(ExecStart.newBuilder().setApiToken(token).setSandbox("io")
                .addArgv("/bin/sleep").addArgv("25").setOutputWindow(64 * 1024)).build());
        assertEquals(null, recorder.ended().get(WAIT_SECONDS, TimeUnit.SECONDS), "the stream ended without an error");
        requests.onCompleted();
        List<StreamRecorder.Arrival<ExecServerFrame>> frames = recorder.arrivals();
        long interval = frames.getFirst().message().getStarted().getHeartbeatMillis();
        assertEquals(10_000, interval, "the started frame announces the heartbeat: " + frames);
        assertEquals(ExecServerFrame.KindCase.EXIT_CODE, frames.getLast().message().getKindCase(), frames.toString());
        assertEquals(0, frames.getLast().message().getExitCode());
        long beats = 0;
        for (int i = 1; i < frames.size(); i++) {
            if (frames.get(i).message().getHeartbeat()) {
                beats++;
                long quiet = TimeUnit.NANOSECONDS.toMillis(frames.get(i).at() - frames.get(i - 1).at());
                // Sent after the interval of silence; the client's clock may see it up to ~0.5 s early.
                assertTrue(quiet >= interval - 500, "a heartbeat after only " + quiet + " ms of silence");
            }
        }
        assertTrue(beats >= 2, "25 s of silence brings a heartbeat at ~10 and ~20 s: " + beats + " in " + frames);
    }

    @Test
    void fourMebibytesOfStdinReachSha256sumWhole() throws Exception {
        byte[] data = new byte[4 * 1024 * 1024];
        new Random(7).nextBytes(data);
        Path input = Files.write(tmp.resolve("four-mib"), data);
        String digest = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(data));
        Process p = cli(ProcessBuilder.Redirect.from(input.toFile()), "sandbox", "exec", "io", "--", "sha256sum");
        CompletableFuture<String> err = drain(p.getErrorStream());
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(WAIT_SECONDS, TimeUnit.SECONDS), "the exec did not end");
        assertEquals(0, p.exitValue(), err.join() + logs());
        assertEquals(digest + "  -\n", out);
    }

    @Test
    void catEchoesEachLineBeforeTheNextIsSentAndHalfCloseEndsIt() throws Exception {
        Process p = cli(ProcessBuilder.Redirect.PIPE, "sandbox", "exec", "io", "--", "cat");
        CompletableFuture<String> err = drain(p.getErrorStream());
        BlockingQueue<String> lines = lines(p.getInputStream());
        OutputStream stdin = p.getOutputStream();
        for (int i = 0; i < 5; i++) {
            stdin.write(("line " + i + "\n").getBytes(StandardCharsets.UTF_8));
            stdin.flush();
            String echoed = lines.poll(WAIT_SECONDS, TimeUnit.SECONDS);
            assertEquals("line " + i, echoed, "echo of line " + i + " (stderr: " + (p.isAlive() ? "" : err.join()) + ")");
        }
        // End of the CLI's stdin half-closes the remote stdin: cat sees end of file and exits.
        stdin.close();
        assertTrue(p.waitFor(WAIT_SECONDS, TimeUnit.SECONDS), "cat did not exit after the half-close");
        assertEquals(0, p.exitValue(), err.join());
    }

    @Test
    void pipesKeepStdoutAndStderrApartAndTheExitCodeComesThrough() throws Exception {
        Cli.Result r = Cli.run(state, env, "sandbox", "exec", "io", "--", "/bin/sh", "-c",
                "echo out; echo err >&2; exit 7");
        assertEquals(7, r.exit(), r.err());
        assertEquals("out\n", r.out());
        assertEquals("err\n", r.err());
        Cli.Result signaled = Cli.run(state, env, "sandbox", "exec", "io", "--", "/bin/sh", "-c", "kill -TERM $$");
        assertEquals(128 + 15, signaled.exit(), signaled.err());
    }

    /**
     * Interrupting the CLI on pipes (Ctrl-C, or SIGTERM as here: the JVM runs the same hook for
     * both) passes SIGINT to the command, whose output and exit code still come through; a
     * command that ignores it is terminated after the grace and the CLI exits 130.
     */
    @Test
    void interruptingTheCliPassesSigintOnAndTerminatesWhatIgnoresIt() throws Exception {
        Process p = cli(ProcessBuilder.Redirect.PIPE, "sandbox", "exec", "io", "--", "/bin/sh", "-c",
                "trap 'echo got-sigint; exit 42' INT; echo ready; while :; do sleep 0.1; done");
        CompletableFuture<String> err = drain(p.getErrorStream());
        BlockingQueue<String> lines = lines(p.getInputStream());
        assertEquals("ready", lines.poll(WAIT_SECONDS, TimeUnit.SECONDS), "the command started");
        terminate(p);
        assertTrue(p.waitFor(WAIT_SECONDS, TimeUnit.SECONDS), "the CLI did not end after SIGTERM");
        assertEquals(42, p.exitValue(), "the command's own exit code after its trap: " + err.join());
        assertEquals("got-sigint", lines.poll(WAIT_SECONDS, TimeUnit.SECONDS), err.join());

        Process stubborn = cli(ProcessBuilder.Redirect.PIPE, "sandbox", "exec", "io", "--", "/bin/sh", "-c",
                "trap '' INT; echo ready; while :; do sleep 0.1; done");
        CompletableFuture<String> stubbornErr = drain(stubborn.getErrorStream());
        BlockingQueue<String> stubbornLines = lines(stubborn.getInputStream());
        assertEquals("ready", stubbornLines.poll(WAIT_SECONDS, TimeUnit.SECONDS), "the command started");
        long interrupted = System.nanoTime();
        terminate(stubborn);
        assertTrue(stubborn.waitFor(WAIT_SECONDS, TimeUnit.SECONDS), "the CLI did not end after the grace");
        assertEquals(130, stubborn.exitValue(), stubbornErr.join());
        assertTrue(System.nanoTime() - interrupted >= TimeUnit.SECONDS.toNanos(5), "it had the whole grace");
        assertTrue(stubbornErr.join().contains("did not end within 5 s of SIGINT and was terminated"), stubbornErr.join());
        // The gateway terminates its tree once the stream ended: soon nothing of it runs in the sandbox.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        Cli.Result left;
        do {
            left = Cli.run(state, env, "sandbox", "exec", "io", "--", "/bin/sh", "-c",
                    "ps -eo args | grep -c \"[t]rap '' INT\" || true");
        } while (!left.out().strip().equals("0") && System.nanoTime() < deadline);
        assertEquals("0", left.out().strip(), left.err() + Cli.run(state, env, "sandbox", "exec", "io", "--", "/bin/sh", "-c",
                "ps -eo pid,ppid,stat,args").out() + logs());
    }

    /** {@code PortForward.MAX_CONNECTIONS}: what {@code sandbox forward} relays at once. */
    static final int FORWARD_CONNECTIONS = 32;

    /** Inside the sandbox: each connection's bytes, read to end of input, are answered with their count and digest. */
    static final String DIGEST_SERVICE = """
            import hashlib, socket, threading
            s = socket.socket()
            s.bind(('127.0.0.1', 0))
            s.listen(16)
            print('listening', s.getsockname()[1], flush=True)
            def serve(c):
                h = hashlib.sha256()
                n = 0
                while True:
                    b = c.recv(65536)
                    if not b:
                        break
                    h.update(b)
                    n += len(b)
                c.sendall(('got %d %s\\n' % (n, h.hexdigest())).encode())
                c.close()
            while True:
                c, _ = s.accept()
                threading.Thread(target=serve, args=(c,), daemon=True).start()
            """;

    /**
     * {@code sandbox forward}: a host loopback listener relayed to a service on the sandbox's own
     * loopback. Four concurrent connections each carry 1 MiB in and an answer back after their
     * half-close; at the bound, 32 held connections are relayed and the 33rd is closed at once;
     * a forward to a port where only the host listens reaches nothing (the sandbox's
     * loopback is its own); a sandbox that does not exist is NOT_FOUND; a bad port is a usage error.
     */
    @Test
    void forwardRelaysHostConnectionsToTheSandboxLoopbackOnly() throws Exception {
        Process service = cli(ProcessBuilder.Redirect.PIPE, "sandbox", "exec", "io", "--", "/usr/bin/python3", "-c",
                DIGEST_SERVICE);
        CompletableFuture<String> serviceErr = drain(service.getErrorStream());
        BlockingQueue<String> serviceLines = lines(service.getInputStream());
        Process forward = null;
        Process toHost = null;
        CompletableFuture<String> toHostErr = null;
        CompletableFuture<String> forwardErr = null;
        try (java.net.ServerSocket hostOnly = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            String listening = serviceLines.poll(WAIT_SECONDS, TimeUnit.SECONDS);
            assertTrue(listening != null && listening.startsWith("listening "), listening + " " + (service.isAlive() ? ""
                    : serviceErr.join()));
            int port = Integer.parseInt(listening.substring("listening ".length()).strip());
            forward = cli(ProcessBuilder.Redirect.PIPE, "sandbox", "forward", "io", "0:" + port);
            forwardErr = drain(forward.getErrorStream());
            int local = forwardedPort(forward, "io port " + port, forwardErr);

            List<CompletableFuture<String>> answers = new ArrayList<>();
            List<String> expected = new ArrayList<>();
            var pool = java.util.concurrent.Executors.newVirtualThreadPerTaskExecutor();
            for (int i = 0; i < 4; i++) {
                byte[] data = new byte[1024 * 1024];
                new Random(i).nextBytes(data);
                expected.add("got " + data.length + " " + HexFormat.of().formatHex(
                        MessageDigest.getInstance("SHA-256").digest(data)));
                answers.add(CompletableFuture.supplyAsync(() -> exchange(local, data), pool));
            }
            for (int i = 0; i < 4; i++) {
                assertEquals(expected.get(i), answers.get(i).get(WAIT_SECONDS, TimeUnit.SECONDS).strip(),
                        "connection " + i + " through the forward");
            }

            // At the bound: 32 connections held open are all relayed; the 33rd is closed at once.
            List<java.net.Socket> held = new ArrayList<>();
            try {
                for (int i = 0; i < FORWARD_CONNECTIONS; i++) {
                    held.add(new java.net.Socket(java.net.InetAddress.getLoopbackAddress(), local));
                }
                try (java.net.Socket beyond = new java.net.Socket(java.net.InetAddress.getLoopbackAddress(), local)) {
                    beyond.setSoTimeout((int) TimeUnit.SECONDS.toMillis(WAIT_SECONDS));
                    assertEquals(-1, beyond.getInputStream().read(), "the connection beyond the bound is closed");
                }
                for (java.net.Socket s : held) {
                    s.setSoTimeout((int) TimeUnit.SECONDS.toMillis(WAIT_SECONDS));
                    s.getOutputStream().write(new byte[] {1, 2, 3});
                    s.shutdownOutput();
                }
                String three = "got 3 " + HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256")
                        .digest(new byte[] {1, 2, 3}));
                for (java.net.Socket s : held) {
                    assertEquals(three, new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip());
                }
            } finally {
                for (java.net.Socket s : held) {
                    s.close();
                }
            }

            // The host's own loopback service is not the sandbox's: the relay finds nothing there.
            toHost = cli(ProcessBuilder.Redirect.PIPE, "sandbox", "forward", "io", "0:" + hostOnly.getLocalPort());
            toHostErr = drain(toHost.getErrorStream());
            int hostLocal = forwardedPort(toHost, "io port " + hostOnly.getLocalPort(), toHostErr);
            hostOnly.setSoTimeout(1000);
            String nothing = exchange(hostLocal, "hello".getBytes(StandardCharsets.UTF_8));
            assertEquals("", nothing, "a forward reached the host's loopback");
            assertThrows(java.net.SocketTimeoutException.class, hostOnly::accept, "the host service was reached");
        } finally {
            for (Process p : new Process[] {forward, toHost, service}) {
                if (p != null) {
                    terminate(p);
                    p.waitFor(WAIT_SECONDS, TimeUnit.SECONDS);
                }
            }
        }
        assertTrue(forwardErr.join().contains("already forwarding 32 connections"), forwardErr.join());
        String refusal = toHostErr.join();
        assertTrue(refusal.contains("port ") && refusal.contains("ended") || refusal.contains("refused"),
                "the refusal is reported: " + refusal);
        Cli.Result missing = Cli.run(state, env, "sandbox", "forward", "no-such-sandbox", "8080");
        assertEquals(4, missing.exit(), missing.err());
        Cli.Result badPort = Cli.run(state, env, "sandbox", "forward", "io", "65536");
        assertEquals(2, badPort.exit(), badPort.err());
        assertTrue(badPort.err().contains("not a port (1..65535): 65536"), badPort.err());
    }

    /** @return the local port the forward printed it listens on */
    private static int forwardedPort(Process forward, String target, CompletableFuture<String> err) throws Exception {
        BlockingQueue<String> out = lines(forward.getInputStream());
        String line = out.poll(WAIT_SECONDS, TimeUnit.SECONDS);
        assertTrue(line != null && line.startsWith("forwarding 127.0.0.1:") && line.contains(" -> " + target),
                line + " " + (forward.isAlive() ? "" : err.join()));
        return Integer.parseInt(line.substring("forwarding 127.0.0.1:".length(), line.indexOf(' ', 12)));
    }

    /** Sends {@code data}, half-closes, and returns everything that comes back until the far end closes. */
    private static String exchange(int port, byte[] data) {
        try (java.net.Socket s = new java.net.Socket(java.net.InetAddress.getLoopbackAddress(), port)) {
            s.setSoTimeout((int) TimeUnit.SECONDS.toMillis(WAIT_SECONDS));
            CompletableFuture<byte[]> back = new CompletableFuture<>();
            Thread.ofVirtual().start(() -> {
                try {
                    back.complete(s.getInputStream().readAllBytes());
                } catch (java.io.IOException e) {
                    back.complete(new byte[0]);
                }
            });
            try {
                s.getOutputStream().write(data);
                s.shutdownOutput();
            } catch (java.io.IOException e) {
                // The forward closed early (nothing listens there): what came back says so.
            }
            return new String(back.join(), StandardCharsets.UTF_8);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Test
    void ttyRunsOnAPseudoTerminalWithMergedOutput() throws Exception {
        Cli.Result r = Cli.run(state, env, "sandbox", "exec", "io", "--tty", "--", "/bin/sh", "-c",
                "tty; echo to-stderr >&2; stty size; exit 3");
        assertEquals(3, r.exit(), r.err());
        assertTrue(r.out().contains("/dev/pts/"), "tty names a pty: " + r.out());
        assertTrue(r.out().contains("to-stderr"), "stderr is merged into the terminal output: " + r.out());
        // Without a terminal of its own the CLI asks for 80x24.
        assertTrue(r.out().contains("24 80"), r.out());
        assertEquals("", r.err());
    }

    @Test
    void connectFollowsTheLocalTerminalSizeAndPassesKeysRaw() throws Exception {
        Path harness = Files.writeString(tmp.resolve("pty-harness.py"), HARNESS);
        List<String> command = new ArrayList<>(List.of("python3", harness.toString()));
        command.addAll(cliCommand("sandbox", "connect", "io", "--", "/bin/sh", "-c",
                "while read x; do stty size; done; exit 5"));
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile()));
        pb.environment().putAll(env);
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(WAIT_SECONDS * 2, TimeUnit.SECONDS), "the harness did not end: " + out);
        assertTrue(out.contains("30 100"), "the first size is the local terminal's: " + out);
        assertTrue(out.contains("40 120"), "the resize reached the remote terminal: " + out);
        // Ctrl-D went through raw: the remote read saw end of file and the shell exited 5.
        assertEquals(5, p.exitValue(), out);
    }

    /**
     * Runs argv on a fresh pseudo-terminal of 100x30 (its controlling terminal), presses Enter
     * every second until "30 100" shows, resizes to 120x40, presses Enter until "40 120" shows,
     * then Ctrl-D; exits with the child's exit code. (Enter first, because the runtime applies an
     * exec's initial terminal size just after starting it: a size printed at once may be 80x24.) Everything the child printed goes to stdout.
     */
    static final String HARNESS = """
            import fcntl, os, select, struct, subprocess, sys, termios, time
            master, slave = os.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack('HHHH', 30, 100, 0, 0))
            def own_terminal():
                os.setsid()
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            child = subprocess.Popen(sys.argv[1:], stdin=slave, stdout=slave, stderr=slave,
                                     preexec_fn=own_terminal, close_fds=True)
            os.close(slave)
            seen = b''
            phase = 0
            deadline = time.time() + 200
            last_enter = 0
            while time.time() < deadline:
                ready, _, _ = select.select([master], [], [], 0.5)
                if ready:
                    try:
                        chunk = os.read(master, 65536)
                    except OSError:
                        break
                    if not chunk:
                        break
                    seen += chunk
                    sys.stdout.buffer.write(chunk)
                    sys.stdout.flush()
                if phase == 0 and b'30 100' in seen:
                    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack('HHHH', 40, 120, 0, 0))
                    phase = 1
                elif phase == 1 and b'40 120' in seen:
                    os.write(master, b'\\x04')
                    phase = 2
                elif phase < 2 and time.time() - last_enter > 1:
                    os.write(master, b'\\n')
                    last_enter = time.time()
                if child.poll() is not None and not ready:
                    break
            try:
                code = child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                code = 99
            sys.exit(code)
            """;

    /** The gateway's, supervisors' and runtimes' logs, for failure messages. */
    private static String logs() throws Exception {
        StringBuilder b = new StringBuilder();
        try (var files = Files.walk(state)) {
            for (Path f : files.filter(f -> f.toString().endsWith(".log")).toList()) {
                String text = Files.readString(f);
                b.append("\n--- ").append(state.relativize(f)).append(" ---\n")
                        .append(text.length() > 20_000 ? text.substring(text.length() - 20_000) : text);
            }
        }
        return b.toString();
    }

    private static Process cli(ProcessBuilder.Redirect stdin, String... args) throws Exception {
        ProcessBuilder pb = new ProcessBuilder(cliCommand(args)).redirectInput(stdin);
        pb.environment().putAll(env);
        return pb.start();
    }

    private static List<String> cliCommand(String... args) {
        List<String> command = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElseThrow(),
                "-p", System.getProperty("jdk.module.path"),
                "-m", "openshell.cli/openshell.cli.Main", "--state", state.toString()));
        command.addAll(List.of(args));
        return command;
    }

    private static CompletableFuture<String> drain(InputStream in) {
        return CompletableFuture.supplyAsync(() -> {
            try {
                return new String(in.readAllBytes(), StandardCharsets.UTF_8);
            } catch (java.io.IOException e) {
                return e.toString();
            }
        });
    }

    /** SIGTERM without Process.destroy(), which would also close our ends of its pipes. */
    private static void terminate(Process p) throws Exception {
        assertEquals(0, new ProcessBuilder("kill", "-TERM", Long.toString(p.pid())).start().waitFor());
    }

    private static BlockingQueue<String> lines(InputStream in) {
        BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        Thread.ofVirtual().start(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    lines.add(line);
                }
            } catch (java.io.IOException e) {
                lines.add("read failed: " + e);
            }
        });
        return lines;
    }

    /** The process driver's launchers, as the lifecycle test makes them (see CliSandboxTest). */
    private static Map<String, String> launchers() throws Exception {
        Path dir = Path.of(System.getProperty("openshell.e2e.launchers")).resolve("exec-stream");
        Files.createDirectories(dir);
        Map<String, String> launchers = new LinkedHashMap<>();
        launchers.put("OPENSHELL_SUPERVISOR_LAUNCHER",
                launcher(dir, "supervisor", "openshell.supervisor/openshell.supervisor.SupervisorMain").toString());
        launchers.put("OPENSHELL_RUNTIME_LAUNCHER",
                launcher(dir, "runtime", "openshell.sandbox/openshell.sandbox.SandboxMain").toString());
        return launchers;
    }

    private static Path launcher(Path dir, String name, String main) throws Exception {
        Path lib = dir.resolve("lib");
        Files.createDirectories(lib);
        List<String> entries = new ArrayList<>();
        for (String entry : System.getProperty("jdk.module.path").split(java.io.File.pathSeparator)) {
            Path source = Path.of(entry);
            if (!Files.isRegularFile(source)) {
                continue;
            }
            Path copy = lib.resolve(source.getFileName());
            Files.copy(source, copy, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            Files.setPosixFilePermissions(copy, PosixFilePermissions.fromString("rw-r--r--"));
            entries.add(copy.toString());
        }
        String javaCommand = ProcessHandle.current().info().command().orElseThrow();
        Path script = dir.resolve(name);
        Files.writeString(script, "#!/bin/sh\nexec " + javaCommand + " --enable-native-access=com.sun.jna,openshell.protocol --add-exports=java.base/sun.nio.ch=openshell.protocol"
                + " -Djna.boot.library.path=" + System.getProperty("openshell.e2e.jna")
                + " -Djna.nounpack=true -Djna.noclasspath=true" + Launchers.nativeLauncherOption(dir)
                + " --add-modules ALL-MODULE-PATH -p " + String.join(java.io.File.pathSeparator, entries) + " -m " + main + " \"$@\"\n");
        // Every sandbox uid must reach the launchers and the jars.
        for (Path p : new Path[] {script, lib, dir, dir.getParent()}) {
            Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
        }
        return script;
    }
}
