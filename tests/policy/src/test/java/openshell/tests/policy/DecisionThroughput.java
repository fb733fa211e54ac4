package openshell.tests.policy;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.Executable;
import openshell.isolation.IdentityResolution;
import openshell.policy.Decision;
import openshell.policy.Destination;
import openshell.policy.Policy;
import openshell.policy.PolicyGeneration;

/**
 * Decisions per second on one thread against a policy of {@link #ENDPOINTS} endpoints (exact and
 * wildcard hosts, rest and tcp, exact, glob and ancestor binaries), for three mixes: connections,
 * HTTP requests and DNS names. A harness, not a timed test: it reports numbers and writes them as
 * JSON; the target (1,000,000 decisions/s on one core) is judged by whoever reads them.
 */
final class DecisionThroughput {
    static final int ENDPOINTS = 1000;
    static final int BLOCKS = 4;
    private static final int QUERIES = 4096;

    record Query(IdentityResolution who, Destination where, String method, String path, String name, boolean expectAllowed) {
    }

    /**
     * @param seconds    wall-clock seconds measured
     * @param cpuSeconds CPU seconds this thread used meanwhile: on a shared machine the honest
     *                   denominator for "decisions per second on one core"
     */
    record Result(String mix, long decisions, double seconds, double cpuSeconds, long allowed) {
        double perSecond() {
            return decisions / seconds;
        }

        double perCpuSecond() {
            return decisions / cpuSeconds;
        }
    }

    static Policy policy() {
        StringBuilder y = new StringBuilder("version: 1\nnetwork_policies:\n");
        int per = ENDPOINTS / BLOCKS;
        for (int b = 0; b < BLOCKS; b++) {
            y.append("  block").append(b).append(":\n    endpoints:\n");
            for (int i = 0; i < per; i++) {
                String host = i % 5 == 4 ? "\"*.w" + i + ".b" + b + ".example.net\"" : "svc" + i + ".b" + b + ".example.com";
                if (i % 2 == 0) {
                    y.append("      - {host: ").append(host).append(", port: 443, protocol: rest, rules: [")
                            .append("{method: GET, path: /v1/**}, {method: POST, path: /v1/items/*}, ")
                            .append("{method: PUT, path: /v1/items/*/tags}, {method: GET, path: /health}], ")
                            .append("deny_rules: [{method: \"*\", path: /v1/admin/**}, {method: DELETE, path: /**}]}\n");
                } else {
                    y.append("      - {host: ").append(host).append(", ports: [5432, 6379], protocol: tcp}\n");
                }
            }
            y.append("    binaries:\n");
            for (int k = 0; k < 5; k++) {
                y.append("      - path: /usr/bin/tool").append(b).append('_').append(k).append('\n');
            }
            y.append("      - path: /opt/b").append(b).append("/bin/*\n");
            y.append("      - ancestor: /usr/bin/agent").append(b).append('\n');
        }
        return Policy.parse(y.toString());
    }

    static List<Query> queries(String mix, long seed) {
        Random r = new Random(seed);
        InetAddress publicAddress = InetAddress.ofLiteral("93.184.216.34");
        List<Query> out = new ArrayList<>(QUERIES);
        int per = ENDPOINTS / BLOCKS;
        for (int q = 0; q < QUERIES; q++) {
            int b = r.nextInt(BLOCKS);
            int i = r.nextInt(per);
            boolean wildcard = i % 5 == 4;
            String host = wildcard ? "x" + r.nextInt(100) + ".w" + i + ".b" + b + ".example.net" : "svc" + i + ".b" + b + ".example.com";
            int kind = r.nextInt(10);
            boolean rightBinary = kind != 0;
            boolean knownHost = kind != 1;
            String bin = switch (r.nextInt(3)) {
                case 0 -> "/usr/bin/tool" + b + "_" + r.nextInt(5);
                case 1 -> "/opt/b" + b + "/bin/t" + r.nextInt(9);
                default -> "/bin/sh";
            };
            List<Executable> ancestors = bin.equals("/bin/sh") ? List.of(Executable.of("/usr/bin/bash"), Executable.of("/usr/bin/agent" + b)) : List.of();
            if (!rightBinary) {
                bin = "/usr/bin/nc";
                ancestors = List.of();
            }
            if (!knownHost) {
                host = "unknown" + r.nextInt(1000) + ".example.org";
            }
            IdentityResolution who = new IdentityResolution.Resolved(new BinaryIdentity(Executable.of(bin), ancestors, List.of()));
            boolean rest = i % 2 == 0;
            int port = rest ? 443 : (r.nextBoolean() ? 5432 : 6379);
            Destination where = Destination.of(host, publicAddress, port);
            switch (mix) {
                case "connection" -> out.add(new Query(who, where, null, null, null, rightBinary && knownHost));
                case "dns" -> out.add(new Query(who, null, null, null, host.toUpperCase(Locale.ROOT), rightBinary && knownHost));
                case "request" -> {
                    String[][] requests = {{"GET", "/v1/repos/a/b"}, {"HEAD", "/v1/x"}, {"POST", "/v1/items/42"},
                        {"PUT", "/v1/items/42/tags"}, {"GET", "/v1/admin/users"}, {"DELETE", "/v1/items/1"},
                        {"GET", "//v1/./items/../items/7?x=1"}, {"GET", "/private"}};
                    String[] req = requests[r.nextInt(requests.length)];
                    boolean ruleAllows = !req[1].contains("admin") && !req[0].equals("DELETE") && !req[1].equals("/private");
                    out.add(new Query(who, Destination.of(host, publicAddress, 443), req[0], req[1], null,
                            rest && ruleAllows && rightBinary && knownHost));
                }
                default -> throw new IllegalArgumentException(mix);
            }
        }
        return out;
    }

