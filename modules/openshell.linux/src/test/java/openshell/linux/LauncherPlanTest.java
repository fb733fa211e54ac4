package openshell.linux;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Plan encoding and its bounds, and launcher features beyond the basic path. */
class LauncherPlanTest {

    @Test
    void planRoundTripsThroughItsWireForm() {
        LaunchPlan plan = Launches.bash("true")
                .namespace(NamespaceType.NET, "/proc/1/ns/net")
                .rlimits(List.of(new ResourceLimit(ResourceLimit.NOFILE, 64, 128)))
                .controllingTerminal(true)
                .build();
        LaunchPlan decoded = LaunchPlan.decode(plan.encode());
        assertEquals(plan.argv(), decoded.argv());
        assertEquals(plan.namespaces(), decoded.namespaces());
        assertEquals(plan.rlimits(), decoded.rlimits());
        assertEquals(plan.readOnlyPaths(), decoded.readOnlyPaths());
        assertTrue(decoded.controllingTerminal());
        assertEquals(plan.filter().length(), decoded.filter().length());
    }

    @Test
    void planSizeIsBoundedAndAPlanAtTheBoundIsLaunched() throws Exception {
        LaunchPlan base = Launches.bash("echo ${#PAD}").build();
        int overhead = base.encode().length + 4 + 4;
        String pad = "x".repeat(LaunchPlan.MAX_PLAN_BYTES - overhead);
        LaunchPlan atBound = Launches.bash("echo ${#PAD}").envp(List.of("PATH=/usr/bin:/bin", "PAD=" + pad)).build();
        assertEquals(LaunchPlan.MAX_PLAN_BYTES, atBound.encode().length);
        Launches.Outcome outcome = Launches.run(atBound, Launches::continueAll);
        assertInstanceOf(LaunchResult.Started.class, outcome.started(), outcome.ready() + outcome.output());
        assertEquals(Integer.toString(pad.length()), outcome.output().trim());

        LaunchPlan over = Launches.bash("echo ${#PAD}").envp(List.of("PATH=/usr/bin:/bin", "PAD=" + pad + "x")).build();
        LinuxException e = assertThrows(LinuxException.class, over::encode);
        assertEquals(7, e.errno(), "E2BIG");
    }

    @Test
    void malformedPlansAreRejected() {
        assertEquals(Errno.EINVAL, assertThrows(LinuxException.class, () -> LaunchPlan.decode(new byte[] {1, 2, 3, 4})).errno());
        byte[] valid = Launches.bash("true").build().encode();
        assertEquals(Errno.EINVAL, assertThrows(LinuxException.class,
                () -> LaunchPlan.decode(java.util.Arrays.copyOf(valid, valid.length - 3))).errno());
        assertThrows(LinuxException.class, () -> LaunchPlan.builder("relative/path").identity(1, 1, List.of()).build());
        assertThrows(LinuxException.class, () -> LaunchPlan.builder("/bin/true").build(), "identity is required");
        List<String> tooMany = java.util.stream.IntStream.rangeClosed(0, LaunchPlan.MAX_LANDLOCK_PATHS).mapToObj(i -> "/p" + i).toList();
        assertThrows(LinuxException.class, () -> Launches.bash("true").landlock(LaunchPlan.Mode.REQUIRED, tooMany, List.of()).build());
    }

    @Test
    void launcherJoinsANetworkNamespaceAndAppliesRlimits() throws Exception {
        try (ChildProcess holder = ChildProcess.builder("/usr/bin/unshare")
                .argv(List.of("unshare", "--net", "/usr/bin/sleep", "60")).spawn()) {
            try {
                long deadline = System.nanoTime() + Launches.WAIT.toNanos();
                while (Namespaces.of(holder.pid(), NamespaceType.NET) == Namespaces.current(NamespaceType.NET)) {
                    assertTrue(System.nanoTime() < deadline, "unshare --net did not create a namespace");
                    Thread.onSpinWait();
                }
                LaunchPlan plan = Launches.bash("cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' '; ulimit -n; ulimit -Hn")
                        .namespace(NamespaceType.NET, "/proc/" + holder.pid() + "/ns/net")
                        .rlimits(List.of(new ResourceLimit(ResourceLimit.NOFILE, 64, 128)))
                        .build();
                Launches.Outcome outcome = Launches.run(plan, Launches::continueAll);
                assertInstanceOf(LaunchResult.Started.class, outcome.started(), outcome.ready() + outcome.output());
                assertEquals(List.of("lo", "64", "128"), outcome.output().lines().toList());
            } finally {
                holder.pidfd().signal(9);
                holder.awaitExit(Launches.WAIT);
            }
        }
    }

