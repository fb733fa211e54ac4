package openshell.supervisor;

import static openshell.supervisor.Fixture.WAIT;
import static openshell.supervisor.Fixture.loopback;
import static openshell.supervisor.Fixture.send;
import static openshell.supervisor.Fixture.who;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * How the L7 relay treats what upstream sends back, against a real loopback server that answers
 * every request with a canned byte string. Workload side: the {@link TestMediationSource} test double.
 */
@Timeout(120)
class UpstreamResponseTest {
    /** Answers each request head with {@code answer}, keeping the connection. */
    private static ServerSocket canned(String answer) throws IOException {
        ServerSocket server = new ServerSocket(0, 50, loopback());
        Thread.ofPlatform().daemon().start(() -> {
            while (!server.isClosed()) {
                try (Socket s = server.accept()) {
                    HttpInput in = new HttpInput(s.getInputStream(), 4096);
                    OutputStream out = s.getOutputStream();
                    while (HttpParser.readRequest(in) != null) {
                        out.write(answer.getBytes(StandardCharsets.ISO_8859_1));
                        out.flush();
                    }
                } catch (IOException e) {
                    // Next connection.
                }
            }
        });
        return server;
    }

    private static String policy(int port) {
        return HttpMediationTest.restPolicy(port);
    }

    private static int statusesUntilClose(Fixture f, ServerSocket upstream) throws Exception {
        try (Socket s = f.connect(who("/usr/bin/curl"), loopback(), upstream.getLocalPort())) {
            s.setSoTimeout((int) WAIT.toMillis());
            send(s, "GET /a HTTP/1.1\r\nHost: api.test\r\n\r\n");
            HttpInput in = new HttpInput(s.getInputStream(), 4096);
            int finals = 0;
            while (true) {
                HttpHead h;
                try {
                    h = HttpParser.readResponse(in, "GET");
                } catch (java.io.EOFException e) {
                    return finals;
                }
                if (h.status() >= 200) {
                    HttpParser.copyBody(in, OutputStream.nullOutputStream(), h, new byte[512], n -> { });
                    return h.status();
                }
            }
        }
    }

    @Test
    void interimResponsesAreRelayedUpToTheBound() throws Exception {
        String interim = "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n";
        String ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        try (ServerSocket atBound = canned(interim.repeat(HttpParser.MAX_INTERIM_RESPONSES) + ok);
             ServerSocket overBound = canned(interim.repeat(HttpParser.MAX_INTERIM_RESPONSES + 1) + ok);
             Fixture f = Fixture.start(policy(atBound.getLocalPort()),
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("api.test"))))) {
            f.resolve(who("/usr/bin/curl"), "api.test");
            assertEquals(200, statusesUntilClose(f, atBound));
            try (Fixture g = Fixture.start(policy(overBound.getLocalPort()),
                    b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("api.test"))))) {
                g.resolve(who("/usr/bin/curl"), "api.test");
                assertEquals(0, statusesUntilClose(g, overBound), "closed without a final response");
            }
        }
    }

    @Test
    void malformedUpstreamResponseAnswers502() throws Exception {
        try (ServerSocket bad = canned("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx");
             Fixture f = Fixture.start(policy(bad.getLocalPort()),
                     b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("api.test"))))) {
            f.resolve(who("/usr/bin/curl"), "api.test");
            assertEquals(502, statusesUntilClose(f, bad));
        }
    }

    @Test
    void statusLineAtItsBound() throws IOException {
        String prefix = "HTTP/1.1 200 ";
        String atBound = prefix + "x".repeat(HttpParser.MAX_STATUS_LINE_BYTES - prefix.length());
        assertEquals(200, HttpParser.readResponse(HttpParserTest.input(atBound + "\r\n\r\n"), "GET").status());
        assertEquals(502, assertThrows(HttpParseException.class,
                () -> HttpParser.readResponse(HttpParserTest.input(atBound + "x\r\n\r\n"), "GET")).status());
    }
}
