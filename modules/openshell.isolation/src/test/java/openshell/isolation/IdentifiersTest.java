package openshell.isolation;

import static openshell.isolation.Rejections.invalid;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.junit.jupiter.api.Test;

/** Sandbox ids, session ids and workload identities: names that end up in paths, DNS and tokens. */
class IdentifiersTest {
    @Test
    void sessionIdsAreFreshAndWellFormed() {
        Set<String> seen = new HashSet<>();
        for (int i = 0; i < 2000; i++) {
            String value = SandboxSessionId.fresh().value();
            assertTrue(value.matches("[a-h][a-z2-7]{25}"), value + ": 26 base32 characters with the top two bits zero");
            assertTrue(seen.add(value), "a fresh session id repeated: " + value);
        }
    }

    @Test
    void everyDigitButTheFirstCarriesFiveRandomBits() {
        // 128 random bits: the first digit holds 3 of them (a..h), each of the other 25 holds 5.
        List<Set<Character>> values = new ArrayList<>();
        for (int i = 0; i < SandboxSessionId.LENGTH; i++) {
            values.add(new HashSet<>());
        }
        for (int n = 0; n < 2000; n++) {
            String value = SandboxSessionId.fresh().value();
            for (int i = 0; i < value.length(); i++) {
                values.get(i).add(value.charAt(i));
            }
        }
        assertEquals(Set.of('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'), values.getFirst());
        for (int i = 1; i < SandboxSessionId.LENGTH; i++) {
            assertEquals(32, values.get(i).size(), "digit " + i + " takes only " + values.get(i));
        }
    }

    @Test
    void sessionIdFormatIsExact() {
        String valid = "abcdefghijklmnopqrstuvwxyz".substring(0, 20) + "234567";
        assertEquals(SandboxSessionId.LENGTH, new SandboxSessionId(valid).value().length());
        assertEquals(valid, new SandboxSessionId(valid).toString());
        invalid(() -> new SandboxSessionId(valid.substring(1)));
        invalid(() -> new SandboxSessionId(valid + "a"));
        invalid(() -> new SandboxSessionId(valid.toUpperCase(java.util.Locale.ROOT)));
        for (char c : List.of('0', '1', '8', '9', '-', '=')) {
            invalid(() -> new SandboxSessionId(c + valid.substring(1)));
        }
        invalid(() -> new SandboxSessionId(""));
        invalid(() -> new SandboxSessionId(null));
    }

    @Test
    void sandboxIdIsOneDnsLabel() {
        String longest = "a".repeat(SandboxId.MAX_LENGTH);
        assertEquals(longest, new SandboxId(longest).value());
        invalid(() -> new SandboxId(longest + "a"));
        assertEquals("a-1", new SandboxId("a-1").toString());
        assertEquals("7", new SandboxId("7").value());
        for (String bad : List.of("", "-a", "a-", "A", "a_b", "a.b", "a b")) {
            invalid(() -> new SandboxId(bad));
        }
        invalid(() -> new SandboxId(null));
    }

    @Test
    void workloadIdentityIsNeverRoot() {
        WorkloadIdentity id = new WorkloadIdentity(1000, 1000, List.of(5, 6));
        assertEquals(List.of(5, 6), id.groups());
        invalid(() -> WorkloadIdentity.of(0, 1000));
        invalid(() -> WorkloadIdentity.of(1000, 0));
        invalid(() -> WorkloadIdentity.of(-1, 1000));
        invalid(() -> new WorkloadIdentity(1000, 1000, List.of(0)));
        invalid(() -> new WorkloadIdentity(1000, 1000, List.of(-5)));
        List<Integer> withNull = new ArrayList<>();
        withNull.add(null);
        invalid(() -> new WorkloadIdentity(1000, 1000, withNull));
        invalid(() -> new WorkloadIdentity(1000, 1000, null));
    }

    @Test
    void workloadGroupsAreBoundedAndCopied() {
        List<Integer> groups = new ArrayList<>();
        for (int g = 1; g <= WorkloadIdentity.MAX_GROUPS; g++) {
            groups.add(g);
        }
        WorkloadIdentity atBound = new WorkloadIdentity(1, 1, groups);
        assertEquals(WorkloadIdentity.MAX_GROUPS, atBound.groups().size());
        groups.add(WorkloadIdentity.MAX_GROUPS + 1);
        invalid(() -> new WorkloadIdentity(1, 1, groups));
        assertEquals(WorkloadIdentity.MAX_GROUPS, atBound.groups().size(), "the identity must keep its own copy");
    }

    @Test
    void contextRejectsMissingParts() {
        SandboxId sandbox = new SandboxId("s");
        SandboxSessionId session = SandboxSessionId.fresh();
        PolicySnapshot policy = PolicySnapshot.of(1, new byte[0]);
        AgentSpec agent = AgentSpec.of(List.of("/bin/agent"));
        WorkloadIdentity workload = WorkloadIdentity.of(1000, 1000);
        SandboxContext context = new SandboxContext(sandbox, session, policy, agent, workload);
        assertEquals(session, context.sessionId());
        invalid(() -> new SandboxContext(null, session, policy, agent, workload));
        invalid(() -> new SandboxContext(sandbox, null, policy, agent, workload));
        invalid(() -> new SandboxContext(sandbox, session, null, agent, workload));
        invalid(() -> new SandboxContext(sandbox, session, policy, null, workload));
        invalid(() -> new SandboxContext(sandbox, session, policy, agent, null));
        assertNotEquals(context, new SandboxContext(sandbox, SandboxSessionId.fresh(), policy, agent, workload));
    }
}
