package openshell.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The process-tree check of a Unix peer: on the real kernel (SO_PEERCRED of real processes,
 * their real /proc ancestry) and at its bound on a /proc-shaped directory.
 */
@Timeout(120)
class UnixPeerProcessTreeTest {
    @TempDir
    Path dir;
    private final List<Process> children = new ArrayList<>();
    private ServerSocketChannel server;
    private Path socket;

    @BeforeEach
    void listen() throws IOException {
        socket = dir.resolve("peer.sock");
        server = ServerSocketChannel.open(StandardProtocolFamily.UNIX).bind(UnixDomainSocketAddress.of(socket));
    }

    @AfterEach
    void stop() throws IOException {
        server.close();
        for (Process child : children) {
            child.destroyForcibly();
        }
    }

    @Test
    void thePeerPidIsTheKernelsAndThisProcessIsInItsOwnTree() throws Exception {
        try (SocketChannel dialed = SocketChannel.open(UnixDomainSocketAddress.of(socket));
             SocketChannel accepted = server.accept()) {
            UnixPeer peer = peerOf(accepted);
            assertEquals(ProcessHandle.current().pid(), peer.pid());
            UnixPeerPolicy.processTree(ProcessHandle.current().pid()).check(peer);
            // Seen from the dialing side, the "peer" is the listener: also this process.
            assertEquals(ProcessHandle.current().pid(), peerOf(dialed).pid());
        }
    }

    @Test
    void aChildAndAGrandchildAreAdmittedAndAProcessOutsideTheTreeIsRefused() throws Exception {
        Process sibling = start(List.of("/bin/sleep", "120"));
        Process child = start(dialer(false));
        try (SocketChannel accepted = server.accept()) {
            UnixPeer peer = peerOf(accepted);
            assertEquals(child.pid(), peer.pid(), "SO_PEERCRED names the process that connected");
            UnixPeerPolicy.processTree(ProcessHandle.current().pid()).check(peer);
            UnixPeerPolicy.processTree(child.pid()).check(peer);
            ProtocolException refused = assertThrows(ProtocolException.class,
                    () -> UnixPeerPolicy.processTree(sibling.pid()).check(peer));
            assertEquals(Refusal.PEER_REFUSED, refused.refusal());
            assertTrue(refused.getMessage().contains("not in the process tree of " + sibling.pid()), refused.getMessage());
        }
        Process shell = start(dialer(true));
        try (SocketChannel accepted = server.accept()) {
            UnixPeer peer = peerOf(accepted);
            assertNotEquals(shell.pid(), peer.pid(), "the shell forked the dialer: a grandchild of this process");
            UnixPeerPolicy.processTree(shell.pid()).check(peer);
            assertEquals(Refusal.PEER_REFUSED, assertThrows(ProtocolException.class,
                    () -> UnixPeerPolicy.processTree(child.pid()).check(peer)).refusal());
        }
    }

    @Test
    void aRootThatExitedAdmitsNobody() throws Exception {
        Process root = start(List.of("/bin/sleep", "120"));
        UnixPeerPolicy policy = UnixPeerPolicy.processTree(root.pid());
        root.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        try (SocketChannel dialed = SocketChannel.open(UnixDomainSocketAddress.of(socket));
             SocketChannel accepted = server.accept()) {
            assertTrue(dialed.isConnected());
            assertEquals(Refusal.PEER_REFUSED, assertThrows(ProtocolException.class,
                    () -> policy.check(peerOf(accepted))).refusal());
        }
        assertEquals(Refusal.INVALID_ARGUMENT, assertThrows(ProtocolException.class,
                () -> UnixPeerPolicy.processTree(root.pid())).refusal());
        assertEquals(Refusal.INVALID_ARGUMENT, assertThrows(ProtocolException.class,
                () -> UnixPeerPolicy.processTree(1)).refusal());
    }

