package openshell.supervisor;

import static openshell.supervisor.Fixture.loopback;
import static openshell.supervisor.Fixture.read;
import static openshell.supervisor.Fixture.send;
import static openshell.supervisor.Fixture.who;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.helidon.webserver.WebServer;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import openshell.isolation.IdentityResolution;
import openshell.policy.Destination;
import openshell.policy.Policy;
import openshell.policy.PolicyGeneration;
import org.junit.jupiter.api.Test;

/**
 * A property of the whole L7 path: for random methods and request targets (dot segments, encoded
 * dots and slashes, {@code ..;}, doubled slashes, query strings), the live supervisor forwards a
 * request exactly when {@code policy explain}'s question (the engine asked with the same binary,
 * host, port, method and target) allows it.
 */
class ExplainAgreementTest {
    /** Requests per run; the seed is in every failure, so a disagreement can be replayed. */
    private static final int REQUESTS = 300;
    /** Fewest of each outcome a run must see (allowed and refused): far below what any seed gives. */
    private static final int MIN_EACH_OUTCOME = 5;
    private static final String[] METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
    private static final String[] SEGMENTS = {"repos", "acme", "x", "issues", "admin", "a", "b", ".", "..", "%2e", "%2e%2e",
        "..;", "", "%2F", "Repos", "z.json"};

    private static String policy(int port) {
        return """
                version: 1
                network_policies:
                  api:
                    endpoints:
                      - host: api.test
                        port: %1$d
                        protocol: rest
                        rules:
                          - allow: {method: GET, path: "/repos/*/issues"}
                          - allow: {method: POST, path: "/repos/**"}
                          - allow: {method: PUT, path: "/a/**/b"}
                          - allow: {method: OPTIONS, path: "**"}
                          - allow: {method: GET, path: "/x/**"}
                        deny_rules:
                          - {method: POST, path: "/repos/*/admin/**"}
                    binaries:
                      - path: /usr/bin/curl
                """.formatted(port);
    }

