package openshell.tests.docker.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import openshell.isolation.SandboxSessionId;
import openshell.protocol.LaunchBundles;
import openshell.protocol.TokenIssuer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The jlink-built sandbox runtime as PID 1 of a workload container on a real dockerd, started as
 * the Docker driver starts it ({@link WorkloadContainer}): its health check in a glibc image, a
 * musl image without glibc and an image of one static binary; an image whose ENV, loader
 * configuration and own files at the runtime's mount point would take over a runtime that
 * trusted them; and the runtime dialling the real supervisor (a host process, as the process
 * driver starts it) through a Unix socket in the channel directory and serving it, up to the
 * agent, which it still refuses (no mount for the trust store, no cgroup v2 leaf in a container).
 */
class RuntimeInContainerTest {
    /** Longest a health check may take, container start included. */
    private static final Duration CHECK_WAIT = Duration.ofSeconds(60);
    /** Longest from {@code docker run} to the runtime's serving line and the supervisor's attach. */
    private static final Duration SERVE_WAIT = Duration.ofSeconds(90);

    private static Docker docker;
    private static TestImages images;
    private static Path work;

    @BeforeAll
    static void images() throws Exception {
        docker = Docker.connect();
        work = Files.createDirectories(Path.of(System.getProperty("openshell.docker.work.dir", "target/docker-work")))
                .toAbsolutePath();
        Path launcher = WorkloadContainer.runtimeImage().resolve("bin/openshell-sandbox-static");
        if (!Files.isExecutable(launcher)) {
            fail("no " + launcher + ": build the sandbox image first (./mvnw -pl jlink/openshell-sandbox -am verify)");
        }
        images = TestImages.build(docker, work);
    }

    @AfterAll
    static void removeImages() {
        if (images != null) {
            images.close();
        }
    }

    private static Docker.Result check(String image) {
        String name = WorkloadContainer.uniqueName("check");
        try {
            List<String> args = WorkloadContainer.runArguments(name, Optional.empty(), Optional.empty());
            args.add(images.reference(image));
            args.add("--check");
            return docker.run(args, CHECK_WAIT);
        } finally {
            docker.removeContainer(name);
        }
    }

    @Test
    void theRuntimePassesItsHealthCheckInAGlibcAMuslAndAScratchImage() {
        for (String image : List.of("glibc", "musl", "scratch")) {
            Docker.Result r = check(image);
            assertEquals(0, r.exit(), image + ": " + r.err() + r.out());
            assertTrue(r.out().contains("\"check\":\"passed\""), image + ": " + r.out());
            // What the walls found inside Docker's default profile, by trying each.
            assertTrue(r.out().contains("\"privilege\":\"unprivileged\""), image + ": " + r.out());
            assertTrue(r.out().contains("\"taskMemory\":\"PROC_MEM\""), image + ": process_vm_readv is EPERM there: " + r.out());
            assertTrue(r.out().contains("\"interfaces\":\"[lo]\""), image + ": " + r.out());
            assertTrue(r.out().contains("\"dnsRelay\":\"/127.0.0.53:53\""), image + ": " + r.out());
            assertTrue(r.out().contains("\"dumpable\":false"), image + ": " + r.out());
            assertTrue(r.out().contains("\"landlockAbi\":"), image + ": " + r.out());
        }
    }

    @Test
    void aRuntimeImageMountedWritableIsRefused() {
        String name = WorkloadContainer.uniqueName("writable");
        try {
            List<String> args = WorkloadContainer.runArguments(name, Optional.empty(), Optional.empty());
            int mount = args.indexOf(WorkloadContainer.runtimeImage() + ":" + WorkloadContainer.RUNTIME + ":ro");
            args.set(mount, WorkloadContainer.runtimeImage() + ":" + WorkloadContainer.RUNTIME);
            args.add(images.reference("musl"));
            args.add("--check");
            Docker.Result r = docker.run(args, CHECK_WAIT);
            assertEquals(70, r.exit(), r.err() + r.out());
            assertTrue(r.err().contains("is writable") && r.err().contains(":ro"), r.err());
        } finally {
            docker.removeContainer(name);
        }
    }

