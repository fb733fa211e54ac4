package openshell.perf.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The CPU figure the harness waits on before timing a sandbox's agent: it must count a
 * process's descendants (the runtime's launcher and agent), and a process that is gone counts
 * nothing rather than failing the run.
 */
class SandboxProcessesTest {
    /** CPU the busy child burns before it idles; far above the 10 ms tick. */
    private static final long BURN_MS = 300;

    @Test
    void aTreeCountsTheCpuOfItsDescendants() throws Exception {
        // A shell that spins for BURN_MS of wall time (on a CPU unless the machine is saturated), then sleeps.
        Process child = new ProcessBuilder("/bin/sh", "-c",
                "end=$(( $(date +%s%N) + " + BURN_MS + "000000 )); while [ $(date +%s%N) -lt $end ]; do :; done; exec sleep 30")
                .start();
        try {
            long self = ProcessHandle.current().pid();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            long childCpu = 0;
            while (System.nanoTime() < deadline) {
                childCpu = SandboxProcesses.treeCpuMillis(child.pid());
                if (childCpu >= BURN_MS / 3) {
                    break;
                }
                Thread.sleep(50);
            }
            assertTrue(childCpu >= BURN_MS / 3, "the child's tree shows " + childCpu + " ms of CPU");
            long tree = SandboxProcesses.treeCpuMillis(self);
            // This JVM alone has used CPU too; its tree holds the child's on top.
            assertTrue(tree >= childCpu + 10, "tree " + tree + " ms, child " + childCpu + " ms");
        } finally {
            child.destroyForcibly().waitFor();
        }
    }

    @Test
    void aProcessThatIsGoneCountsNothing() throws Exception {
        Process gone = new ProcessBuilder("/bin/true").start();
        gone.waitFor();
        assertEquals(0, SandboxProcesses.treeCpuMillis(gone.pid()));
    }
}