    @Test
    void theLiveRelayForwardsExactlyWhatExplainAllows() throws Exception {
        long seed = System.nanoTime();
        Random random = new Random(seed);
        WebServer upstream = Fixture.httpUpstream();
        String yaml = policy(upstream.port());
        PolicyGeneration explain = PolicyGeneration.first(Policy.parse(yaml));
        IdentityResolution curl = who("/usr/bin/curl");
        List<String> disagreements = new ArrayList<>();
        int allowed = 0;
        try (Fixture f = Fixture.start(yaml, b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback("api.test"))))) {
            f.resolve(curl, "api.test");
            for (int i = 0; i < REQUESTS; i++) {
                String method = METHODS[random.nextInt(METHODS.length)];
                String target = target(random);
                boolean expected = explain.decideRequest(curl, Destination.unresolved("api.test", upstream.port()), method, target)
                        .allowed();
                boolean forwarded = forwarded(f, curl, upstream.port(), "api.test", method, target);
                allowed += expected ? 1 : 0;
                if (forwarded != expected) {
                    disagreements.add(method + " " + target + ": explain " + (expected ? "allows" : "denies")
                            + ", the relay " + (forwarded ? "forwarded it" : "refused it"));
                }
            }
        } finally {
            upstream.stop();
        }
        assertEquals(List.of(), disagreements, "seed " + seed + " (" + allowed + " of " + REQUESTS + " allowed by explain)");
        // Both outcomes are exercised, or the property says little. About 10 % are allowed: a floor of
        // MIN_EACH_OUTCOME is ~5 standard deviations below the mean, so no seed of a sound run trips it.
        assertTrue(allowed >= MIN_EACH_OUTCOME && allowed <= REQUESTS - MIN_EACH_OUTCOME, "seed " + seed + ": " + allowed + " allowed");
    }

    /** Sends one request on a fresh mediated connection; whether the upstream answered it (200). */
    private static boolean forwarded(Fixture f, IdentityResolution who, int port, String host, String method, String target)
            throws Exception {
        try (Socket s = f.connect(who, loopback(), port)) {
            String body = method.equals("POST") || method.equals("PUT") || method.equals("PATCH") ? "Content-Length: 0\r\n" : "";
            send(s, method + " " + target + " HTTP/1.1\r\nHost: " + host + ":" + port + "\r\n" + body + "\r\n");
            return read(new HttpInput(s.getInputStream(), 4096), method).status() == 200;
        }
    }

    private static String target(Random random) {
        StringBuilder b = new StringBuilder();
        int n = 1 + random.nextInt(5);
        for (int i = 0; i < n; i++) {
            b.append('/').append(SEGMENTS[random.nextInt(SEGMENTS.length)]);
        }
        if (random.nextInt(4) == 0) {
            b.append("?page=").append(random.nextInt(9)).append(random.nextBoolean() ? "&q=a/../b" : "");
        }
        return b.toString();
    }

    /** Names for the host property: exact, one-label {@code *}, many-label {@code **}, intra-label {@code *}, near misses. */
    private static final String[] HOSTS = {"api.test", "a.api.test", "x.svc.test", "a.b.svc.test", "svc.test", "deep.test",
        "a.deep.test", "a.b.deep.test", "eu-ai.cloud.test", "ai.cloud.test", "eu.ai.cloud.test", "other.test"};

    private static String hostPolicy(int port) {
        return """
                version: 1
                network_policies:
                  hosts:
                    endpoints:
                      - {host: api.test, port: %1$d, protocol: rest, rules: [{allow: {method: GET, path: "/x/**"}}]}
                      - {host: "*.svc.test", port: %1$d, protocol: rest, access: read-only}
                      - {host: "**.deep.test", port: %1$d, protocol: rest, rules: [{allow: {method: POST, path: "**"}}]}
                      - {host: "*-ai.cloud.test", port: %1$d, protocol: rest, access: read-write}
                    binaries:
                      - path: /usr/bin/curl
                """.formatted(port);
    }

    /**
     * The same property over random host names: the live DNS plane answers a name exactly when
     * explain's name question allows it, and a request naming a host is forwarded exactly when the
     * name was answered (so pinned) and explain allows the request for that host.
     */
    @Test
    void forRandomHostsTheLiveDnsPlaneAndRelayDecideAsExplain() throws Exception {
        long seed = System.nanoTime();
        Random random = new Random(seed);
        WebServer upstream = Fixture.httpUpstream();
        String yaml = hostPolicy(upstream.port());
        PolicyGeneration explain = PolicyGeneration.first(Policy.parse(yaml));
        IdentityResolution curl = who("/usr/bin/curl");
        List<String> disagreements = new ArrayList<>();
        int forwarded = 0;
        int answeredNames = 0;
        try (Fixture f = Fixture.start(yaml, b -> b.aliases(HostAliases.of(Fixture.aliasToLoopback(HOSTS))))) {
            java.util.Set<String> answered = new java.util.HashSet<>();
            for (int i = 0; i < REQUESTS; i++) {
                String host = HOSTS[random.nextInt(HOSTS.length)];
                byte[] response = f.resolve(curl, host);
                boolean live = (response[3] & 0x0f) == 0 && ((response[6] & 0xff) << 8 | (response[7] & 0xff)) > 0;
                boolean expected = explain.decideName(curl, host).allowed();
                if (live != expected) {
                    disagreements.add("DNS " + host + ": explain " + (expected ? "allows" : "denies") + ", the plane "
                            + (live ? "answered" : "did not answer"));
                }
                if (live) {
                    answered.add(host);
                    answeredNames++;
                }
                if (answered.isEmpty()) {
                    // Nothing pinned to the address yet: the connect itself is refused.
                    continue;
                }
                String method = METHODS[random.nextInt(METHODS.length)];
                String target = target(random);
                boolean allow = answered.contains(host) && explain.decideRequest(curl,
                        Destination.unresolved(host, upstream.port()), method, target).allowed();
                boolean sent = forwarded(f, curl, upstream.port(), host, method, target);
                forwarded += sent ? 1 : 0;
                if (sent != allow) {
                    disagreements.add(method + " " + host + target + ": explain " + (allow ? "allows" : "denies")
                            + ", the relay " + (sent ? "forwarded it" : "refused it"));
                }
            }
        } finally {
            upstream.stop();
        }
        assertEquals(List.of(), disagreements, "seed " + seed);
        assertTrue(answeredNames >= MIN_EACH_OUTCOME && answeredNames <= REQUESTS - MIN_EACH_OUTCOME, "seed " + seed + ": "
                + answeredNames + " names answered");
        assertTrue(forwarded >= MIN_EACH_OUTCOME, "seed " + seed + ": " + forwarded + " forwarded");
    }
}