    private static Decision decide(PolicyGeneration g, Query q) {
        if (q.name() != null) {
            return g.decideName(q.who(), q.name());
        }
        if (q.method() != null) {
            return g.decideRequest(q.who(), q.where(), q.method(), q.path());
        }
        return g.decideConnection(q.who(), q.where());
    }

    /** Checks every query's outcome once: a fast wrong engine is worth nothing. */
    static void verify(PolicyGeneration g, List<Query> queries) {
        for (Query q : queries) {
            Decision d = decide(g, q);
            if (d.allowed() != q.expectAllowed()) {
                throw new AssertionError("unexpected " + d + " for " + q + ": " + d.reason());
            }
        }
    }

    static Result run(PolicyGeneration g, String mix, List<Query> queries, double seconds) {
        Query[] qs = queries.toArray(Query[]::new);
        long warmupEnd = System.nanoTime() + (long) (seconds * 0.3e9);
        long sink = 0;
        int i = 0;
        while (System.nanoTime() < warmupEnd) {
            for (int k = 0; k < 1024; k++) {
                sink += decide(g, qs[i++ & (QUERIES - 1)]).allowed() ? 1 : 0;
            }
        }
        java.lang.management.ThreadMXBean threads = java.lang.management.ManagementFactory.getThreadMXBean();
        long cpuStart = threads.getCurrentThreadCpuTime();
        long start = System.nanoTime();
        long end = start + (long) (seconds * 0.7e9);
        long decisions = 0;
        long allowed = 0;
        long now;
        do {
            for (int k = 0; k < 1024; k++) {
                allowed += decide(g, qs[i++ & (QUERIES - 1)]).allowed() ? 1 : 0;
            }
            decisions += 1024;
            now = System.nanoTime();
        } while (now < end);
        if (sink < 0) {
            throw new AssertionError("unreachable: keeps the warm-up from being optimized away");
        }
        long cpu = threads.getCurrentThreadCpuTime() - cpuStart;
        return new Result(mix, decisions, (now - start) / 1e9, cpu / 1e9, allowed);
    }

    static String json(List<Result> results, double seconds) {
        StringBuilder s = new StringBuilder("{\n  \"benchmark\": \"openshell.policy decisions per second, one thread\",\n")
                .append("  \"endpoints\": ").append(ENDPOINTS).append(",\n  \"secondsPerMix\": ").append(seconds)
                .append(",\n  \"java\": \"").append(System.getProperty("java.version")).append("\",\n  \"results\": [\n");
        for (int k = 0; k < results.size(); k++) {
            Result r = results.get(k);
            s.append(String.format(Locale.ROOT, "    {\"mix\": \"%s\", \"decisions\": %d, \"seconds\": %.3f, \"cpuSeconds\": %.3f, "
                    + "\"decisionsPerSecond\": %.0f, \"decisionsPerCpuSecond\": %.0f}%s%n",
                    r.mix(), r.decisions(), r.seconds(), r.cpuSeconds(), r.perSecond(), r.perCpuSecond(),
                    k + 1 < results.size() ? "," : ""));
        }
        return s.append("  ]\n}\n").toString();
    }

    static void write(Path out, String json) throws IOException {
        Files.createDirectories(out.getParent());
        Files.writeString(out, json);
    }

    private DecisionThroughput() {
    }
}
