package openshell.isolation;

import static openshell.isolation.Rejections.invalid;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

/** Agent and exec specs: what an execve can take, bounded, copied. */
class SpecsTest {
    private static List<String> argv(int n) {
        List<String> argv = new ArrayList<>(Collections.nCopies(n, "x"));
        argv.set(0, "/bin/agent");
        return argv;
    }

    private static Map<String, String> env(int n) {
        Map<String, String> env = new HashMap<>();
        for (int i = 0; i < n; i++) {
            env.put("V" + i, "v");
        }
        return env;
    }

    @Test
    void argumentCountIsBoundedAtMaxArgs() {
        assertEquals(AgentSpec.MAX_ARGS, AgentSpec.of(argv(AgentSpec.MAX_ARGS)).argv().size());
        invalid(() -> AgentSpec.of(argv(AgentSpec.MAX_ARGS + 1)));
        assertEquals(ExecSpec.MAX_ARGS, ExecSpec.builder(argv(ExecSpec.MAX_ARGS)).build().argv().size());
        invalid(() -> ExecSpec.builder(argv(ExecSpec.MAX_ARGS + 1)).build());
    }

    @Test
    void environmentIsBoundedAtMaxEnv() {
        assertEquals(AgentSpec.MAX_ENV, new AgentSpec(argv(1), env(AgentSpec.MAX_ENV), "/").environment().size());
        invalid(() -> new AgentSpec(argv(1), env(AgentSpec.MAX_ENV + 1), "/"));
        assertEquals(ExecSpec.MAX_ENV, ExecSpec.builder(argv(1)).environment(env(ExecSpec.MAX_ENV)).build().environment().size());
        invalid(() -> ExecSpec.builder(argv(1)).environment(env(ExecSpec.MAX_ENV + 1)).build());
    }

    @Test
    void malformedCommandLinesAreInvalid() {
        invalid(() -> AgentSpec.of(List.of()));
        invalid(() -> AgentSpec.of(List.of("")));
        invalid(() -> AgentSpec.of(List.of("/bin/agent", "a\0b")));
        invalid(() -> AgentSpec.of(null));
        List<String> withNull = new ArrayList<>(List.of("/bin/agent"));
        withNull.add(null);
        invalid(() -> AgentSpec.of(withNull));
        assertEquals(List.of("/bin/agent", ""), AgentSpec.of(List.of("/bin/agent", "")).argv(), "empty arguments are legal");
    }

    @Test
    void malformedEnvironmentsAndDirectoriesAreInvalid() {
        for (String name : List.of("", "A=B", "A\0")) {
            invalid(() -> new AgentSpec(argv(1), Map.of(name, "v"), "/"));
        }
        invalid(() -> new AgentSpec(argv(1), Map.of("A", "v\0"), "/"));
        Map<String, String> nullValue = new HashMap<>();
        nullValue.put("A", null);
        invalid(() -> new AgentSpec(argv(1), nullValue, "/"));
        invalid(() -> new AgentSpec(argv(1), Map.of(), "relative"));
        invalid(() -> new AgentSpec(argv(1), Map.of(), "/a\0"));
        invalid(() -> new AgentSpec(argv(1), Map.of(), null));
        invalid(() -> ExecSpec.builder(argv(1)).workingDirectory("tmp").build());
    }

    @Test
    void specsKeepTheirOwnCopies() {
        List<String> argv = argv(2);
        Map<String, String> env = new HashMap<>(Map.of("A", "1"));
        AgentSpec agent = new AgentSpec(argv, env, "/work");
        ExecSpec exec = ExecSpec.builder(argv).environment(env).build();
        argv.set(1, "changed");
        env.put("B", "2");
        assertEquals("x", agent.argv().get(1));
        assertEquals(Map.of("A", "1"), agent.environment());
        assertEquals("x", exec.argv().get(1));
        assertEquals(Map.of("A", "1"), exec.environment());
    }

    @Test
    void admissionDeadlineIsPositiveAndAtMostMaxAdmission() {
        ExecSpec.Builder builder = ExecSpec.builder(argv(1));
        assertEquals(ExecSpec.MAX_ADMISSION, builder.build().admission(), "the default is the largest deadline");
        assertEquals(ExecSpec.MAX_ADMISSION, builder.admission(ExecSpec.MAX_ADMISSION).build().admission());
        assertEquals(Duration.ofNanos(1), builder.admission(Duration.ofNanos(1)).build().admission());
        invalid(() -> ExecSpec.builder(argv(1)).admission(ExecSpec.MAX_ADMISSION.plusNanos(1)));
        invalid(() -> ExecSpec.builder(argv(1)).admission(Duration.ZERO));
        invalid(() -> ExecSpec.builder(argv(1)).admission(Duration.ofSeconds(-1)));
        invalid(() -> ExecSpec.builder(argv(1)).admission(null));
    }

    @Test
    void pipesByDefaultAndPtyOnRequest() {
        ExecSpec piped = ExecSpec.of("/bin/sh", "-c", "true");
        assertTrue(piped.terminal().isEmpty());
        assertEquals("/", piped.workingDirectory());
        ExecSpec pty = ExecSpec.builder(List.of("/bin/sh")).pty(new TerminalSize(80, 24)).workingDirectory("/work").build();
        assertEquals(new TerminalSize(80, 24), pty.terminal().orElseThrow());
        assertEquals("/work", pty.workingDirectory());
        invalid(() -> ExecSpec.builder(List.of("/bin/sh")).pty(null));
        invalid(() -> ExecSpec.builder(null));
    }

    @Test
    void terminalSizeIsBoundedBothWays() {
        assertEquals(1, new TerminalSize(1, 1).columns());
        assertEquals(0xffff, new TerminalSize(0xffff, 0xffff).rows());
        invalid(() -> new TerminalSize(0, 24));
        invalid(() -> new TerminalSize(80, 0));
        invalid(() -> new TerminalSize(0x10000, 24));
        invalid(() -> new TerminalSize(80, 0x10000));
    }

    @Test
    void exitCodesAndSignalsAreDistinctAndBounded() {
        assertEquals(0, new ExitStatus.Exited(0).code());
        assertEquals(255, new ExitStatus.Exited(255).code());
        invalid(() -> new ExitStatus.Exited(-1));
        invalid(() -> new ExitStatus.Exited(256));
        assertEquals(1, new ExitStatus.Signaled(1).signal());
        assertEquals(64, new ExitStatus.Signaled(64).signal());
        invalid(() -> new ExitStatus.Signaled(0));
        invalid(() -> new ExitStatus.Signaled(65));
        ExitStatus exited = new ExitStatus.Exited(128 + 15);
        ExitStatus signaled = new ExitStatus.Signaled(ProcessSignal.TERM.number());
        assertTrue(!exited.equals(signaled), "exit 143 is not death by TERM");
        assertEquals(15, ProcessSignal.TERM.number());
        assertEquals(9, ProcessSignal.KILL.number());
    }
}
