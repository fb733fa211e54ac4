package openshell.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * A key the policy reader accepts but nothing applies is a silent lie to the operator (issue 33:
 * the static sections were validated and ignored). Every key of every {@code *_KEYS} set of
 * {@link PolicyReader} must be listed here with the test that shows its effect on the real path,
 * and that test must exist: a new key, or a new key set, fails this test until it is.
 */
class PolicyKeysTakeEffectTest {
    private static final String STATIC = "tests/e2e/src/test/java/openshell/tests/e2e/StaticPolicySectionsTest.java";
    private static final String FIELDS = "void theStaticSectionsDecideTheUserAndEveryWriteOfTheAgentAndEveryExec(";
    private static final String NAMES = "void aNamedUserIsResolvedInTheWorkloadsPasswdAndIdsThatCannotBeHonouredAreRefused(";
    private static final String LANDLOCK = "void onAKernelWithoutLandlockAHardRequirementRefusesTheCreateAndBestEffortSaysSoLoudly(";
    private static final String CASES = "tests/policy/src/test/resources/cases/";

    /** Where each key set's keys sit in a policy document. */
    private static final Map<String, String> SECTIONS = Map.of(
            "ROOT_KEYS", "",
            "FS_KEYS", "filesystem_policy.",
            "LANDLOCK_KEYS", "landlock.",
            "PROCESS_KEYS", "process.",
            "BLOCK_KEYS", "network_policies.<block>.",
            "ENDPOINT_KEYS", "network_policies.<block>.endpoints[].",
            "RULE_KEYS", "network_policies.<block>.endpoints[].rules[].",
            "BINARY_KEYS", "network_policies.<block>.binaries[].");

    /** Each accepted key: the file holding the test of its effect, and what that file must contain. */
    private static final Map<String, List<String>> EFFECTS = Map.ofEntries(
            Map.entry("version", List.of(CASES + "90-invalid.yaml", "unsupported version")),
            Map.entry("filesystem_policy", List.of(STATIC, FIELDS)),
            Map.entry("landlock", List.of(STATIC, LANDLOCK)),
            Map.entry("process", List.of(STATIC, FIELDS)),
            Map.entry("network_policies", List.of(CASES + "10-hosts.yaml", "network_policies:")),
            Map.entry("filesystem_policy.read_only", List.of(STATIC, FIELDS)),
            Map.entry("filesystem_policy.read_write", List.of(STATIC, FIELDS)),
            Map.entry("filesystem_policy.include_workdir", List.of(STATIC, FIELDS)),
            Map.entry("landlock.compatibility", List.of(STATIC, LANDLOCK)),
            Map.entry("process.run_as_user", List.of(STATIC, NAMES)),
            Map.entry("process.run_as_group", List.of(STATIC, FIELDS)),
            Map.entry("network_policies.<block>.endpoints", List.of(CASES + "10-hosts.yaml", "endpoints:")),
            Map.entry("network_policies.<block>.binaries", List.of(CASES + "20-binaries.yaml", "binaries:")),
            Map.entry("network_policies.<block>.endpoints[].host", List.of(CASES + "10-hosts.yaml", "host:")),
            Map.entry("network_policies.<block>.endpoints[].port", List.of(CASES + "10-hosts.yaml", "port:")),
            Map.entry("network_policies.<block>.endpoints[].ports", List.of(CASES + "10-hosts.yaml", "ports:")),
            Map.entry("network_policies.<block>.endpoints[].protocol", List.of(CASES + "30-l7.yaml", "protocol: rest")),
            Map.entry("network_policies.<block>.endpoints[].access", List.of(CASES + "30-l7.yaml", "access:")),
            Map.entry("network_policies.<block>.endpoints[].rules", List.of(CASES + "30-l7.yaml", "rules:")),
            Map.entry("network_policies.<block>.endpoints[].deny_rules", List.of(CASES + "40-deny-wins.yaml", "deny_rules:")),
            Map.entry("network_policies.<block>.endpoints[].enforcement", List.of(
                    "modules/openshell.supervisor/src/test/java/openshell/supervisor/AuditEnforcementTest.java",
                    "void anAuditedEndpointForwardsWhatItWouldDenyAndTheAuditLineSaysSo(")),
            Map.entry("network_policies.<block>.endpoints[].rules[].query", List.of(CASES + "130-upstream-requests.yaml",
                    "query: {v: ")),
            Map.entry("network_policies.<block>.endpoints[].rules[].method", List.of(CASES + "30-l7.yaml", "method:")),
            Map.entry("network_policies.<block>.endpoints[].rules[].path", List.of(CASES + "30-l7.yaml", "path:")),
            Map.entry("network_policies.<block>.binaries[].path", List.of(CASES + "20-binaries.yaml", "path:")),
            Map.entry("network_policies.<block>.binaries[].ancestor", List.of(CASES + "20-binaries.yaml", "ancestor:")),
            Map.entry("network_policies.<block>.binaries[].sha256", List.of(CASES + "20-binaries.yaml", "sha256:")),
            // Display names reach every decision's reason, and so the audit line and policy explain.
            Map.entry("network_policies.<block>.name", List.of(CASES + "110-upstream-blocks.yaml",
                    "reason: \"Display Name / the endpoint\"")),
            Map.entry("network_policies.<block>.endpoints[].name", List.of(CASES + "110-upstream-blocks.yaml",
                    "reason: \"Display Name / the endpoint\"")));

