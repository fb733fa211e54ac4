package openshell.linux;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The remaining bounds of the module's limits table, each at and just past its value. */
class BoundsTest {

    @Test
    void childDescriptorNumbersAreBounded() {
        ChildProcess.Builder builder = ChildProcess.builder("/usr/bin/true");
        builder.descriptor(ChildProcess.MAX_CHILD_FD, 0);
        assertEquals(Errno.EBADF, assertThrows(LinuxException.class,
                () -> builder.descriptor(ChildProcess.MAX_CHILD_FD + 1, 0)).errno());
    }

    @Test
    void argumentCountsAreBounded() {
        List<String> atBound = Collections.nCopies(ChildProcess.MAX_ARGUMENTS, "a");
        ChildProcess.builder("/usr/bin/true").argv(atBound).envp(atBound);
        List<String> over = Collections.nCopies(ChildProcess.MAX_ARGUMENTS + 1, "a");
        assertEquals(Errno.EINVAL, assertThrows(LinuxException.class, () -> ChildProcess.builder("/usr/bin/true").argv(over)).errno());
    }

    @Test
    void supplementaryGroupsAreBounded() {
        assertEquals(Errno.EINVAL, assertThrows(LinuxException.class,
                () -> Credentials.setGroups(new int[Credentials.MAX_GROUPS + 1])).errno());
    }

    @Test
    void messageSizeIsBounded() {
        List<OwnedFd> pair = UnixSockets.seqpacketPair();
        try (OwnedFd a = pair.get(0); OwnedFd b = pair.get(1)) {
            assertEquals(Errno.EINVAL, assertThrows(LinuxException.class,
                    () -> UnixSockets.send(a.value(), new byte[UnixSockets.MAX_MESSAGE_BYTES + 1])).errno());
            assertEquals(Errno.EINVAL, assertThrows(LinuxException.class,
                    () -> UnixSockets.receive(b.value(), UnixSockets.MAX_MESSAGE_BYTES + 1, java.time.Duration.ZERO)).errno());
        }
    }

    @Test
    void exceptionNamesCallAndErrno() {
        LinuxException e = new LinuxException("setns(NET)", Errno.EPERM, "detail");
        assertEquals("setns(NET) failed: EPERM (1): detail", e.getMessage());
        assertEquals("EPERM", e.errnoName());
        assertEquals("errno 999", Errno.name(999));
    }
}
