package openshell.tests.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import openshell.policy.PolicyGeneration;
import org.junit.jupiter.api.Test;

/**
 * Runs {@link DecisionThroughput}: in {@code verify} as a smoke of about a second per mix; for the
 * real numbers, with {@code -Dopenshell.policy.bench.seconds=20} (see tests/policy/README.md). It
 * asserts that every decision in the mixes is right and that the report is written, never a speed.
 */
class DecisionThroughputTest {
    @Test
    void measuresDecisionsPerSecond() throws Exception {
        double seconds = Double.parseDouble(System.getProperty("openshell.policy.bench.seconds", "1"));
        Path out = Path.of(System.getProperty("openshell.policy.bench.out", "target/bench/policy-decisions.json"));
        PolicyGeneration g = PolicyGeneration.first(DecisionThroughput.policy());
        List<DecisionThroughput.Result> results = new ArrayList<>();
        for (String mix : List.of("connection", "request", "dns")) {
            List<DecisionThroughput.Query> queries = DecisionThroughput.queries(mix, 7);
            long expectAllowed = queries.stream().filter(DecisionThroughput.Query::expectAllowed).count();
            assertTrue(expectAllowed > 0 && expectAllowed < queries.size(), "the mix must hold allows and denies");
            DecisionThroughput.verify(g, queries);
            DecisionThroughput.Result r = DecisionThroughput.run(g, mix, queries, seconds);
            assertTrue(r.decisions() > 0);
            results.add(r);
        }
        String json = DecisionThroughput.json(results, seconds);
        DecisionThroughput.write(out, json);
        assertEquals(json, Files.readString(out));
        System.out.print(json);
    }
}