    @Test
    void anImagesEnvironmentLoaderFilesAndFilesAtTheRuntimesMountPointNeverReachTheRuntime() {
        // The image's ENV sets LD_PRELOAD (evil.so exits 66 when loaded), LD_LIBRARY_PATH, GLIBC_TUNABLES and
        // every JVM options variable; its /etc/ld.so.preload names evil.so, its /etc/nsswitch.conf an "evil"
        // NSS service of the same code (the JVM looks its user up at start); it ships its own launcher and
        // argument file at /.openshell/runtime, where the runtime image is mounted read-only. (Run by hand on
        // 2026-12-04 with the build machine's unrenamed ld.so or libc.so.6 in lib/glibc, the same check
        // printed EVIL-PRELOAD: each rename is what keeps that file out.)
        Docker.Result r = check("hostile");
        assertEquals(0, r.exit(), r.err() + r.out());
        assertTrue(r.out().contains("\"check\":\"passed\""), r.out());
        String all = r.out() + r.err();
        assertFalse(all.contains("EVIL-PRELOAD"), "the image's preload ran in the runtime: " + all);
        assertFalse(all.contains("SHADOWED-LAUNCHER"), "the image's file shadowed the runtime's launcher: " + all);
        assertFalse(all.contains("Picked up"), "the JVM took options from the image's ENV: " + all);
        assertFalse(all.contains("PrintFlagsFinal") || all.contains("bool UseSerialGC"), "the image's JVM options applied: " + all);
        // The same image's own programs do get its ENV and preload: the hostile parts are real.
        String name = WorkloadContainer.uniqueName("hostile-self");
        try {
            // glibc's libc.so.6 is itself a dynamically loaded program (it prints its version).
            Docker.Result own = docker.run(List.of("run", "--rm", "--name", name, "--network", "none", "--user", "10001:10001",
                    "--entrypoint", "/lib/x86_64-linux-gnu/libc.so.6", images.reference("hostile")), CHECK_WAIT);
            assertEquals(66, own.exit(), "evil.so should stop the image's own dynamically loaded program: " + own.err() + own.out());
            assertTrue(own.err().contains("EVIL-PRELOAD"), own.err());
        } finally {
            docker.removeContainer(name);
        }
    }

    @Test
    void anAgentRunsInTheContainerAsItsUserUnderTheWallsAndItsExitEndsTheSandbox() throws Exception {
        // Where the workload can write (its workspace), what it is, and what it must not reach.
        String script = """
                #!/bin/busybox sh
                id -u > /sandbox/uid
                echo written > /sandbox/written
                ( echo x > /.openshell/runtime/x ) 2> /sandbox/runtime-write || true
                ( echo x > /etc/x ) 2> /sandbox/etc-write || true
                ( cat /.openshell/channel/*/workload-trust.pem > /dev/null && echo readable ) > /sandbox/trust 2>&1 || true
                ( ls /.openshell/channel ) > /sandbox/channel-list 2>&1 || true
                echo "$SSL_CERT_FILE" > /sandbox/ssl-cert-file
                echo done > /sandbox/done
                """;
        try (ContainerSandbox sandbox = ContainerSandbox.start(docker, images.reference("musl"), work, "version: 1\nnetwork_policies: {}\n",
                List.of("/bin/busybox", "sh", ContainerSandbox.WORKSPACE + "/agent.sh"), Map.of("PATH", "/bin"),
                ContainerSandbox.Options.none(), Map.of("agent.sh", script))) {
            long serving = sandbox.awaitServing(SERVE_WAIT);
            long ready = sandbox.awaitReady(SERVE_WAIT);
            System.out.println("docker run -> runtime serving " + serving + " ms, -> supervisor ready (agent started) " + ready + " ms");
            assertTrue(sandbox.runtimeLines().stream().anyMatch(l -> l.contains("\"privilege\":\"unprivileged")), sandbox.logs());
            assertEquals(0, sandbox.awaitSupervisorExit(SERVE_WAIT), sandbox.logs());
            assertEquals(Optional.of("done"), sandbox.workspaceFile("done"), sandbox.logs());
            assertEquals(Optional.of(Integer.toString(WorkloadContainer.UID)), sandbox.workspaceFile("uid"));
            assertEquals(Optional.of("written"), sandbox.workspaceFile("written"));
            assertTrue(sandbox.workspaceFile("runtime-write").orElseThrow().contains("Read-only file system")
                    || sandbox.workspaceFile("runtime-write").orElseThrow().contains("denied"), sandbox.workspaceFile("runtime-write").orElseThrow());
            assertTrue(sandbox.workspaceFile("etc-write").orElseThrow().contains("denied"), sandbox.workspaceFile("etc-write").orElseThrow());
            // The trust bundle beside the runtime's files is named by the variables; Landlock keeps the rest of
            // the channel directory (the supervisor's socket, the runtime's directory) out of sight.
            assertTrue(sandbox.workspaceFile("ssl-cert-file").orElseThrow().endsWith("/workload-trust.pem"), sandbox.logs());
            assertTrue(sandbox.workspaceFile("channel-list").orElseThrow().contains("denied"), sandbox.workspaceFile("channel-list").orElseThrow());
        }
    }