    @Test
    void theSupervisorRefusesARuntimeOutsideTheTreeBeforeTls() throws Exception {
        Process sibling = start(List.of("/bin/sleep", "120"));
        server.close();
        Files.delete(socket);
        LaunchTls tls = LaunchTls.issue("session-1");
        TokenIssuer issuer = TokenIssuer.generate(Launch.ISSUER, "k", Clock.systemUTC());
        try (SupervisorEndpoint supervisor = SupervisorEndpoint.builder()
                .transport(Transport.unix(socket))
                .initiator(Initiator.RUNTIME)
                .pin(tls.pin())
                .tokens(new TokenSlot(issuer.mintPair(Launch.grant(), 1), Clock.systemUTC()))
                .peerPolicy(UnixPeerPolicy.sameUser().and(UnixPeerPolicy.processTree(sibling.pid())))
                .build()) {
            supervisor.listen();
            try (RuntimeEndpoint runtime = RuntimeEndpoint.builder()
                    .transport(Transport.unix(socket))
                    .initiator(Initiator.RUNTIME)
                    .identity(tls.runtime())
                    .verifier(TokenVerifier.builder().key(issuer.verificationKey()).issuer(Launch.ISSUER)
                            .audience(TokenAudience.SANDBOX).sandboxId(Launch.SANDBOX)
                            .runtimeGeneration(Launch.GENERATION).build())
                    .peerPolicy(peer -> { })
                    .addService(new TestRuntime(Launch.GENERATION, Clock.systemUTC()))
                    .build()
                    .start()) {
                assertTrue(runtime.listening().isEmpty(), "the runtime dials");
                // Same user, right socket, but this process is not under the expected root.
                ProtocolException refused = assertThrows(ProtocolException.class, supervisor::connect);
                assertEquals(Refusal.PEER_REFUSED, refused.refusal());
                assertTrue(refused.getMessage().contains("not in the process tree"), refused.getMessage());
            }
        }
    }

    @Test
    void theAncestryIsWalkedAtMostTheBoundOfGenerations() throws Exception {
        Path proc = dir.resolve("proc");
        long root = 100;
        stat(proc, root, 1, 5000);
        long parent = root;
        // Pids root+1 .. root+MAX+1, each the child of the one before.
        for (long pid = root + 1; pid <= root + ProtocolLimits.MAX_PEER_ANCESTRY + 1; pid++) {
            stat(proc, pid, parent, 6000);
            parent = pid;
        }
        PeerAncestry policy = PeerAncestry.of(proc, root);
        policy.check(root);
        policy.check(root + ProtocolLimits.MAX_PEER_ANCESTRY);
        ProtocolException tooDeep = assertThrows(ProtocolException.class,
                () -> policy.check(root + ProtocolLimits.MAX_PEER_ANCESTRY + 1));
        assertEquals(Refusal.PEER_REFUSED, tooDeep.refusal());
        assertTrue(tooDeep.getMessage().contains("more than " + ProtocolLimits.MAX_PEER_ANCESTRY), tooDeep.getMessage());
        assertEquals(Refusal.PEER_REFUSED, assertThrows(ProtocolException.class, () -> policy.check(0)).refusal());
        assertEquals(Refusal.PEER_REFUSED, assertThrows(ProtocolException.class, () -> policy.check(99_999)).refusal());
        // The root's pid reused by another process (other start time): nobody is admitted.
        stat(proc, root, 1, 7000);
        assertTrue(assertThrows(ProtocolException.class, () -> policy.check(root + 1)).getMessage().contains("has exited"));
    }

