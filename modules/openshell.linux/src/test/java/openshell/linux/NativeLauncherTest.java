package openshell.linux;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The native launcher's side of the protocol, spoken raw: what a malformed or oversized message
 * gets, and that the program's bounds and step order are the ones the Java side documents.
 */
class NativeLauncherTest {
    private static final Path SOURCE = Path.of("src/main/c/openshell-launcher.c");

    /** A launcher started by hand, with our end of its plan socket. */
    private static final class Raw implements AutoCloseable {
        private final ChildProcess process;
        private final OwnedFd socket;
        private ChildExit exit;

        private Raw(ChildProcess process, OwnedFd socket) {
            this.process = process;
            this.socket = socket;
        }

        OwnedFd socket() {
            return socket;
        }

        /** Waits for the launcher's exit (once). */
        ChildExit exit() {
            if (exit == null) {
                exit = process.awaitExit(Launches.WAIT).orElseThrow();
            }
            return exit;
        }

        static Raw start() {
            List<OwnedFd> pair = UnixSockets.seqpacketPair();
            try (OwnedFd theirs = pair.get(1); OwnedFd devNull = Namespaces.openPath("/dev/null")) {
                ChildProcess child = ChildProcess.builder(Launches.command().executable())
                        .argv(Launches.command().argv())
                        .descriptor(0, devNull.value()).descriptor(1, devNull.value()).descriptor(2, devNull.value())
                        .descriptor(LauncherProcess.PLAN_FD, theirs.value())
                        .spawn();
                return new Raw(child, pair.get(0));
            }
        }

        /** Sends {@code message} and returns the failure report, after the launcher exited 127. */
        LaunchResult.Failed refusal(byte[] message) {
            UnixSockets.send(socket.value(), message);
            Optional<UnixSockets.Message> reply = UnixSockets.receive(socket.value(), 8192, Launches.WAIT);
            byte[] data = reply.orElseThrow().data();
            assertEquals('F', data[0], "a failure report");
            assertEquals(new ChildExit(LauncherProcess.FAILURE_EXIT, 0), exit());
            ByteBuffer in = ByteBuffer.wrap(data, 1, 8);
            return new LaunchResult.Failed(LaunchStep.values()[in.getInt()], in.getInt(),
                    new String(data, 9, data.length - 9, StandardCharsets.UTF_8));
        }

        @Override
        public void close() {
            if (exit == null) {
                process.pidfd().signal(9);
                exit();
            }
            process.close();
            socket.close();
        }
    }

    private static byte[] message(byte kind, long handledFs, byte[] plan) {
        return ByteBuffer.allocate(LauncherProcess.PLAN_HEADER_BYTES + plan.length).put(kind).putInt(7)
                .putLong(handledFs).putLong(0).put(plan).array();
    }

    private static final long ALL_FS = Landlock.fsRights(KernelFeatures.LANDLOCK_ABI_TARGET);

    @Test
    void aMessageOneByteOverTheBoundIsRefusedAtThePlanStep() {
        try (Raw raw = Raw.start()) {
            byte[] plan = new byte[LaunchPlan.MAX_PLAN_BYTES + 1];
            LaunchResult.Failed failed = raw.refusal(message(LauncherProcess.MSG_PLAN, ALL_FS, plan));
            assertEquals(LaunchStep.PLAN, failed.step());
            assertEquals(90, failed.errno(), "EMSGSIZE: " + failed);
        }
    }

    @Test
    void malformedPlansAreRefusedAtThePlanStepAndNothingRuns() {
        byte[] valid = Launches.bash("echo ran").build().encode();
        byte[] badMagic = valid.clone();
        badMagic[0] ^= 1;
        List<byte[]> malformed = List.of(
                message((byte) 'X', ALL_FS, valid),
                message(LauncherProcess.MSG_PLAN, ALL_FS, badMagic),
                message(LauncherProcess.MSG_PLAN, ALL_FS, Arrays.copyOf(valid, valid.length - 3)),
                message(LauncherProcess.MSG_PLAN, ALL_FS, Arrays.copyOf(valid, valid.length + 8)),
                message(LauncherProcess.MSG_PLAN, ALL_FS, new byte[0]),
                // Landlock required and no rights chosen: refused even though the parent sent it.
                message(LauncherProcess.MSG_PLAN, 0, valid));
        for (byte[] message : malformed) {
            try (Raw raw = Raw.start()) {
                LaunchResult.Failed failed = raw.refusal(message);
                assertEquals(LaunchStep.PLAN, failed.step(), failed.toString());
                assertEquals(Errno.EINVAL, failed.errno(), failed.toString());
            }
        }
    }

