package openshell.policy;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.Executable;
import openshell.isolation.IdentityResolution;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Random and mutated inputs to the YAML loader and the request-path normalizer: each gives a
 * result or this module's error, never another exception, and each finishes within
 * {@link #PER_INPUT_SECONDS} (run on a worker thread so a hang fails the test instead of the build).
 */
class PolicyFuzzTest {
    private static final long SEED = 0xF0221L;
    private static final int YAML_INPUTS = 4_000;
    private static final int PATH_INPUTS = 50_000;
    /** Generous for a loaded 2-core machine; a normal input takes well under a millisecond. */
    private static final long PER_INPUT_SECONDS = 10;

    private static ExecutorService worker;

    @BeforeAll
    static void start() {
        worker = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "policy-fuzz");
            t.setDaemon(true);
            return t;
        });
    }

    @AfterAll
    static void stop() {
        worker.shutdownNow();
    }

    private static <T> T bounded(String what, Callable<T> call) {
        Future<T> f = worker.submit(call);
        try {
            return f.get(PER_INPUT_SECONDS, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            return fail("no answer within " + PER_INPUT_SECONDS + " s for " + what);
        } catch (ExecutionException e) {
            throw new AssertionError("crashed on " + what, e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    private static final String[] SEEDS = {
        PolicyGenerationTest.FULL,
        """
        version: 1
        network_policies:
          a:
            endpoints:
              - host: "*.example.com"
                ports: [80, 443]
                protocol: rest
                rules:
                  - {method: GET, path: "/v1/**"}
                deny_rules:
                  - {method: "*", path: /v1/admin/*}
              - {host: 10.0.0.1, port: 22, protocol: tcp}
            binaries:
              - path: /usr/bin/*
              - ancestor: /usr/bin/node
                sha256: 0000000000000000000000000000000000000000000000000000000000000000
          b:
            endpoints: &e [{host: x.org, port: 1, protocol: tcp}]
            binaries: &b [{path: /bin/sh}]
          c:
            endpoints: *e
            binaries: *b
        """,
    };

    private static final String[] YAML_BITS = {":", ": ", "-", "- ", "[", "]", "{", "}", ",", "&a ", "*a", "!", "!!str ",
        "!!binary ", "|", ">", "'", "\"", "#", "%YAML 1.1\n", "---\n", "...\n", "?", "<<: ", "\t", "\n", "  ", "@", "`",
        "\\", "\u0000", "\u00e9", "\ufeff", "~", "null", "0x1F", "1e9", "yes", ".inf", "2001-01-01", "*", "**", "..", "%2F"};

    private static byte[] mutate(Random r, byte[] in) {
        byte[] b = in;
        int rounds = 1 + r.nextInt(4);
        for (int k = 0; k < rounds && b.length > 0; k++) {
            int at = r.nextInt(b.length);
            switch (r.nextInt(7)) {
                case 0 -> {
                    b = b.clone();
                    b[at] = (byte) r.nextInt(256);
                }
                case 1 -> {
                    int len = Math.min(b.length - at, 1 + r.nextInt(20));
                    byte[] out = new byte[b.length - len];
                    System.arraycopy(b, 0, out, 0, at);
                    System.arraycopy(b, at + len, out, at, b.length - at - len);
                    b = out;
                }
                case 2, 3 -> b = insert(b, at, YAML_BITS[r.nextInt(YAML_BITS.length)].getBytes(StandardCharsets.UTF_8));
                case 4 -> {
                    int len = Math.min(b.length - at, 1 + r.nextInt(80));
                    byte[] piece = new byte[len];
                    System.arraycopy(b, at, piece, 0, len);
                    b = insert(b, r.nextInt(b.length), piece);
                }
                case 5 -> {
                    byte[] out = new byte[at];
                    System.arraycopy(b, 0, out, 0, at);
                    b = out;
                }
                default -> {
                    byte[] junk = new byte[1 + r.nextInt(8)];
                    r.nextBytes(junk);
                    b = insert(b, at, junk);
                }
            }
        }
        return b;
    }

    private static byte[] insert(byte[] b, int at, byte[] piece) {
        byte[] out = new byte[b.length + piece.length];
        System.arraycopy(b, 0, out, 0, at);
        System.arraycopy(piece, 0, out, at, piece.length);
        System.arraycopy(b, at, out, at + piece.length, b.length - at);
        return out;
    }

    @Test
    void yamlLoaderGivesAPolicyOrProblemsNeverACrashOrAHang() {
        Random r = new Random(SEED);
        IdentityResolution who = new IdentityResolution.Resolved(BinaryIdentity.of(Executable.of("/usr/bin/curl")));
        Destination where = Destination.of("a.example.com", InetAddress.ofLiteral("93.184.216.34"), 443);
        int valid = 0;
        int rejected = 0;
        for (int i = 0; i < YAML_INPUTS; i++) {
            byte[] input;
            if (i % 10 == 0) {
                input = new byte[r.nextInt(200)];
                r.nextBytes(input);
            } else {
                input = mutate(r, SEEDS[r.nextInt(SEEDS.length)].getBytes(StandardCharsets.UTF_8));
            }
            byte[] doc = input;
            String what = "seed " + SEED + " input " + i + " (hex " + HexFormat.of().formatHex(doc) + ")";
            Boolean ok = bounded(what, () -> {
                try {
                    Policy p = Policy.parse(doc);
                    PolicyGeneration g = PolicyGeneration.first(p);
                    g.decideConnection(who, where);
                    g.decideRequest(who, where, "GET", "/v1/x");
                    g.decideName(who, "a.example.com");
                    return true;
                } catch (PolicyException e) {
                    if (e.problems().isEmpty()) {
                        throw new AssertionError("a rejection without problems");
                    }
                    return false;
                }
            });
            if (ok) {
                valid++;
            } else {
                rejected++;
            }
        }
        assertTrue(valid > 50 && rejected > 1000, "mutations must reach both outcomes: " + valid + " valid, " + rejected + " rejected");
    }

    @Test
    void normalizerGivesAPathOrARefusalNeverACrashOrAHang() {
        Random r = new Random(SEED + 1);
        String alphabet = "/./../%2e%2E%2f%2F%5c%00%ff%zz%;?#\\ aZ09-._~*:@!$&'()+,=\u00e9\u0663\ud800\t\n";
        List<String> batch = new ArrayList<>();
        for (int i = 0; i < PATH_INPUTS; i++) {
            StringBuilder s = new StringBuilder();
            if (r.nextInt(10) > 0) {
                s.append('/');
            }
            int n = r.nextInt(40);
            for (int k = 0; k < n; k++) {
                s.append(r.nextInt(20) == 0 ? (char) r.nextInt(0x10000) : alphabet.charAt(r.nextInt(alphabet.length())));
            }
            batch.add(s.toString());
        }
        batch.add("/" + "../".repeat(5000));
        batch.add("/" + "a/".repeat(4000));
        batch.add("/" + "%2e".repeat(2700));
        for (int start = 0; start < batch.size(); start += 1000) {
            List<String> slice = batch.subList(start, Math.min(batch.size(), start + 1000));
            bounded("seed " + SEED + " paths " + start + ".." + (start + slice.size()), () -> {
                for (String t : slice) {
                    try {
                        String once = RequestPaths.normalize(t);
                        if (!once.startsWith("/")) {
                            throw new AssertionError("'" + t + "' -> '" + once + "'");
                        }
                    } catch (RequestPaths.Refused e) {
                        if (e.getMessage() == null || e.getMessage().isBlank()) {
                            throw new AssertionError("a refusal without a reason for '" + t + "'");
                        }
                    }
                    List<String> problems = new ArrayList<>();
                    RequestPaths.parsePattern(t, problems);
                }
                return null;
            });
        }
    }
}
