package openshell.supervisor;

import static openshell.supervisor.Fixture.WAIT;
import static openshell.supervisor.Fixture.loopback;
import static openshell.supervisor.Fixture.who;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import openshell.isolation.DenyReason;
import openshell.isolation.IdentityResolution;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * TCP mediation against a real loopback echo server. The workload side is the
 * {@link TestMediationSource} test double (real socket pairs), which stands in for a backend.
 */
@Timeout(120)
class TcpMediationTest {
    static String tcpPolicy(String host, int port) {
        return """
                version: 1
                network_policies:
                  echo:
                    endpoints:
                      - host: %s
                        port: %d
                        protocol: tcp
                    binaries:
                      - path: /usr/bin/nc
                """.formatted(host, port);
    }

    @Test
    void allowedConnectionRelaysBothWaysAndHalfCloses() throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.start(tcpPolicy("echo.test", echo.port()),
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test"))))) {
            f.resolve(who("/usr/bin/nc"), "echo.test");
            try (Socket s = f.connect(who("/usr/bin/nc"), loopback(), echo.port())) {
                byte[] payload = new byte[100_000];
                for (int i = 0; i < payload.length; i++) {
                    payload[i] = (byte) i;
                }
                Thread writer = Thread.ofVirtual().start(() -> {
                    try {
                        s.getOutputStream().write(payload);
                        s.shutdownOutput();
                    } catch (IOException e) {
                        throw new AssertionError(e);
                    }
                });
                byte[] back = s.getInputStream().readAllBytes();
                writer.join(WAIT.toMillis());
                assertArrayEquals(payload, back, "echoed through the relay, then EOF after the half-close");
            }
            String line = f.lastAudit("connect");
            assertTrue(line.contains("\"decision\":\"allow\""), line);
            assertTrue(line.contains("\"host\":\"echo.test\""), line);
            assertTrue(line.contains("\"generation\":1"), line);
            assertTrue(line.contains("\"sandbox\":\"sbx-test\""), line);
            assertTrue(line.contains("\"path\":\"/usr/bin/nc\""), line);
            assertTrue(line.contains("network_policies.echo.endpoints[0]"), line);
        }
    }

    @Test
    void hostNotInPolicyIsDenied() throws Exception {
        try (Fixture f = Fixture.start(tcpPolicy("echo.test", 7), b -> { })) {
            assertEquals(DenyReason.POLICY, f.denied(who("/usr/bin/nc"), InetAddress.getByName("93.184.216.34"), 443));
            assertTrue(f.lastAudit("connect").contains("\"cause\":\"NO_ENDPOINT\""));
        }
    }

    @Test
    void sameDestinationOtherBinaryIsDenied() throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.start(tcpPolicy("echo.test", echo.port()),
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test"))))) {
            f.resolve(who("/usr/bin/nc"), "echo.test");
            f.connect(who("/usr/bin/nc"), loopback(), echo.port()).close();
            assertEquals(DenyReason.POLICY, f.denied(who("/usr/bin/python3"), loopback(), echo.port()));
            assertTrue(f.lastAudit("connect").contains("\"cause\":\"BINARY_NOT_ALLOWED\""));
        }
    }

    @Test
    void unresolvedIdentityIsDenied() throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.start(tcpPolicy("echo.test", echo.port()),
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test"))))) {
            f.resolve(who("/usr/bin/nc"), "echo.test");
            assertEquals(DenyReason.IDENTITY_UNRESOLVED,
                    f.denied(new IdentityResolution.Unresolved("process exited"), loopback(), echo.port()));
            assertTrue(f.lastAudit("connect").contains("\"cause\":\"IDENTITY_UNRESOLVED\""));
        }
    }

    @Test
    void loopbackWithoutAnAliasIsNeverDialled() throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.start(tcpPolicy("127.0.0.1", echo.port()), b -> { })) {
            assertEquals(DenyReason.POLICY, f.denied(who("/usr/bin/nc"), loopback(), echo.port()));
            assertTrue(f.lastAudit("connect").contains("\"cause\":\"ADDRESS_REFUSED\""));
        }
    }

    @Test
    void metadataAddressIsNeverDialledEvenWhenDeclared() throws Exception {
        try (Fixture f = Fixture.start(tcpPolicy("169.254.169.254", 80), b -> { })) {
            assertEquals(DenyReason.POLICY, f.denied(who("/usr/bin/nc"), InetAddress.ofLiteral("169.254.169.254"), 80));
            assertTrue(f.lastAudit("connect").contains("\"cause\":\"ADDRESS_REFUSED\""), f.lastAudit("connect"));
        }
    }

    @Test
    void refusedUpstreamIsReportedAsMediationUnavailable() throws Exception {
        int closedPort;
        try (ServerSocket s = new ServerSocket(0, 1, loopback())) {
            closedPort = s.getLocalPort();
        }
        try (Fixture f = Fixture.start(tcpPolicy("gone.test", closedPort),
                b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("gone.test"))))) {
            f.resolve(who("/usr/bin/nc"), "gone.test");
            assertEquals(DenyReason.MEDIATION_UNAVAILABLE, f.denied(who("/usr/bin/nc"), loopback(), closedPort));
            assertTrue(f.lastAudit("connect").contains("\"upstream\":\"failed\""), f.lastAudit("connect"));
        }
    }

    @Test
    void privateAddressOfAWildcardHostIsRefused() throws Exception {
        InetAddress internal = InetAddress.ofLiteral("10.20.30.40");
        try (Fixture f = Fixture.start(tcpPolicy("\"*.corp.test\"", 5432), b -> { })) {
            // Even with the name pinned (as if answered), a private address needs the exact host declared.
            f.mediation.pins().pin("db.corp.test", internal, false, Duration.ofSeconds(60));
            assertEquals(DenyReason.POLICY, f.denied(who("/usr/bin/nc"), internal, 5432));
            assertTrue(f.lastAudit("connect").contains("\"cause\":\"ADDRESS_REFUSED\""), f.lastAudit("connect"));
            // And the bare address, dialled without a name, matches no endpoint.
            assertEquals(DenyReason.POLICY, f.denied(who("/usr/bin/nc"), InetAddress.ofLiteral("10.9.9.9"), 5432));
        }
    }

    @Test
    void atMaxActiveRelaysTheNextOpenIsExhausted() throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.start(tcpPolicy("echo.test", echo.port()),
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test"))).maxActiveRelays(2))) {
            f.resolve(who("/usr/bin/nc"), "echo.test");
            List<Socket> open = new ArrayList<>();
            open.add(f.connect(who("/usr/bin/nc"), loopback(), echo.port()));
            open.add(f.connect(who("/usr/bin/nc"), loopback(), echo.port()));
            assertEquals(DenyReason.EXHAUSTED, f.denied(who("/usr/bin/nc"), loopback(), echo.port()));
            open.removeFirst().close();
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (f.mediation.activeRelays() > 1 && System.nanoTime() < deadline) {
                Thread.onSpinWait();
                Thread.sleep(5);
            }
            try (Socket again = f.connect(who("/usr/bin/nc"), loopback(), echo.port())) {
                again.getOutputStream().write("x".getBytes(StandardCharsets.US_ASCII));
                assertEquals('x', again.getInputStream().read());
            }
            open.getFirst().close();
        }
    }

    @Test
    void atTheDefaultMaxActiveRelaysTheNextOpenIsExhausted() throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.start(tcpPolicy("echo.test", echo.port()),
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test"))))) {
            f.resolve(who("/usr/bin/nc"), "echo.test");
            List<Socket> open = new ArrayList<>();
            try {
                for (int i = 0; i < SandboxMediation.MAX_ACTIVE_RELAYS; i++) {
                    open.add(f.connect(who("/usr/bin/nc"), loopback(), echo.port()));
                }
                assertEquals(DenyReason.EXHAUSTED, f.denied(who("/usr/bin/nc"), loopback(), echo.port()));
                assertTrue(f.lastAudit("connect").contains("\"cause\":\"EXHAUSTED\""));
            } finally {
                for (Socket s : open) {
                    s.close();
                }
            }
        }
    }

    @Test
    void auditLineCarriesDigestAndAncestors() throws Exception {
        String digest = "ab".repeat(32);
        IdentityResolution nc = new IdentityResolution.Resolved(new openshell.isolation.BinaryIdentity(
                openshell.isolation.Executable.of("/usr/bin/nc", digest),
                List.of(openshell.isolation.Executable.of("/bin/bash", "cd".repeat(32)), openshell.isolation.Executable.of("/sbin/init")),
                List.of("nc", "echo.test", "SECRET-LOOKING-ARG")));
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.start(tcpPolicy("echo.test", echo.port()),
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("echo.test"))))) {
            f.resolve(nc, "echo.test");
            f.connect(nc, loopback(), echo.port()).close();
            String line = f.lastAudit("connect");
            assertTrue(line.contains("\"binary\":{\"path\":\"/usr/bin/nc\",\"sha256\":\"" + digest + "\"}"), line);
            assertTrue(line.contains("\"ancestors\":[{\"path\":\"/bin/bash\",\"sha256\":\"" + "cd".repeat(32)
                    + "\"},{\"path\":\"/sbin/init\"}]"), line);
            assertTrue(!line.contains("SECRET-LOOKING-ARG"), "the command line is not audited: " + line);
            assertTrue(line.contains("\"time\":\"") && line.contains("\"address\":\"127.0.0.1\""), line);
        }
    }

    @Test
    void upstreamThatDoesNotAnswerTimesOut() throws Exception {
        // A listener whose accept queue is full drops SYNs, so connect() waits: the bound must fire.
        try (ServerSocket full = new ServerSocket(0, 1, loopback());
             Fixture f = Fixture.start(tcpPolicy("slow.test", full.getLocalPort()),
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("slow.test")))
                             .connectTimeout(Duration.ofMillis(500)))) {
            List<Socket> fillers = new ArrayList<>();
            try {
                for (int i = 0; i < 8; i++) {
                    Socket s = new Socket();
                    try {
                        s.connect(full.getLocalSocketAddress(), 200);
                        fillers.add(s);
                    } catch (IOException e) {
                        s.close();
                        break;
                    }
                }
                f.resolve(who("/usr/bin/nc"), "slow.test");
                int before = f.audit.size();
                TestMediationSource.Open o = f.source.open(who("/usr/bin/nc"), loopback(), full.getLocalPort());
                assertEquals(DenyReason.TIMEOUT, o.outcome.get(WAIT.toSeconds(), TimeUnit.SECONDS));
                f.awaitAudit("connect", before);
                assertTrue(f.lastAudit("connect").contains("\"upstream\":\"timeout\""));
            } finally {
                for (Socket s : fillers) {
                    s.close();
                }
            }
        }
    }
}