    @Test
    void aPolicyNamingAnotherUserIsRefusedBeforeAnythingRunsNotIgnored() throws Exception {
        openshell.protocol.WorkloadConfinement otherUser = new openshell.protocol.WorkloadConfinement(false, List.of(), List.of(),
                false, false, Optional.of("10002"), Optional.of("10002"));
        try (ContainerSandbox sandbox = ContainerSandbox.start(docker, images.reference("musl"), work,
                "version: 1\nprocess: {run_as_user: 10002, run_as_group: 10002}\n",
                List.of("/bin/busybox", "sh", "-c", "echo ran > /sandbox/ran"), Map.of("PATH", "/bin"),
                new ContainerSandbox.Options(Map.of(), Optional.of(otherUser)), Map.of())) {
            // 70: EXIT_PROBE_FAILED, the runtime's "refusing to serve".
            assertEquals(70, sandbox.awaitRuntimeExit(SERVE_WAIT), sandbox.logs());
            String runtime = String.join("\n", sandbox.runtimeLines());
            assertTrue(runtime.contains("refusing to serve") && runtime.contains("10002:10002") && runtime.contains("CAP_SETUID"), sandbox.logs());
            assertFalse(runtime.contains("\"serving\":true"), sandbox.logs());
            assertEquals(Optional.empty(), sandbox.workspaceFile("ran"));
        }
    }

    @Test
    void anAgentIsAllowedOneRequestThroughAHostAliasAndDeniedAnUndeclaredHostAndAnotherBinary() throws Exception {
        String allowedBody = "allowed-body-d0c4";
        List<String> upstreamSaw = new CopyOnWriteArrayList<>();
        // The upstream listens on the host's loopback; the supervisor (host network namespace) reaches it
        // through the operator's alias. The workload's own loopback is the container's, empty.
        com.sun.net.httpserver.HttpServer upstream = com.sun.net.httpserver.HttpServer.create(
                new java.net.InetSocketAddress(java.net.InetAddress.getLoopbackAddress(), 0), 16);
        upstream.createContext("/", exchange -> {
            upstreamSaw.add(exchange.getRequestMethod() + " " + exchange.getRequestURI().getPath());
            byte[] body = (exchange.getRequestURI().getPath().equals("/allowed") ? allowedBody : "never").getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(200, body.length);
            exchange.getResponseBody().write(body);
            exchange.close();
        });
        upstream.start();
        try {
            int port = upstream.getAddress().getPort();
            String policy = """
                    version: 1
                    network_policies:
                      demo:
                        endpoints:
                          - host: "api.docker.test"
                            port: %d
                            protocol: rest
                            rules:
                              - {method: GET, path: /allowed}
                        binaries:
                          - path: /bin/busybox
                    """.formatted(port);
            // The agent is the other copy: a policy matches a binary or one of its ancestors, so only what
            // /usr/local/bin/busybox runs as itself is outside the policy, and /bin/busybox wget inside it.
            String script = """
                    #!/usr/local/bin/busybox sh
                    /bin/busybox wget -q -O /sandbox/allowed.body http://api.docker.test:%1$d/allowed 2> /sandbox/allowed.err; echo $? > /sandbox/allowed.rc
                    /bin/busybox wget -q -O /sandbox/undeclared.body http://undeclared.docker.test:%1$d/allowed 2> /sandbox/undeclared.err; echo $? > /sandbox/undeclared.rc
                    /usr/local/bin/busybox wget -q -O /sandbox/binary.body http://api.docker.test:%1$d/allowed 2> /sandbox/binary.err; echo $? > /sandbox/binary.rc
                    echo done > /sandbox/done
                    """.formatted(port);
            java.net.InetAddress loopback = java.net.InetAddress.getLoopbackAddress();
            // busybox wget of the musl image (no -T: Debian's busybox 1.35 wget crashes on it).
            try (ContainerSandbox sandbox = ContainerSandbox.start(docker, images.reference("musl"), work, policy,
                    List.of("/usr/local/bin/busybox", "sh", ContainerSandbox.WORKSPACE + "/agent.sh"), Map.of("PATH", "/bin"),
                    new ContainerSandbox.Options(Map.of("api.docker.test", loopback, "undeclared.docker.test", loopback), Optional.empty()),
                    Map.of("agent.sh", script))) {
                sandbox.awaitReady(SERVE_WAIT);
                sandbox.awaitSupervisorExit(SERVE_WAIT);
                String why = sandbox.logs() + "\nallowed.err: " + sandbox.workspaceFile("allowed.err").orElse("")
                        + "\nundeclared.err: " + sandbox.workspaceFile("undeclared.err").orElse("")
                        + "\nbinary.err: " + sandbox.workspaceFile("binary.err").orElse("");
                assertEquals(Optional.of("done"), sandbox.workspaceFile("done"), why);
                assertEquals(Optional.of("0"), sandbox.workspaceFile("allowed.rc"), why);
                assertEquals(Optional.of(allowedBody), sandbox.workspaceFile("allowed.body"), why);
                assertFalse(sandbox.workspaceFile("undeclared.rc").orElseThrow().equals("0"), why);
                assertFalse(sandbox.workspaceFile("binary.rc").orElseThrow().equals("0"), why);
                // Exactly one request reached the upstream: the allowed one.
                assertEquals(List.of("GET /allowed"), upstreamSaw, why);
                // The supervisor's audit says why each was decided, with the binary identified through /proc.
                String audit = String.join("\n", sandbox.supervisorLines());
                assertTrue(audit.contains("\"decision\":\"deny\"") && audit.contains("undeclared.docker.test"), why);
                assertTrue(sandbox.supervisorLines().stream().anyMatch(l -> l.contains("\"decision\":\"deny\"")
                        && l.contains("\"path\":\"/usr/local/bin/busybox\"") && l.contains("api.docker.test")), why);
                assertTrue(sandbox.supervisorLines().stream().anyMatch(l -> l.contains("\"kind\":\"request\"")
                        && l.contains("\"decision\":\"allow\"") && l.contains("\"path\":\"/bin/busybox\"")), why);
            }
        } finally {
            upstream.stop(0);
        }
    }

