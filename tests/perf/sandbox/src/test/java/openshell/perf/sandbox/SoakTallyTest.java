package openshell.perf.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The soak's accounting: what a time-bounded run reports, and which outcomes are violations. */
class SoakTallyTest {
    /** A rate line as osperf prints it for a time-bounded run (a machine too slow for the target). */
    static String rateLine(long attempted, long ok, long failedSlow, long failedOther, long deniedConnected, long deniedRefused,
                           long deniedSlow, long deniedOther, long aborted) {
        return ("{\"rate\":{\"target_per_s\":50.000,\"seconds\":60,\"drain_s\":5,\"threads\":2,\"attempted\":%d,\"ok\":%d,"
                + "\"failed\":%d,\"failed_slow\":%d,\"failed_other\":%d,\"first_error\":\"%s\",\"denied_connected\":%d,"
                + "\"denied_refused\":%d,\"denied_slow\":%d,\"denied_other\":%d,\"first_denied_error\":\"\",\"aborted\":%d,"
                + "\"window_ns\":60000000000,\"elapsed_ns\":61234000000,\"achieved_per_s\":%.3f}}")
                .formatted(attempted, ok, failedSlow + failedOther, failedSlow, failedOther,
                        failedOther > 0 ? "Connection refused" : failedSlow > 0 ? "Connection timed out" : "",
                        deniedConnected, deniedRefused, deniedSlow, deniedOther, aborted, attempted / 60.0);
    }

    private static SoakTally.Agent agent(String sandbox, String line) throws IOException {
        return SoakTally.Agent.of(sandbox, Json.object(line));
    }

    @Test
    void aSlowMachineIsABudgetMissNotAViolation() throws IOException {
        SoakTally tally = new SoakTally();
        // 2 of 20 sandboxes: 1,200 connects each at most, far fewer started; timeouts and aborts.
        tally.add(agent("sb-a", rateLine(600, 530, 8, 0, 0, 60, 0, 0, 2)), List.of(1_000_000L, 3_000_000L));
        tally.add(agent("sb-b", rateLine(420, 370, 0, 0, 0, 40, 2, 0, 8)), List.of(2_000_000L));
        assertEquals(1020, tally.attempted());
        assertEquals(17.0, tally.achievedPerSecond(), 1e-9);
        Map<String, Object> json = tally.json(100);
        assertEquals(100.0, json.get("target_ops_per_s"));
        assertEquals(17.0, json.get("ops_per_s"));
        assertEquals(900L, json.get("allowed_ok"));
        assertEquals(8L, json.get("allowed_failed_slow"));
        assertEquals(0L, json.get("allowed_failed_other"));
        assertEquals(100L, json.get("denied_refused"));
        assertEquals(2L, json.get("denied_slow"));
        assertEquals(10L, json.get("aborted"));
        assertEquals(61.234, json.get("elapsed_s"));
        assertEquals(2.0, json.get("p50_ms"));
        assertEquals(List.of(), json.get("agents_cut_off"));
        assertEquals(List.of(), tally.violations());
    }

    @Test
    void aDeniedConnectThatConnectedIsAViolation() throws IOException {
        SoakTally tally = new SoakTally();
        tally.add(agent("sb-a", rateLine(100, 90, 0, 0, 1, 9, 0, 0, 0)), List.of());
        assertEquals(1, tally.violations().size());
        assertTrue(tally.violations().getFirst().contains("1 connected"), tally.violations().toString());
    }

    @Test
    void aDeniedConnectWithAnUnexpectedErrnoIsAViolation() throws IOException {
        SoakTally tally = new SoakTally();
        tally.add(agent("sb-a", rateLine(100, 90, 0, 0, 0, 9, 0, 1, 0)), List.of());
        assertTrue(tally.violations().getFirst().contains("1 other errors"), tally.violations().toString());
    }

    @Test
    void noDeniedConnectRefusedMeansTheDenialCheckDidNotRun() throws IOException {
        SoakTally tally = new SoakTally();
        tally.add(agent("sb-a", rateLine(9, 9, 0, 0, 0, 0, 0, 0, 0)), List.of());
        assertTrue(tally.violations().getFirst().contains("0 refused"), tally.violations().toString());
    }

    @Test
    void anAllowedConnectFailingOtherThanByATimeoutIsAViolation() throws IOException {
        SoakTally tally = new SoakTally();
        tally.add(agent("sb-a", rateLine(100, 85, 3, 2, 0, 10, 0, 0, 0)), List.of());
        assertEquals(List.of("soak: 2 allowed connects failed for a reason other than a timeout (first: Connection refused)"),
                tally.violations());
    }

