package openshell.perf.sandbox;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The soak's accounting: the tallies of every sandbox's {@code osperf rate} run summed, and the
 * line drawn between a machine too slow for the pace (reported, a budget miss) and a wrong answer
 * (a violation). The soak is bounded by time, so a slow machine shows up as fewer connects, slow
 * failures and aborted ones, never as a run that does not end.
 *
 * <p>What counts as a violation:
 * <ul>
 *   <li>a denied connect that connected;</li>
 *   <li>a denied connect that failed with an errno that is neither EACCES/EPERM nor a timeout;</li>
 *   <li>no denied connect refused with EACCES at all (the denial check did not run);</li>
 *   <li>an allowed connect that failed for a reason other than slowness (not ETIMEDOUT, EAGAIN or
 *       EINPROGRESS: osperf's {@code slow_errno});</li>
 *   <li>an agent that did not report (cut off, or its output unreadable).</li>
 * </ul>
 * Reported, not a violation: an achieved rate below the target, allowed or denied connects that
 * timed out, connects still in flight when osperf's drain ended (aborted).
 */
final class SoakTally {
    private final List<Agent> agents = new ArrayList<>();
    private final List<Long> samples = new ArrayList<>();
    private final Map<String, String> cutOff = new LinkedHashMap<>();

    /**
     * One sandbox's {@code rate} line.
     *
     * @param sandbox the sandbox whose agent wrote it
     */
    record Agent(String sandbox, double targetPerSecond, long seconds, long attempted, long ok, long failedSlow,
                 long failedOther, String firstError, long deniedConnected, long deniedRefused, long deniedSlow,
                 long deniedOther, String firstDeniedError, long aborted, long elapsedNanos) {

        /**
         * Reads an agent's "rate" and "result" lines; a missing or mistyped field (an agent cut
         * off, an older osperf) is an error naming the sandbox.
         */
        static Agent of(String sandbox, Map<String, Object> rateLine) throws IOException {
            if (!(rateLine.get("rate") instanceof Map<?, ?> rate)) {
                throw new IOException("soak agent " + sandbox + ": no \"rate\" object in its rate line: " + rateLine);
            }
            return new Agent(sandbox, number(sandbox, rate, "target_per_s").doubleValue(), whole(sandbox, rate, "seconds"),
                    whole(sandbox, rate, "attempted"), whole(sandbox, rate, "ok"), whole(sandbox, rate, "failed_slow"),
                    whole(sandbox, rate, "failed_other"), text(sandbox, rate, "first_error"),
                    whole(sandbox, rate, "denied_connected"), whole(sandbox, rate, "denied_refused"),
                    whole(sandbox, rate, "denied_slow"), whole(sandbox, rate, "denied_other"),
                    text(sandbox, rate, "first_denied_error"), whole(sandbox, rate, "aborted"),
                    whole(sandbox, rate, "elapsed_ns"));
        }

        private static Number number(String sandbox, Map<?, ?> rate, String key) throws IOException {
            if (!(rate.get(key) instanceof Number n)) {
                throw new IOException("soak agent " + sandbox + ": rate line lacks a number \"" + key + "\" (cut off or an older osperf?): " + rate);
            }
            return n;
        }

        private static long whole(String sandbox, Map<?, ?> rate, String key) throws IOException {
            Number n = number(sandbox, rate, key);
            if (!(n instanceof Long) || n.longValue() < 0) {
                throw new IOException("soak agent " + sandbox + ": \"" + key + "\" is not a count: " + n);
            }
            return n.longValue();
        }

        private static String text(String sandbox, Map<?, ?> rate, String key) throws IOException {
            if (!(rate.get(key) instanceof String s)) {
                throw new IOException("soak agent " + sandbox + ": rate line lacks the text \"" + key + "\": " + rate);
            }
            return s;
        }
    }

    /** The timed samples of an agent's "result" line (allowed connects only). */
    static List<Long> samples(String sandbox, Map<String, Object> resultLine) throws IOException {
        if (!(resultLine.get("samples_ns") instanceof List<?> list)) {
            throw new IOException("soak agent " + sandbox + ": result line lacks \"samples_ns\"");
        }
        List<Long> out = new ArrayList<>(list.size());
        for (Object o : list) {
            if (!(o instanceof Long n)) {
                throw new IOException("soak agent " + sandbox + ": a sample is not a count of nanoseconds: " + o);
            }
            out.add(n);
        }
        return out;
    }

    void add(Agent agent, List<Long> agentSamples) {
        agents.add(agent);
        samples.addAll(agentSamples);
    }

    /** An agent that did not report: its sandbox still gets the leak check, the soak a violation. */
    void cutOff(String sandbox, String why) {
        cutOff.put(sandbox, why);
    }

    List<Agent> agents() {
        return List.copyOf(agents);
    }

    long attempted() {
        return agents.stream().mapToLong(Agent::attempted).sum();
    }

    /** Connects started per second, all reporting sandboxes together (each started them over its own window). */
    double achievedPerSecond() {
        return agents.stream().mapToDouble(a -> a.attempted() / (double) a.seconds()).sum();
    }

    /** The record's figures: achieved against {@code targetPerSecond}, counts, latency, cut-off agents. */
    Map<String, Object> json(double targetPerSecond) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("ops", attempted());
        r.put("elapsed_s", SandboxBenchmark.round3(agents.stream().mapToLong(Agent::elapsedNanos).max().orElse(0) / 1e9));
        r.put("target_ops_per_s", SandboxBenchmark.round3(targetPerSecond));
        r.put("ops_per_s", SandboxBenchmark.round3(achievedPerSecond()));
        r.put("allowed_ok", sum(Agent::ok));
        r.put("allowed_failed", sum(Agent::failedSlow) + sum(Agent::failedOther));
        r.put("allowed_failed_slow", sum(Agent::failedSlow));
        r.put("allowed_failed_other", sum(Agent::failedOther));
        r.put("allowed_first_error", first(Agent::firstError));
        r.put("denied_refused", sum(Agent::deniedRefused));
        r.put("denied_connected", sum(Agent::deniedConnected));
        r.put("denied_slow", sum(Agent::deniedSlow));
        r.put("denied_other_error", sum(Agent::deniedOther));
        r.put("denied_first_error", first(Agent::firstDeniedError));
        r.put("aborted", sum(Agent::aborted));
        r.put("agents_reported", agents.size());
        List<Map<String, Object>> cut = new ArrayList<>();
        cutOff.forEach((id, why) -> cut.add(new LinkedHashMap<>(Map.of("sandbox", id, "error", why))));
        r.put("agents_cut_off", cut);
        r.putAll(SandboxBenchmark.latency(samples, "allowed connect + 1-byte echo + close"));
        return r;
    }

    /** The wrong answers (see the class comment), each a sentence starting with "soak". */
    List<String> violations() {
        List<String> v = new ArrayList<>();
        cutOff.forEach((id, why) -> v.add("soak: the agent of " + id + " did not report: " + why));
        long connected = sum(Agent::deniedConnected);
        long other = sum(Agent::deniedOther);
        long refused = sum(Agent::deniedRefused);
        if (connected != 0 || other != 0 || (refused == 0 && !agents.isEmpty())) {
            v.add("soak: denied connections not all refused with EACCES: " + connected + " connected, " + other
                    + " other errors (first: " + first(Agent::firstDeniedError) + "), " + refused + " refused");
        }
        long failedOther = sum(Agent::failedOther);
        if (failedOther != 0) {
            v.add("soak: " + failedOther + " allowed connects failed for a reason other than a timeout (first: "
                    + first(Agent::firstError) + ")");
        }
        return v;
    }

    private long sum(java.util.function.ToLongFunction<Agent> f) {
        return agents.stream().mapToLong(f).sum();
    }

    private String first(java.util.function.Function<Agent, String> f) {
        return agents.stream().map(f).filter(s -> !s.isEmpty()).findFirst().orElse("");
    }
}
