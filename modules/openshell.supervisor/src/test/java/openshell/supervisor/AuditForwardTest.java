package openshell.supervisor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.IntStream;

import org.junit.jupiter.api.Test;

/**
 * The supervisor's audit lines on their way to the gateway's sandbox log: marked, in order,
 * bounded a second with denials first and the rest counted, and an agent line that imitates one
 * escaped.
 */
class AuditForwardTest {
    private static String line(int i, String decision) {
        return "{\"time\":\"2026-12-04T18:00:00Z\",\"sandbox\":\"s\",\"kind\":\"connect\",\"generation\":1,\"decision\":\""
                + decision + "\",\"reason\":\"r" + i + "\"}";
    }

    @Test
    void linesQueuedBeforeTheSessionGoOnceItIsAttachedMarkedAndInOrder() {
        List<List<String>> sent = new CopyOnWriteArrayList<>();
        try (AuditForward forward = new AuditForward(() -> 0L, false)) {
            forward.record(line(1, "allow"));
            forward.record(line(2, "deny"));
            forward.flush(false);
            assertTrue(sent.isEmpty(), "nothing goes before a sink is attached");
            forward.attach(sent::add);
            forward.flush(false);
        }
        assertEquals(List.of(List.of(AuditForward.PREFIX + line(1, "allow"), AuditForward.PREFIX + line(2, "deny"))), sent);
    }

    @Test
    void atTheBoundDenialsGoFirstAndTheRestIsCountedInOneLine() {
        List<List<String>> sent = new CopyOnWriteArrayList<>();
        int over = 10;
        try (AuditForward forward = new AuditForward(() -> 0L, false)) {
            forward.attach(sent::add);
            // Allows first, then as many denials as the budget holds, then more allows.
            IntStream.range(0, over).forEach(i -> forward.record(line(i, "allow")));
            IntStream.range(0, AuditForward.MAX_LINES_PER_SECOND).forEach(i -> forward.record(line(100 + i, "deny")));
            forward.flush(false);
            assertEquals(1, sent.size());
            List<String> first = sent.getFirst();
            assertEquals(AuditForward.MAX_LINES_PER_SECOND, first.size(), "exactly the bound in one second");
            assertTrue(first.stream().allMatch(l -> l.startsWith(AuditForward.PREFIX) && AuditForward.denial(l)),
                    "the denials win the budget: " + first);
            forward.record(line(999, "deny"));
            forward.flush(false);
            assertEquals(1, sent.size(), "the second is used up: nothing more goes in it");
        }
        // The last flush says what was held back (the allows and the one over the bound), whatever the budget.
        List<String> last = sent.getLast();
        assertTrue(last.getFirst().startsWith("[openshell] " + (over + 1) + " decisions were not forwarded"), last.toString());
    }

    @Test
    void atTheQueueBoundAFurtherLineIsCountedAsHeldBack() {
        List<List<String>> sent = new CopyOnWriteArrayList<>();
        int over = 5;
        try (AuditForward forward = new AuditForward(() -> 0L, false)) {
            // No session yet: the queue fills to its bound, and what comes beyond it is only counted.
            IntStream.range(0, AuditForward.MAX_QUEUED + over).forEach(i -> forward.record(line(i, "allow")));
            forward.attach(sent::add);
            forward.flush(false);
            assertEquals(AuditForward.MAX_LINES_PER_SECOND, sent.getFirst().size());
            assertEquals(AuditForward.PREFIX + line(0, "allow"), sent.getFirst().getFirst(), "the oldest go first");
        }
        assertEquals("[openshell] " + (AuditForward.MAX_QUEUED + over - AuditForward.MAX_LINES_PER_SECOND)
                + " decisions were not forwarded", sent.getLast().getFirst().substring(0, sent.getLast().getFirst()
                .indexOf(" to the gateway")));
    }

    @Test
    void selectKeepsOrderWithinTheBudget() {
        List<String> lines = new ArrayList<>(List.of(line(1, "allow"), line(2, "deny"), line(3, "allow"), line(4, "deny")));
        // Both denials, then the earliest allow, in the order they were made.
        assertEquals(List.of(line(1, "allow"), line(2, "deny"), line(4, "deny")), AuditForward.select(lines, 3));
        assertEquals(List.of(line(2, "deny"), line(4, "deny")), AuditForward.select(lines, 2));
        assertEquals(lines, AuditForward.select(lines, 4));
        assertEquals(List.of(), AuditForward.select(lines, 0));
    }

    @Test
    void aValueThatQuotesTheDecisionFieldIsNoDenial() {
        // The writer escapes quotes inside values: text cannot fake the field.
        String allow = "{\"decision\":\"allow\",\"reason\":\"the path \\\"decision\\\":\\\"deny\\\" is fine\"}";
        assertTrue(!AuditForward.denial(allow));
    }

    @Test
    void anAgentLineThatImitatesTheSupervisorIsMarkedAsTheAgentsStdout() {
        assertEquals("[stdout] " + AuditForward.PREFIX + "{\"decision\":\"deny\"}",
                AgentLog.line("", AuditForward.PREFIX + "{\"decision\":\"deny\"}"));
        assertEquals("[stdout] [openshell] the agent ended: exit 0", AgentLog.line("", "[openshell] the agent ended: exit 0"));
        assertEquals("[stdout] [stderr] x", AgentLog.line("", "[stderr] x"));
        assertEquals("[stdout] [stdout] x", AgentLog.line("", "[stdout] x"));
        assertEquals("hello [decision] ", AgentLog.line("", "hello [decision] "));
        assertEquals("[stderr] [decision] x", AgentLog.line(AgentLog.STDERR, "[decision] x"), "stderr is marked already");
    }
}