    @Test
    void anAgentThatDidNotReportIsAViolationNamingItsSandbox() throws IOException {
        SoakTally tally = new SoakTally();
        tally.add(agent("sb-a", rateLine(100, 90, 0, 0, 0, 10, 0, 0, 0)), List.of());
        tally.cutOff("sb-b", "soak agent sb-b: osperf ended (status 137) before the expected line");
        assertEquals(List.of("soak: the agent of sb-b did not report: soak agent sb-b: osperf ended (status 137) before the expected line"),
                tally.violations());
        assertEquals(1, tally.json(100).get("agents_reported"));
        assertEquals(List.of(Map.of("sandbox", "sb-b", "error", "soak agent sb-b: osperf ended (status 137) before the expected line")),
                tally.json(100).get("agents_cut_off"));
    }

    @Test
    void aRateLineLackingAFieldIsAnErrorNamingTheSandbox() {
        IOException e = assertThrows(IOException.class,
                () -> agent("sb-c", "{\"rate\":{\"ok\":12,\"failed\":0,\"first_error\":\"\",\"denied_connected\":0}}"));
        assertTrue(e.getMessage().startsWith("soak agent sb-c: "), e.getMessage());
        IOException notALine = assertThrows(IOException.class, () -> agent("sb-d", "{\"ready\":\"rate\"}"));
        assertTrue(notALine.getMessage().startsWith("soak agent sb-d: "), notALine.getMessage());
        IOException notCounts = assertThrows(IOException.class, () -> SoakTally.samples("sb-e", Map.of("samples_ns", List.of(1L, 2.5))));
        assertTrue(notCounts.getMessage().startsWith("soak agent sb-e: "), notCounts.getMessage());
        IOException noSamples = assertThrows(IOException.class, () -> SoakTally.samples("sb-f", Map.of("result", "rate")));
        assertTrue(noSamples.getMessage().startsWith("soak agent sb-f: "), noSamples.getMessage());
    }

    @Test
    void theResultsRowShowsTargetAchievedTimeoutsAbortsAndCutOffAgents() throws IOException {
        SoakTally tally = new SoakTally();
        tally.add(agent("sb-a", rateLine(600, 530, 8, 0, 0, 60, 2, 0, 2)), List.of(1_000_000L));
        tally.cutOff("sb-b", "cut off");
        Map<String, Object> r = new java.util.LinkedHashMap<>(Map.of("scenario", "soak", "variant", "2 sandboxes"));
        r.putAll(tally.json(100));
        r.put("leaks", List.of());
        String row = ResultsTable.soakRow(r);
        assertEquals("| 2 sandboxes | 600 (2) | 100 | 10.00 | 530 / 8 (8) | 60 / 0 / 0 (2) | 1.00 / 1.00 | none; "
                + "**1 agent(s) did not report** | - | - |\n", row);
    }

    @Test
    void theResultsRowNamesProcessesThatExitedAndALeakCheckThatDidNotRun() {
        Map<String, Object> r = Json.object("{\"variant\":\"1 sandbox\",\"ops\":10,\"target_ops_per_s\":1000.0,\"ops_per_s\":10.0,"
                + "\"allowed_ok\":9,\"allowed_failed\":0,\"denied_refused\":1,\"denied_connected\":0,\"denied_other_error\":0,"
                + "\"p50_ms\":1.0,\"p99_ms\":1.0,\"leaks\":[],\"exited\":[{\"sandbox\":\"sb-x\",\"process\":\"runtime\",\"log_tail\":[]}]}");
        assertTrue(ResultsTable.soakRow(r).contains("| none; **1 process(es) exited: sb-x runtime** |"), ResultsTable.soakRow(r));
        r.remove("leaks");
        assertTrue(ResultsTable.soakRow(r).contains("| **not checked**; "), ResultsTable.soakRow(r));
    }

    @Test
    void aRecordFromBeforeTheTimeBoundStillRenders() {
        Map<String, Object> old = Json.object("{\"scenario\":\"soak\",\"variant\":\"1 sandbox\",\"ops\":59994,\"ops_per_s\":378.2,"
                + "\"allowed_ok\":54000,\"allowed_failed\":0,\"denied_refused\":5994,\"denied_connected\":0,\"denied_other_error\":0,"
                + "\"p50_ms\":38.0,\"p99_ms\":136.1,\"leaks\":[]}");
        assertEquals("| 1 sandbox | 59994 | - | 378 | 54000 / 0 | 5994 / 0 / 0 | 38.00 / 136 | none | - | - |\n", ResultsTable.soakRow(old));
    }
}
