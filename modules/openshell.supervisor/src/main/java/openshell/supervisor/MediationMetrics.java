package openshell.supervisor;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * The supervisor's counters, rendered in the Prometheus text format for {@code /metrics}:
 * decisions by kind and outcome, active relays, DNS queries by outcome, relayed bytes by
 * direction, and a histogram of decision latency. Label values come from fixed enums, never from
 * the workload, so the series count is bounded.
 */
final class MediationMetrics {
    /** Upper bounds (seconds) of the decision-latency histogram buckets; +Inf is implied. */
    static final double[] LATENCY_BUCKETS = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1};

    private final Map<String, LongAdder> decisions = new ConcurrentHashMap<>();
    private final Map<String, LongAdder> dns = new ConcurrentHashMap<>();
    private final AtomicLong activeRelays = new AtomicLong();
    private final LongAdder bytesOut = new LongAdder();
    private final LongAdder bytesIn = new LongAdder();
    private final LongAdder[] latency = new LongAdder[LATENCY_BUCKETS.length + 1];
    private final LongAdder latencyCount = new LongAdder();
    private final LongAdder latencyNanos = new LongAdder();
    private final LongAdder laneAnnouncements = new LongAdder();
    private final LongAdder laneQueries = new LongAdder();

    MediationMetrics() {
        for (int i = 0; i < latency.length; i++) {
            latency[i] = new LongAdder();
        }
    }

    /** A connect announced on the descriptor lane. */
    void laneAnnouncement() {
        laneAnnouncements.increment();
    }

    /** A DNS query asked on the descriptor lane. */
    void laneQuery() {
        laneQueries.increment();
    }

    /** @return connects announced and DNS queries asked on the descriptor lane so far */
    long[] laneFrames() {
        return new long[] {laneAnnouncements.sum(), laneQueries.sum()};
    }

    /** @param kind connect, request or dns; @param outcome allow, deny or a supervisor outcome */
    void decision(String kind, String outcome, long nanos) {
        decisions.computeIfAbsent(kind + "\u0000" + outcome, k -> new LongAdder()).increment();
        double seconds = nanos / 1e9;
        int i = 0;
        while (i < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[i]) {
            i++;
        }
        latency[i].increment();
        latencyCount.increment();
        latencyNanos.add(nanos);
    }

    void dnsQuery(String outcome) {
        dns.computeIfAbsent(outcome, k -> new LongAdder()).increment();
    }

    void relayOpened() {
        activeRelays.incrementAndGet();
    }

    void relayClosed() {
        activeRelays.decrementAndGet();
    }

    long activeRelays() {
        return activeRelays.get();
    }

    /** Bytes from the workload to upstream. */
    void bytesOut(long n) {
        bytesOut.add(n);
    }

    /** Bytes from upstream to the workload. */
    void bytesIn(long n) {
        bytesIn.add(n);
    }

    long decisions(String kind, String outcome) {
        LongAdder a = decisions.get(kind + "\u0000" + outcome);
        return a == null ? 0 : a.sum();
    }

    String prometheus() {
        StringBuilder s = new StringBuilder(2048);
        s.append("# HELP openshell_decisions_total Mediation decisions by kind and outcome.\n");
        s.append("# TYPE openshell_decisions_total counter\n");
        decisions.entrySet().stream().sorted(Map.Entry.comparingByKey()).forEach(e -> {
            String[] k = e.getKey().split("\u0000", 2);
            s.append("openshell_decisions_total{kind=\"").append(k[0]).append("\",outcome=\"").append(k[1])
                    .append("\"} ").append(e.getValue().sum()).append('\n');
        });
        s.append("# HELP openshell_active_relays Relays currently open.\n# TYPE openshell_active_relays gauge\n");
        s.append("openshell_active_relays ").append(activeRelays.get()).append('\n');
        s.append("# HELP openshell_dns_queries_total DNS queries by outcome.\n# TYPE openshell_dns_queries_total counter\n");
        dns.entrySet().stream().sorted(Map.Entry.comparingByKey()).forEach(e ->
                s.append("openshell_dns_queries_total{outcome=\"").append(e.getKey()).append("\"} ")
                        .append(e.getValue().sum()).append('\n'));
        s.append("# HELP openshell_lane_messages_total Connects and DNS queries that came on the descriptor lane.\n");
        s.append("# TYPE openshell_lane_messages_total counter\n");
        s.append("openshell_lane_messages_total{kind=\"connect\"} ").append(laneAnnouncements.sum()).append('\n');
        s.append("openshell_lane_messages_total{kind=\"dns\"} ").append(laneQueries.sum()).append('\n');
        s.append("# HELP openshell_relayed_bytes_total Bytes relayed by direction.\n# TYPE openshell_relayed_bytes_total counter\n");
        s.append("openshell_relayed_bytes_total{direction=\"out\"} ").append(bytesOut.sum()).append('\n');
        s.append("openshell_relayed_bytes_total{direction=\"in\"} ").append(bytesIn.sum()).append('\n');
        s.append("# HELP openshell_decision_seconds Time to decide a connection, request or DNS query.\n");
        s.append("# TYPE openshell_decision_seconds histogram\n");
        long cumulative = 0;
        for (int i = 0; i < LATENCY_BUCKETS.length; i++) {
            cumulative += latency[i].sum();
            s.append("openshell_decision_seconds_bucket{le=\"")
                    .append(java.math.BigDecimal.valueOf(LATENCY_BUCKETS[i]).stripTrailingZeros().toPlainString()).append("\"} ")
                    .append(cumulative).append('\n');
        }
        cumulative += latency[LATENCY_BUCKETS.length].sum();
        s.append("openshell_decision_seconds_bucket{le=\"+Inf\"} ").append(cumulative).append('\n');
        s.append("openshell_decision_seconds_sum ").append(latencyNanos.sum() / 1e9).append('\n');
        s.append("openshell_decision_seconds_count ").append(latencyCount.sum()).append('\n');
        return s.toString();
    }
}
