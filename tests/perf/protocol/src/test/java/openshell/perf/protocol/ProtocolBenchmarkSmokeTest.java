package openshell.perf.protocol;

import java.util.Map;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertTrue;

/** A seconds-long smoke of the benchmark harness; the full run is the {@code bench} profile. */
class ProtocolBenchmarkSmokeTest {
    @Test
    void smallRunProducesEveryFigure() throws Exception {
        Map<String, Object> result = ProtocolBenchmark.run(4, 50);
        String json = ProtocolBenchmark.toJson(result);
        for (String figure : new String[] {"control_rtt_idle_us", "relay_upload_mib_per_s",
                "control_rtt_during_upload_us", "relay_download_mib_per_s"}) {
            assertTrue(json.contains("\"" + figure + "\""), figure + " missing in " + json);
        }
        @SuppressWarnings("unchecked")
        Map<String, Object> unix = (Map<String, Object>) result.get("unix");
        assertTrue((Double) unix.get("relay_upload_mib_per_s") > 0);
    }
}
