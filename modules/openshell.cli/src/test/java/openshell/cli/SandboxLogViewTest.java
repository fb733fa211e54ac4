package openshell.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.StringReader;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneId;
import java.util.List;

import jakarta.json.Json;
import jakarta.json.JsonObject;
import jakarta.json.JsonReader;
import org.junit.jupiter.api.Test;

/** {@code sandbox logs} as text, and what {@code --since} takes. */
class SandboxLogViewTest {
    private static final Instant NOW = Instant.parse("2026-12-04T18:30:00Z");

    private static JsonObject json(String text) {
        try (JsonReader r = Json.createReader(new StringReader(text))) {
            return r.readObject();
        }
    }

    @Test
    void sinceTakesDurationsBackFromNowAndTimestamps() {
        assertEquals("2026-12-04T18:29:30Z", SandboxLogView.since("30s", NOW));
        assertEquals("2026-12-04T18:20:00Z", SandboxLogView.since("10m", NOW));
        assertEquals("2026-12-04T17:00:00Z", SandboxLogView.since("1h30m", NOW));
        assertEquals("2026-12-03T18:30:00Z", SandboxLogView.since("1d", NOW));
        assertEquals("2026-12-04T18:20:00Z", SandboxLogView.since("PT10M", NOW));
        assertEquals("2026-12-04T18:00:00Z", SandboxLogView.since("2026-12-04T18:00:00Z", NOW));
        assertEquals("2026-12-04T17:00:00Z", SandboxLogView.since("2026-12-04T18:00:00+01:00", NOW));
        assertEquals(LocalDate.parse("2026-12-04").atStartOfDay(ZoneId.systemDefault()).toInstant().toString(),
                SandboxLogView.since("2026-12-04", NOW));
        assertEquals(NOW.minus(SandboxLogView.MAX_SINCE).toString(), SandboxLogView.since("36500d", NOW), "at the bound");
        for (String bad : new String[] {"36501d", "yesterday", "10", "10x", "1h 30m", "", "-5m", "2026-13-01"}) {
            CliException e = assertThrows(CliException.class, () -> SandboxLogView.since(bad, NOW), bad);
            assertEquals(CliException.USAGE, e.exitCode(), bad);
        }
    }

    @Test
    void decisionsReadAsOneLineEachAndOtherLinesStayAsTheyAre() {
        JsonObject body = json("""
                {"lines":[],"entries":[
                 {"source":"agent","line":"hello"},
                 {"source":"supervisor","line":"[decision] ...","record":{"time":"2026-12-04T18:00:01Z","sandbox":"s",
                  "kind":"connect","generation":1,"decision":"deny","cause":"NO_MATCHING_BLOCK","reason":"no block names it",
                  "binary":{"path":"/usr/bin/curl"},"ancestors":[],"destination":{"host":"example.com","port":443}}},
                 {"source":"supervisor","line":"[decision] ...","record":{"time":"2026-12-04T18:00:02Z","kind":"request",
                  "decision":"allow","rule":"network_policies.api.endpoints[0]","inspection":"L7","enforcement":"audit",
                  "wouldDeny":{"cause":"L7_DENY_RULE"},"reason":"audit only","method":"POST","path":"/x",
                  "binary":{"path":"/usr/bin/curl"},"destination":{"host":"api.test","address":"127.0.0.1","port":8080}}},
                 {"source":"supervisor","line":"[decision] ...","record":{"time":"2026-12-04T18:00:00Z","event":"confinement-degraded",
                  "sandbox":"s","control":"landlock","mechanism":"NOT FULLY ENFORCED"}},
                 {"source":"supervisor","line":"[decision] {cut"}]}
                """);
        assertEquals(List.of("hello",
                "2026-12-04T18:00:01Z supervisor: DENY connect /usr/bin/curl -> example.com:443: no block names it"
                        + " (cause NO_MATCHING_BLOCK)",
                "2026-12-04T18:00:02Z supervisor: ALLOW request /usr/bin/curl -> api.test:8080 POST /x: audit only"
                        + " (rule network_policies.api.endpoints[0], enforcement audit: would deny, L7_DENY_RULE)",
                "2026-12-04T18:00:00Z supervisor: confinement-degraded control=landlock mechanism=NOT FULLY ENFORCED",
                "[decision] {cut"), SandboxLogView.lines(body));
        assertEquals(List.of("a", "b"), SandboxLogView.lines(json("{\"lines\":[\"a\",\"b\"]}")), "an older gateway's answer");
    }
}
