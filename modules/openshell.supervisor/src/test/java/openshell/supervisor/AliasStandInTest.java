package openshell.supervisor;

import static openshell.supervisor.Fixture.WAIT;
import static openshell.supervisor.Fixture.loopback;
import static openshell.supervisor.Fixture.who;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;

import openshell.isolation.DenyReason;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * An operator alias to host loopback: the sandbox's own loopback never leaves it, so DNS answers a
 * stand-in address, and a connect to the stand-in is decided on the alias name and dialled at the
 * operator's target. Real loopback echo server; workload side the {@link TestMediationSource} double.
 */
@Timeout(120)
class AliasStandInTest {
    private static String policy(int port) {
        return """
                version: 1
                network_policies:
                  echo:
                    endpoints:
                      - host: echo.test
                        port: %d
                        protocol: tcp
                    binaries:
                      - path: /usr/bin/nc
                """.formatted(port);
    }

    @Test
    void aLoopbackAliasIsAnsweredWithAStandInThatDialsTheTarget() throws Exception {
        try (Fixture.EchoServer echo = new Fixture.EchoServer();
             Fixture f = Fixture.start(policy(echo.port()), b -> b.aliases(HostAliases.of(Map.of("echo.test", loopback(),
                     "other.test", loopback()))))) {
            byte[] answer = f.resolve(who("/usr/bin/nc"), "echo.test");
            InetAddress standIn = InetAddress.getByAddress(Arrays.copyOfRange(answer, answer.length - 4, answer.length));
            // Names are numbered in sorted order: echo.test first.
            assertEquals(InetAddress.getByName("198.18.0.1"), standIn);
            assertTrue(f.lastAudit("dns").contains("1 addresses (operator alias)"), f.lastAudit("dns"));
            try (Socket s = f.connect(who("/usr/bin/nc"), standIn, echo.port())) {
                s.setSoTimeout((int) WAIT.toMillis());
                s.getOutputStream().write("ping".getBytes(StandardCharsets.US_ASCII));
                s.shutdownOutput();
                assertEquals("ping", new String(s.getInputStream().readAllBytes(), StandardCharsets.US_ASCII));
            }
            String connect = f.lastAudit("connect");
            assertTrue(connect.contains("\"host\":\"echo.test\"") && connect.contains("127.0.0.1"), connect);
            // Another binary to the same stand-in is still denied on the name's policy.
            assertEquals(DenyReason.POLICY, f.denied(who("/usr/bin/python3"), standIn, echo.port()));
        }
    }

    @Test
    void standInsAreOnlyForLoopbackTargetsAndStablePerName() throws Exception {
        HostAliases aliases = HostAliases.of(Map.of("b.test", loopback(), "a.test", InetAddress.getByName("::1"),
                "lan.test", InetAddress.getByName("192.0.2.7")));
        assertEquals(InetAddress.getByName("2001:2::1"), aliases.answerFor("a.test").orElseThrow());
        assertEquals(InetAddress.getByName("198.18.0.2"), aliases.answerFor("B.test.").orElseThrow());
        assertEquals(InetAddress.getByName("192.0.2.7"), aliases.answerFor("lan.test").orElseThrow());
        assertTrue(aliases.answerFor("none.test").isEmpty());
    }
}