    /** NetworkBroker's bounds where pidfd_getfd is refused (module-info's table): 1024 sockets, 10 s. */
    private static final int MAX_HELD_SOCKETS = 1024;
    private static final Duration HELD_SOCKET_WAIT = Duration.ofSeconds(10);

    @Test
    void aSocketIsHeldFromItsSocketCallForItsFirstConnectWithinTheBoundsAndLetGoBeyondThem() throws Exception {
        // Each probe connects to the container's own loopback (nothing listens: ECONNREFUSED either way), on
        // its own port; the runtime says "continue unheld" only for a socket it had let go of.
        String script = """
                #!/bin/busybox sh
                held-probe wait 0 9001 > /sandbox/wait-0
                held-probe wait %d 9002 > /sandbox/wait-beyond
                held-probe many %d 9003 > /sandbox/many-at
                held-probe many %d 9004 > /sandbox/many-beyond
                echo done > /sandbox/done
                """.formatted(HELD_SOCKET_WAIT.toSeconds() + 2, MAX_HELD_SOCKETS, MAX_HELD_SOCKETS + 1);
        try (ContainerSandbox sandbox = ContainerSandbox.start(docker, images.reference("musl"), work, "version: 1\nnetwork_policies: {}\n",
                List.of("/bin/busybox", "sh", ContainerSandbox.WORKSPACE + "/agent.sh"), Map.of("PATH", "/bin:/usr/local/bin"),
                ContainerSandbox.Options.none(), Map.of("agent.sh", script))) {
            sandbox.awaitReady(SERVE_WAIT);
            assertEquals(0, sandbox.awaitSupervisorExit(SERVE_WAIT), sandbox.logs());
            assertEquals(Optional.of("done"), sandbox.workspaceFile("done"), sandbox.logs());
            for (String probe : List.of("wait-0", "wait-beyond", "many-at", "many-beyond")) {
                assertEquals(Optional.of("connect=111"), sandbox.workspaceFile(probe), probe + ": " + sandbox.logs());
            }
            String runtime = String.join("\n", sandbox.runtimeLines());
            java.util.function.Predicate<Integer> letGo = port -> sandbox.runtimeLines().stream()
                    .anyMatch(l -> l.contains("continue unheld") && l.contains(":" + port + ":"));
            assertFalse(letGo.test(9001), "a socket connected at once is still held: " + runtime);
            assertTrue(letGo.test(9002), "a socket not connected within " + HELD_SOCKET_WAIT + " is let go: " + runtime);
            assertFalse(letGo.test(9003), MAX_HELD_SOCKETS + " sockets are all held: " + runtime);
            assertTrue(letGo.test(9004), "the oldest of " + (MAX_HELD_SOCKETS + 1) + " is let go: " + runtime);
        }
    }
}