    @Test
    void aCommandNameWithParenthesesAndSpacesDoesNotShiftTheFields() throws Exception {
        Path proc = dir.resolve("proc");
        stat(proc, 200, 1, 10);
        Files.createDirectories(proc.resolve("201"));
        // A process may name itself anything: ") S 200 " inside the name must not be read as fields.
        Files.writeString(proc.resolve("201/stat"), "201 (evil) S 200 x) S 300 " + String.join(" ", fields(300, 11)) + "\n");
        stat(proc, 300, 1, 12);
        assertEquals(Refusal.PEER_REFUSED, assertThrows(ProtocolException.class,
                () -> PeerAncestry.of(proc, 200).check(201)).refusal());
        PeerAncestry.of(proc, 300).check(201);
    }

    private static void stat(Path proc, long pid, long parent, long start) throws IOException {
        Files.createDirectories(proc.resolve(Long.toString(pid)));
        Files.writeString(proc.resolve(pid + "/stat"), pid + " (proc " + pid + ") S " + parent + " "
                + String.join(" ", fields(parent, start)) + "\n");
    }

    /** Fields 5 .. 52 with the start time at field 22. */
    private static List<String> fields(long parent, long start) {
        List<String> fields = new ArrayList<>();
        for (int field = 5; field <= 52; field++) {
            fields.add(field == 22 ? Long.toString(start) : "0");
        }
        return fields;
    }

    /**
     * Seen with the Docker driver: the supervisor admitted its runtime by user name, and a
     * container's uid 1000 was refused because this host's passwd calls 1000 somebody. The uid
     * check compares the kernel's number, whatever names the host has.
     */
    @Test
    void theUidCheckComparesTheKernelsNumberNotAName() throws Exception {
        if (!"root".equals(System.getProperty("user.name"))) {
            throw new AssertionError("this test needs root: it dials as another uid with setpriv");
        }
        java.nio.file.Files.setPosixFilePermissions(dir, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        java.nio.file.Files.setPosixFilePermissions(socket, java.nio.file.attribute.PosixFilePermissions.fromString("rwxrwxrwx"));
        start(List.of("/usr/bin/setpriv", "--reuid=1", "--regid=1", "--clear-groups", "/usr/bin/python3", "-c",
                "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); sys.stdin.read()",
                socket.toString()));
        try (SocketChannel accepted = server.accept()) {
            UnixPeer peer = peerOf(accepted);
            assertEquals(1, peer.uid());
            UnixPeerPolicy.uid(1).check(peer);
            ProtocolException refused = assertThrows(ProtocolException.class, () -> UnixPeerPolicy.uid(2).check(peer));
            assertEquals(Refusal.PEER_REFUSED, refused.refusal());
            assertTrue(refused.getMessage().endsWith("peer uid 1 is not 2"), refused.getMessage());
        }
        try (SocketChannel dialed = SocketChannel.open(UnixDomainSocketAddress.of(socket));
             SocketChannel accepted = server.accept()) {
            // This process is root: its principal is the name "root", its uid the number 0.
            UnixPeerPolicy.uid(0).check(peerOf(accepted));
            assertEquals(0, peerOf(dialed).uid(), "seen from the dialing side, the listener: also root");
        }
    }

    private static UnixPeer peerOf(SocketChannel channel) {
        return new UnixPeer("any", "any", channel);
    }

    /** A child JVM that dials the socket and holds it until its stdin closes. */
    private List<String> dialer(boolean viaShell) throws IOException {
        Path source = dir.resolve("Dial.java");
        Files.writeString(source, """
                public class Dial {
                    public static void main(String[] args) throws Exception {
                        try (var channel = java.nio.channels.SocketChannel.open(
                                java.net.UnixDomainSocketAddress.of(args[0]))) {
                            System.in.read();
                        }
                    }
                }
                """);
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        if (viaShell) {
            // "; exit" keeps the shell from exec-ing java: the dialer is the shell's child.
            return List.of("/bin/sh", "-c", "'" + java + "' '" + source + "' '" + socket + "'; exit $?");
        }
        return List.of(java, source.toString(), socket.toString());
    }

    private Process start(List<String> command) throws IOException {
        Process process = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        children.add(process);
        return process;
    }
}