    @Test
    void controllingTerminalIsThePty() throws Exception {
        try (Pty pty = Pty.open()) {
            pty.resize(new Pty.WindowSize(33, 99));
            LauncherProcess launcher = LauncherProcess.start(Launches.command(),
                    new LauncherProcess.Stdio(pty.slave().value(), pty.slave().value(), pty.slave().value(), true));
            try (launcher) {
                LaunchPlan plan = LaunchPlan.builder("/usr/bin/bash")
                        .argv(List.of("bash", "-c", "stty size; test -t 0 && echo tty-ok; cat /proc/self/stat | cut -d' ' -f7"))
                        .envp(List.of("PATH=/usr/bin:/bin"))
                        .identity(Launches.NOBODY, Launches.NOBODY, List.of())
                        .landlock(LaunchPlan.Mode.REQUIRED, List.of("/usr", "/lib", "/lib64", "/bin", "/proc"),
                                List.of(pty.slaveName(), "/dev/tty"))
                        .controllingTerminal(true)
                        .build();
                LaunchResult.Ready ready = assertInstanceOf(LaunchResult.Ready.class, launcher.sendPlan(plan, Launches.WAIT));
                ready.listener().close();
                assertInstanceOf(LaunchResult.Started.class, launcher.acknowledge(Launches.WAIT));
                assertEquals(new ChildExit(0, 0), launcher.process().awaitExit(Launches.WAIT).orElseThrow());
                StringBuilder text = new StringBuilder();
                byte[] buffer = new byte[4096];
                int n;
                while (!text.toString().contains("tty-ok") && (n = pty.master().read(buffer, Duration.ofSeconds(5))) > 0) {
                    text.append(new String(buffer, 0, n, StandardCharsets.UTF_8));
                }
                String out = text.toString();
                assertTrue(out.contains("33 99"), out);
                assertTrue(out.contains("tty-ok"), out);
            }
        }
    }

    @Test
    void preStartedLauncherWaitsForItsPlan() throws Exception {
        try (OwnedFd devNull = Namespaces.openPath("/dev/null");
             LauncherProcess launcher = LauncherProcess.start(Launches.command(),
                     new LauncherProcess.Stdio(devNull.value(), devNull.value(), devNull.value(), false))) {
            // The launcher is up before any plan exists; the plan can come much later.
            assertTrue(launcher.process().awaitExit(Duration.ofMillis(500)).isEmpty(), "the launcher waits, it does not exit");
            LaunchResult ready = launcher.sendPlan(Launches.bash("exit 5").build(), Launches.WAIT);
            assertInstanceOf(LaunchResult.Ready.class, ready);
            ((LaunchResult.Ready) ready).listener().close();
            assertInstanceOf(LaunchResult.Started.class, launcher.acknowledge(Launches.WAIT));
            assertEquals(new ChildExit(5, 0), launcher.process().awaitExit(Launches.WAIT).orElseThrow());
        }
    }

    @Test
    void withdrawingInsteadOfAcknowledgingKeepsTheTargetFromRunning() throws Exception {
        try (OwnedFd devNull = Namespaces.openPath("/dev/null")) {
            List<OwnedFd> output = OwnedFd.pipe();
            try (OwnedFd read = output.get(0)) {
                LauncherProcess launcher;
                try (OwnedFd write = output.get(1)) {
                    launcher = LauncherProcess.start(Launches.command(),
                            new LauncherProcess.Stdio(devNull.value(), write.value(), write.value(), false));
                }
                try (launcher) {
                    LaunchResult ready = launcher.sendPlan(Launches.bash("echo target-ran").build(), Launches.WAIT);
                    ((LaunchResult.Ready) ready).listener().close();
                    launcher.withdraw();
                    assertEquals(new ChildExit(LauncherProcess.FAILURE_EXIT, 0), launcher.process().awaitExit(Launches.WAIT).orElseThrow());
                }
                assertEquals("", new String(read.readToEnd(4096, Launches.WAIT), StandardCharsets.UTF_8));
            }
        }
    }
}
