package openshell.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;

import jakarta.json.Json;
import jakarta.json.JsonArrayBuilder;
import jakarta.json.JsonObject;
import openshell.protocol.wire.LogLines;
import openshell.protocol.wire.SupervisorMessage;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The API's and the sessions' bounds, each at the bound and one past it. */
class GatewayBoundsTest {
    @TempDir
    Path tmp;

    @Test
    void providersPerSandboxAtTheBoundAndOnePast() {
        JsonArrayBuilder atBound = Json.createArrayBuilder();
        IntStream.range(0, LaunchSpec.MAX_PROVIDERS).forEach(i -> atBound.add("p" + i));
        JsonObject agent = Json.createObjectBuilder().add("argv", Json.createArrayBuilder().add("/bin/true")).build();
        assertEquals(LaunchSpec.MAX_PROVIDERS, LaunchSpec.from(Json.createObjectBuilder().add("agent", agent)
                .add("providers", atBound).build()).providers().size());
        JsonArrayBuilder past = Json.createArrayBuilder();
        IntStream.range(0, LaunchSpec.MAX_PROVIDERS + 1).forEach(i -> past.add("p" + i));
        assertEquals(GatewayException.Reason.INVALID, assertThrows(GatewayException.class, () -> LaunchSpec.from(
                Json.createObjectBuilder().add("agent", agent).add("providers", past).build())).reason());
    }

    @Test
    void execStdinAtTheBoundReachesTheSessionCheckAndOneBytePastIsRefused() throws Exception {
        try (SandboxSessionTest.Gateway g = SandboxSessionTest.Gateway.start(tmp.resolve("state"),
                new SandboxSessionTest.RecordingDriver())) {
            assertEquals(201, g.call("POST", "/v1/sandboxes", SandboxSessionTest.createBody("web",
                    SandboxSessionTest.POLICY)).status());
            SandboxSessionTest.Reply at = g.call("POST", "/v1/sandboxes/web/exec", exec(SandboxApi.MAX_EXEC_STDIN_BYTES));
            assertEquals(503, at.status(), "accepted as input; refused only for want of a session: " + at.body());
            SandboxSessionTest.Reply past = g.call("POST", "/v1/sandboxes/web/exec", exec(SandboxApi.MAX_EXEC_STDIN_BYTES + 1));
            assertEquals(400, past.status(), past.body());
            assertTrue(past.body().contains("limited to " + SandboxApi.MAX_EXEC_STDIN_BYTES), past.body());
        }
    }

    @Test
    void aStreamWithoutHelloIsClosedAtHelloTimeoutAndLogsKeepTheLastLines() throws Exception {
        try (SandboxSessionTest.Gateway g = SandboxSessionTest.Gateway.start(tmp.resolve("state"),
                new SandboxSessionTest.RecordingDriver())) {
            try (SandboxSessionTest.FakeSupervisor silent = new SandboxSessionTest.FakeSupervisor(g.server().port())) {
                long started = System.nanoTime();
                silent.ended.get(SandboxSessionTest.WAIT.toSeconds(), TimeUnit.SECONDS);
                long waitedMillis = (System.nanoTime() - started) / 1_000_000;
                assertTrue(waitedMillis >= SessionHub.HELLO_TIMEOUT.toMillis() - 1000,
                        "closed after " + waitedMillis + " ms, before the hello timeout");
                assertTrue(silent.received.isEmpty());
            }

            assertEquals(201, g.call("POST", "/v1/sandboxes", SandboxSessionTest.createBody("web",
                    SandboxSessionTest.POLICY)).status());
            String token = new String(g.driver().plans.getFirst().material().supervisorBundle(), StandardCharsets.US_ASCII);
            String id = g.driver().plans.getFirst().context().sandboxId().value();
            try (SandboxSessionTest.FakeSupervisor sup = new SandboxSessionTest.FakeSupervisor(g.server().port())) {
                sup.hello(id, 1, token);
                assertTrue(sup.next().hasConfig());
                sup.ackRefresh();
                List<String> lines = new ArrayList<>();
                IntStream.rangeClosed(0, SandboxLogs.MAX_LINES).forEach(i -> lines.add("line " + i));
                sup.send.onNext(SupervisorMessage.newBuilder().setLogs(LogLines.newBuilder().addAllLines(lines)).build());
                List<String> kept = awaitLast(g, "line " + SandboxLogs.MAX_LINES);
                assertEquals(SandboxLogs.MAX_LINES, kept.size());
                assertFalse(kept.contains("line 0"), "the oldest line went");
                // A gateway event about the sandbox (its refresh) may land after the batch and push one more out.
                List<String> fromSupervisor = kept.stream().filter(l -> l.startsWith("line ")).toList();
                assertTrue(fromSupervisor.size() >= SandboxLogs.MAX_LINES - 1, "the rest is kept: " + fromSupervisor.size());
                assertEquals("line " + SandboxLogs.MAX_LINES, fromSupervisor.getLast(), "oldest first");
            }
        }
    }

    private static List<String> awaitLast(SandboxSessionTest.Gateway g, String last) throws InterruptedException {
        long deadline = System.nanoTime() + SandboxSessionTest.WAIT.toNanos();
        while (true) {
            List<String> lines = g.call("GET", "/v1/sandboxes/web/logs", null).json().getJsonArray("lines")
                    .getValuesAs(jakarta.json.JsonString.class).stream().map(jakarta.json.JsonString::getString).toList();
            if (lines.contains(last)) {
                return lines;
            }
            assertTrue(System.nanoTime() < deadline, "logs not kept in time");
            Thread.sleep(20);
        }
    }

    private static JsonObject exec(int stdinBytes) {
        return Json.createObjectBuilder().add("argv", Json.createArrayBuilder().add("/bin/cat"))
                .add("stdin", Base64.getEncoder().encodeToString(new byte[stdinBytes])).build();
    }
}