    /**
     * Keys accepted by work still in progress elsewhere, with the issue that owes the test of their
     * effect. Visible on purpose: each is a debt, and a key listed here and in {@link #EFFECTS} fails.
     */
    private static final Map<String, String> AWAITING_EFFECT_TEST = Map.of();

    @Test
    void everyKeyThePolicyReaderAcceptsIsListedWithTheTestThatShowsItsEffect() throws Exception {
        Set<String> accepted = new TreeSet<>();
        for (Field f : PolicyReader.class.getDeclaredFields()) {
            if (!Modifier.isStatic(f.getModifiers()) || !f.getName().endsWith("_KEYS")) {
                continue;
            }
            String section = SECTIONS.get(f.getName());
            if (section == null) {
                fail("PolicyReader has a new key set " + f.getName() + ": add where it sits to SECTIONS and each of its"
                        + " keys to EFFECTS with the test that shows the key's effect");
            }
            f.setAccessible(true);
            for (Object key : (Set<?>) f.get(null)) {
                accepted.add(section + key);
            }
        }
        List<String> unlisted = accepted.stream().filter(k -> !EFFECTS.containsKey(k) && !AWAITING_EFFECT_TEST.containsKey(k))
                .toList();
        assertEquals(List.of(), unlisted, "keys PolicyReader accepts with no test showing their effect: a key that"
                + " nothing applies must not be accepted");
        Set<String> listed = new TreeSet<>(EFFECTS.keySet());
        listed.addAll(AWAITING_EFFECT_TEST.keySet());
        assertEquals(accepted, listed, "EFFECTS or AWAITING_EFFECT_TEST list keys the reader no longer accepts");
        List<String> both = AWAITING_EFFECT_TEST.keySet().stream().filter(EFFECTS::containsKey).toList();
        assertEquals(List.of(), both, "a key with its effect test must leave AWAITING_EFFECT_TEST");

        Path root = repositoryRoot();
        Map<String, String> missing = new TreeMap<>();
        for (Map.Entry<String, List<String>> e : EFFECTS.entrySet()) {
            Path file = root.resolve(e.getValue().get(0));
            if (!Files.isRegularFile(file) || !Files.readString(file).contains(e.getValue().get(1))) {
                missing.put(e.getKey(), e.getValue().toString());
            }
        }
        assertEquals(Map.of(), missing, "the test named for each key must exist");
    }

    @Test
    void theGuardSeesEveryKeySetItIsAbout() throws Exception {
        List<String> sets = new ArrayList<>();
        for (Field f : PolicyReader.class.getDeclaredFields()) {
            if (Modifier.isStatic(f.getModifiers()) && f.getName().endsWith("_KEYS")) {
                sets.add(f.getName());
            }
        }
        // The static sections this guard was written for (issue 33) are among what it reads.
        assertTrue(sets.containsAll(List.of("ROOT_KEYS", "FS_KEYS", "LANDLOCK_KEYS", "PROCESS_KEYS")), sets.toString());
    }

    private static Path repositoryRoot() throws IOException {
        Path dir = Path.of("").toAbsolutePath();
        while (dir != null && !Files.isRegularFile(dir.resolve("mvnw"))) {
            dir = dir.getParent();
        }
        if (dir == null) {
            throw new IOException("not inside the repository: " + Path.of("").toAbsolutePath());
        }
        return dir;
    }
}
