package openshell.linux;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The launcher end to end: the native launcher, real targets, the real kernel, as root. */
class LauncherTest {

    @Test
    void launchedProcessRunsWithEveryControlInForce() throws Exception {
        Launches.Outcome outcome = Launches.run(Launches.bash(
                "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status;"
                        + " if cat /etc/hostname >/dev/null 2>&1; then echo etc=opened; else echo etc=denied; fi;"
                        + " if /usr/bin/unshare -U true 2>/dev/null; then echo userns=created; else echo userns=refused; fi;"
                        + " echo fds-begin; ls -1 /proc/$$/fd; echo fds-end")
                .build(), Launches::continueAll);
        LaunchResult.Ready ready = assertInstanceOf(LaunchResult.Ready.class, outcome.ready(), outcome.ready() + "\n" + outcome.output());
        assertTrue(ready.landlock().complete(), ready.landlock().toString());
        assertInstanceOf(LaunchResult.Started.class, outcome.started());
        String out = outcome.output();
        assertTrue(out.contains("Uid:\t65534\t65534\t65534\t65534"), out);
        assertTrue(out.contains("Gid:\t65534\t65534\t65534\t65534"), out);
        assertTrue(out.contains("Groups:\t65534"), out);
        for (String set : List.of("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")) {
            assertTrue(out.contains(set + ":\t0000000000000000"), set + " not empty:\n" + out);
        }
        assertTrue(out.contains("NoNewPrivs:\t1"), out);
        assertTrue(out.contains("Seccomp:\t2"), out);
        assertTrue(out.contains("etc=denied"), "Landlock must deny /etc:\n" + out);
        assertTrue(out.contains("userns=refused"), "a new user namespace would regain capabilities:\n" + out);
        List<String> lines = out.lines().toList();
        assertEquals(List.of("0", "1", "2"), lines.subList(lines.indexOf("fds-begin") + 1, lines.indexOf("fds-end")),
                "nothing of the launcher or the parent leaks into the target:\n" + out);
        assertEquals(new ChildExit(0, 0), outcome.exit());
    }

    @Test
    void execUsesExactArgvAndEnvironment() throws Exception {
        LaunchPlan plan = LaunchPlan.builder("/usr/bin/bash")
                .argv(List.of("custom-argv0", "-c", "tr '\\0' '\\n' < /proc/$$/cmdline; echo --; env", "a b", ""))
                .envp(List.of("ONLY=this", "EMPTY="))
                .identity(Launches.NOBODY, Launches.NOBODY, List.of())
                .landlock(LaunchPlan.Mode.REQUIRED, List.of("/usr", "/lib", "/lib64", "/bin", "/proc"), List.of())
                .build();
        Launches.Outcome outcome = Launches.run(plan, Launches::continueAll);
        assertInstanceOf(LaunchResult.Started.class, outcome.started(), outcome.ready() + "\n" + outcome.output());
        List<String> lines = outcome.output().lines().toList();
        int separator = lines.indexOf("--");
        assertEquals(List.of("custom-argv0", "-c", "tr '\\0' '\\n' < /proc/$$/cmdline; echo --; env", "a b", ""),
                lines.subList(0, separator));
        // bash adds PWD, SHLVL and _ itself; nothing else may appear.
        List<String> env = lines.subList(separator + 1, lines.size()).stream()
                .filter(l -> !l.startsWith("PWD=") && !l.startsWith("SHLVL=") && !l.startsWith("_=")).sorted().toList();
        assertEquals(List.of("EMPTY=", "ONLY=this"), env);
    }

    @Test
    void failedStepIsReportedWithItsErrnoAndTheTargetNeverRuns() throws Exception {
        LaunchPlan plan = Launches.bash("echo target-ran").workingDirectory("/nonexistent-dir").build();
        Launches.Outcome outcome = Launches.run(plan, Launches::continueAll);
        LaunchResult.Failed failed = assertInstanceOf(LaunchResult.Failed.class, outcome.ready());
        assertEquals(LaunchStep.WORKING_DIRECTORY, failed.step());
        assertEquals(Errno.ENOENT, failed.errno());
        assertTrue(failed.detail().contains("chdir(/nonexistent-dir)"), failed.detail());
        assertTrue(!outcome.output().contains("target-ran"), outcome.output());
        assertEquals(new ChildExit(LauncherProcess.FAILURE_EXIT, 0), outcome.exit());
    }

    @Test
    void execFailureIsReportedAfterTheAcknowledgement() throws Exception {
        LaunchPlan plan = LaunchPlan.builder("/usr/bin/does-not-exist")
                .identity(Launches.NOBODY, Launches.NOBODY, List.of())
                .landlock(LaunchPlan.Mode.REQUIRED, List.of("/usr"), List.of())
                .build();
        Launches.Outcome outcome = Launches.run(plan, Launches::continueAll);
        assertInstanceOf(LaunchResult.Ready.class, outcome.ready(), outcome.ready() + "\n" + outcome.output());
        LaunchResult.Failed failed = assertInstanceOf(LaunchResult.Failed.class, outcome.started());
        assertEquals(LaunchStep.EXEC, failed.step());
        assertEquals(Errno.ENOENT, failed.errno());
    }

    @Test
    void enteringAUserNamespaceFailsClearly() throws Exception {
        // A fresh user namespace held by a child: the launcher does not enter user namespaces (it must be started inside).
        try (ChildProcess holder = ChildProcess.builder("/usr/bin/unshare")
                .argv(List.of("unshare", "-U", "/usr/bin/sleep", "60")).spawn()) {
            try {
                String path = "/proc/" + holder.pid() + "/ns/user";
                long deadline = System.nanoTime() + Launches.WAIT.toNanos();
                while (Namespaces.inode(java.nio.file.Path.of(path)) == Namespaces.current(NamespaceType.USER)) {
                    // unshare(1) has not called unshare(2) yet: wait for the namespace to change.
                    assertTrue(System.nanoTime() < deadline, "unshare -U did not create a namespace");
                    Thread.onSpinWait();
                }
                LaunchPlan plan = Launches.bash("echo ran").namespace(NamespaceType.USER, path).build();
                Launches.Outcome outcome = Launches.run(plan, Launches::continueAll);
                LaunchResult.Failed failed = assertInstanceOf(LaunchResult.Failed.class, outcome.ready());
                assertEquals(LaunchStep.NAMESPACES, failed.step());
                assertEquals(Errno.EINVAL, failed.errno());
                assertTrue(failed.detail().contains("start it inside it"), failed.detail());
            } finally {
                holder.pidfd().signal(9);
                holder.awaitExit(Launches.WAIT);
            }
        }
    }
}