    @Test
    void aStringWithANulInsideIsRefused() {
        byte[] plan = Launches.bash("echo ran").build().encode();
        int at = indexOf(plan, "echo ran".getBytes(StandardCharsets.UTF_8));
        plan[at + 4] = 0;
        try (Raw raw = Raw.start()) {
            LaunchResult.Failed failed = raw.refusal(message(LauncherProcess.MSG_PLAN, ALL_FS, plan));
            assertEquals(LaunchStep.PLAN, failed.step());
            assertTrue(failed.detail().contains("NUL"), failed.detail());
        }
    }

    @Test
    void aParentThatClosesBeforeThePlanEndsTheLauncher() {
        try (Raw raw = Raw.start()) {
            raw.socket().close();
            assertEquals(new ChildExit(LauncherProcess.FAILURE_EXIT, 0), raw.exit());
        }
    }

    @Test
    void theProgramsBoundsAndStepsAreTheJavaSides() throws IOException {
        String c = Files.readString(SOURCE);
        assertEquals(LauncherProcess.PLAN_FD, define(c, "PLAN_FD"));
        assertEquals(LauncherProcess.FAILURE_EXIT, define(c, "FAILURE_EXIT"));
        assertEquals(LauncherProcess.PLAN_WAIT.toMillis(), define(c, "PLAN_WAIT_MS"));
        assertEquals(LauncherProcess.ACK_WAIT.toMillis(), define(c, "ACK_WAIT_MS"));
        assertEquals(LaunchPlan.MAX_PLAN_BYTES, define(c, "MAX_PLAN_BYTES"));
        assertEquals(LauncherProcess.PLAN_HEADER_BYTES, define(c, "PLAN_HEADER_BYTES"));
        assertEquals(Credentials.MAX_GROUPS, define(c, "MAX_GROUPS"));
        assertEquals(LaunchPlan.MAX_LANDLOCK_PATHS, define(c, "MAX_LANDLOCK_PATHS"));
        assertEquals(BpfProgram.MAX_INSTRUCTIONS, define(c, "MAX_INSTRUCTIONS"));
        assertEquals(LaunchPlan.MAGIC, (int) define(c, "PLAN_MAGIC"));
        Matcher steps = Pattern.compile("enum step \\{([^}]*)}").matcher(c);
        assertTrue(steps.find(), "enum step");
        assertEquals(Arrays.stream(LaunchStep.values()).map(Enum::name).toList(),
                Arrays.stream(steps.group(1).split(",")).map(String::trim).toList());
        Matcher names = Pattern.compile("NS_NAMES\\[] = \\{([^}]*)}").matcher(c);
        assertTrue(names.find(), "NS_NAMES");
        assertEquals(Arrays.stream(NamespaceType.values()).map(NamespaceType::procName).toList(),
                Arrays.stream(names.group(1).split(",")).map(s -> s.trim().replace("\"", "")).toList());
        Matcher flags = Pattern.compile("NS_FLAGS\\[] = \\{([^}]*)}").matcher(c);
        assertTrue(flags.find(), "NS_FLAGS");
        assertEquals(Arrays.stream(NamespaceType.values()).map(t -> (long) t.cloneFlag()).toList(),
                Arrays.stream(flags.group(1).split(",")).map(s -> literal(s.trim())).toList());
    }

    /** The value of {@code #define NAME expr}, for the expressions the program uses (sums of products, hex, u suffix). */
    private static long define(String c, String name) {
        Matcher m = Pattern.compile("(?m)^#define " + name + " (.+)$").matcher(c);
        assertTrue(m.find(), name);
        String expr = m.group(1).replaceAll("/\\*.*\\*/", "").replaceAll("[()]", "").replace("u", "").trim();
        long sum = 0;
        for (String term : expr.split("\\+")) {
            long value = 1;
            for (String factor : term.split("\\*")) {
                value *= literal(factor.trim());
            }
            sum += value;
        }
        return sum;
    }

    private static long literal(String text) {
        return text.startsWith("0x") ? Long.parseLong(text.substring(2), 16) : Long.parseLong(text);
    }

    private static int indexOf(byte[] data, byte[] part) {
        for (int i = 0; i + part.length <= data.length; i++) {
            if (Arrays.equals(data, i, i + part.length, part, 0, part.length)) {
                return i;
            }
        }
        throw new AssertionError("not found");
    }
}
