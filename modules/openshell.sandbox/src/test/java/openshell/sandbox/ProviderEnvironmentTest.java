package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import openshell.isolation.AgentSpec;
import openshell.isolation.BackendException;
import openshell.isolation.ExecSpec;
import org.junit.jupiter.api.Test;

/**
 * updateProviderEnvironment on the real runtime: later execs start with the placeholders, their
 * own variables win, a stale epoch never wins, and the bounds refuse bad updates whole.
 */
class ProviderEnvironmentTest {
    private static String run(SandboxRuntime runtime, ExecSpec spec) throws Exception {
        long process = runtime.exec(spec);
        String out = new String(runtime.session(process).stdout().readAllBytes(), StandardCharsets.UTF_8);
        runtime.session(process).stderr().readAllBytes();
        runtime.await(process, TestSandbox.WAIT);
        return out.strip();
    }

    private static ExecSpec echo(Map<String, String> env) {
        return ExecSpec.builder(List.of("/bin/sh", "-c", "echo \"${GITHUB_TOKEN-unset}\"")).environment(env).build();
    }

    @Test
    void latestEpochWinsExecsSeeItAndTheirOwnVariablesWin() throws Exception {
        try (TestSandbox sandbox = new TestSandbox()) {
            StartupProbes.Report report = StartupProbes.run(sandbox.network);
            try (SandboxRuntime runtime = new SandboxRuntime(report, sandbox.broker, ProcessTreeTest.tree(sandbox), "0".repeat(64))) {
                assertEquals(BackendException.Kind.INVALID, assertThrows(BackendException.class,
                        () -> runtime.updateProviderEnvironment(Map.of("A", "b"), 1)).kind(), "before attach");
                runtime.attach("supervisor-a", 1);
                runtime.confirm("");
                runtime.startAgent(new AgentSpec(List.of("/usr/bin/sleep", "600"), Map.of(), "/"));
                assertEquals("unset", run(runtime, echo(Map.of())));

                assertEquals(2, runtime.updateProviderEnvironment(Map.of("GITHUB_TOKEN", "openshell-credential-github"), 2));
                assertEquals("openshell-credential-github", run(runtime, echo(Map.of())));
                // A stale update arriving late changes nothing.
                assertEquals(2, runtime.updateProviderEnvironment(Map.of("GITHUB_TOKEN", "stale"), 1));
                assertEquals(2, runtime.updateProviderEnvironment(Map.of("GITHUB_TOKEN", "same-epoch"), 2));
                assertEquals("openshell-credential-github", run(runtime, echo(Map.of())));
                assertEquals("mine", run(runtime, echo(Map.of("GITHUB_TOKEN", "mine"))), "the exec's own variable wins");

                // Bounds: at the bound accepted, one past refused whole (nothing changes).
                Map<String, String> atBound = new HashMap<>();
                for (int i = 0; i < SandboxRuntime.MAX_PROVIDER_VARIABLES - 1; i++) {
                    atBound.put("V" + i, "x");
                }
                atBound.put("GITHUB_TOKEN", "p".repeat(SandboxRuntime.MAX_PROVIDER_VARIABLE_CHARS));
                assertEquals(3, runtime.updateProviderEnvironment(atBound, 3));
                Map<String, String> past = new HashMap<>(atBound);
                past.put("GITHUB_TOKEN", "new");
                past.put("ONE_MORE", "x");
                assertEquals(BackendException.Kind.INVALID, assertThrows(BackendException.class,
                        () -> runtime.updateProviderEnvironment(past, 4)).kind());
                assertEquals(BackendException.Kind.INVALID, assertThrows(BackendException.class,
                        () -> runtime.updateProviderEnvironment(Map.of("GITHUB_TOKEN", "p".repeat(
                                SandboxRuntime.MAX_PROVIDER_VARIABLE_CHARS + 1)), 4)).kind());
                for (String bad : List.of("", "1ABC", "A=B", "A B", "A-B")) {
                    assertEquals(BackendException.Kind.INVALID, assertThrows(BackendException.class,
                            () -> runtime.updateProviderEnvironment(Map.of(bad, "x"), 4)).kind(), "name '" + bad + "'");
                }
                assertEquals(BackendException.Kind.INVALID, assertThrows(BackendException.class,
                        () -> runtime.updateProviderEnvironment(Map.of("A", "b"), -1)).kind(), "epoch past 2^63");
                assertEquals("p".repeat(SandboxRuntime.MAX_PROVIDER_VARIABLE_CHARS), run(runtime, echo(Map.of())),
                        "the refused updates changed nothing");
            }
        }
    }
}
