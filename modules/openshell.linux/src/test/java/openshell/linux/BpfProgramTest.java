package openshell.linux;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** The assembler and the workload filter's decisions for inputs this machine cannot produce. */
class BpfProgramTest {
    private static final int X86_64 = Seccomp.AUDIT_ARCH_X86_64;

    @Test
    void foreignArchitectureAndX32AreKilled() {
        BpfProgram program = WorkloadFilter.program();
        assertEquals(Seccomp.RET_KILL_PROCESS, program.evaluate(0, Seccomp.AUDIT_ARCH_I386));
        assertEquals(Seccomp.RET_KILL_PROCESS, program.evaluate(Seccomp.X32_SYSCALL_BIT | WorkloadFilter.NR_CONNECT, X86_64));
        assertEquals(Seccomp.RET_ALLOW, program.evaluate(0, X86_64));
    }

    @Test
    void sendtoIsNotifiedOnlyWithADestination() {
        BpfProgram program = WorkloadFilter.program();
        assertEquals(Seccomp.RET_ALLOW, program.evaluate(WorkloadFilter.NR_SENDTO, X86_64, 3, 0x1000, 10, 0, 0, 0));
        assertEquals(Seccomp.RET_USER_NOTIF, program.evaluate(WorkloadFilter.NR_SENDTO, X86_64, 3, 0x1000, 10, 0, 0x2000, 16));
        assertEquals(Seccomp.RET_USER_NOTIF, program.evaluate(WorkloadFilter.NR_SENDTO, X86_64, 3, 0x1000, 10, 0, 1L << 40, 16));
    }

    @Test
    void socketDecisionsFollowTheDesign() {
        BpfProgram program = WorkloadFilter.program();
        assertEquals(Seccomp.RET_USER_NOTIF, program.evaluate(WorkloadFilter.NR_SOCKET, X86_64, 10, 1 | 0x80000, 0));
        assertEquals(Seccomp.RET_USER_NOTIF, program.evaluate(WorkloadFilter.NR_SOCKET, X86_64, 2, 2, 17));
        assertEquals(Seccomp.errno(Errno.EPERM), program.evaluate(WorkloadFilter.NR_SOCKET, X86_64, 10, 3, 58));
        assertEquals(Seccomp.errno(Errno.EAFNOSUPPORT), program.evaluate(WorkloadFilter.NR_SOCKET, X86_64, 40, 1, 0));
        assertEquals(Seccomp.RET_ALLOW, program.evaluate(WorkloadFilter.NR_SOCKETPAIR, X86_64, 1, 1, 0));
        assertEquals(Seccomp.errno(Errno.EAFNOSUPPORT), program.evaluate(WorkloadFilter.NR_SOCKETPAIR, X86_64, 2, 1, 0));
        assertEquals(Seccomp.RET_USER_NOTIF, program.evaluate(WorkloadFilter.NR_BIND, X86_64));
        assertEquals(Seccomp.RET_USER_NOTIF, program.evaluate(WorkloadFilter.NR_GETPEERNAME, X86_64));
        assertEquals(Seccomp.errno(Errno.EPERM), program.evaluate(WorkloadFilter.NR_IO_URING_ENTER, X86_64));
        for (int nr : new int[] {WorkloadFilter.NR_ADD_KEY, WorkloadFilter.NR_REQUEST_KEY, WorkloadFilter.NR_KEYCTL,
                WorkloadFilter.NR_PERF_EVENT_OPEN, WorkloadFilter.NR_BPF, WorkloadFilter.NR_USERFAULTFD}) {
            assertEquals(Seccomp.errno(Errno.EPERM), program.evaluate(nr, X86_64), "system call " + nr);
        }
        // Their neighbours are not caught with them.
        assertEquals(Seccomp.RET_ALLOW, program.evaluate(WorkloadFilter.NR_ADD_KEY - 1, X86_64));
        assertEquals(Seccomp.RET_ALLOW, program.evaluate(WorkloadFilter.NR_USERFAULTFD + 1, X86_64));
    }

    @Test
    void programLengthIsBoundedAtTheKernelLimit() {
        BpfProgram.Builder atLimit = BpfProgram.builder();
        for (int i = 0; i < BpfProgram.MAX_INSTRUCTIONS; i++) {
            atLimit.ret(Seccomp.RET_ALLOW);
        }
        assertEquals(BpfProgram.MAX_INSTRUCTIONS, atLimit.build().length());
        atLimit.ret(Seccomp.RET_ALLOW);
        LinuxException e = assertThrows(LinuxException.class, atLimit::build);
        assertEquals(Errno.EINVAL, e.errno());
        assertThrows(LinuxException.class, () -> BpfProgram.decode(new byte[8 * (BpfProgram.MAX_INSTRUCTIONS + 1)]));
        assertEquals(BpfProgram.MAX_INSTRUCTIONS, BpfProgram.decode(new byte[8 * BpfProgram.MAX_INSTRUCTIONS]).length());
    }

    @Test
    void jumpsAreForwardAndAtMost255() {
        BpfProgram.Builder far = BpfProgram.builder().loadNr().jumpIfEqual(1, "end");
        for (int i = 0; i < 255; i++) {
            far.ret(Seccomp.RET_ALLOW);
        }
        far.label("end").ret(Seccomp.RET_KILL_PROCESS);
        assertEquals(Seccomp.RET_KILL_PROCESS, far.build().evaluate(1, X86_64));
        BpfProgram.Builder tooFar = BpfProgram.builder().loadNr().jumpIfEqual(1, "end");
        for (int i = 0; i < 256; i++) {
            tooFar.ret(Seccomp.RET_ALLOW);
        }
        tooFar.label("end").ret(Seccomp.RET_KILL_PROCESS);
        assertThrows(LinuxException.class, tooFar::build);
        assertThrows(LinuxException.class, () -> BpfProgram.builder().loadNr().jumpIfEqual(1, "nowhere").build());
    }
}
