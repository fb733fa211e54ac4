package openshell.perf.protocol;

import java.util.Map;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A seconds-long smoke of the link-lifetime harness; the full run is the {@code bench} profile. */
class LinkLifetimeBenchmarkSmokeTest {
    @Test
    void smallRunProducesEveryFigure() throws Exception {
        Map<String, Object> result = LinkLifetimeBenchmark.run(100, 50);
        for (String kind : new String[] {"unix", "tcp"}) {
            @SuppressWarnings("unchecked")
            Map<String, Object> figures = (Map<String, Object>) result.get(kind);
            assertTrue((Double) figures.get("calls_per_s") > 0, kind + ": " + figures);
            assertTrue((Double) figures.get("streams_per_s") > 0, kind + ": " + figures);
            assertEquals(true, figures.get("link_open_after"), kind + ": " + figures);
        }
    }
}
