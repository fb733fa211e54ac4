package openshell.linux;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Everything the launcher needs to turn itself into one workload process: the namespaces to be
 * in, the identity to take, the Landlock rules, the seccomp program, and the exact
 * {@code execve}. Sent by the trusted parent as one message of at most {@link #MAX_PLAN_BYTES}.
 *
 * @param executable        absolute path passed to {@code execve}
 * @param argv              exact argv (argv[0] included)
 * @param envp              exact environment ({@code NAME=value})
 * @param workingDirectory  absolute directory to change to
 * @param uid               the workload uid
 * @param gid               the workload gid
 * @param groups            supplementary groups (possibly none)
 * @param namespaces        namespace files to be in, by kind
 * @param landlock          whether Landlock is a hard requirement
 * @param readOnlyPaths     paths readable and executable beneath
 * @param readWritePaths    paths with every file-system right beneath
 * @param rlimits           resource limits to apply
 * @param controllingTerminal whether stdin is a terminal to make the controlling one
 * @param filter            the seccomp program (normally {@link WorkloadFilter#program()})
 */
public record LaunchPlan(String executable, List<String> argv, List<String> envp, String workingDirectory, int uid,
                         int gid, List<Integer> groups, Map<NamespaceType, String> namespaces, Mode landlock,
                         List<String> readOnlyPaths, List<String> readWritePaths, List<ResourceLimit> rlimits,
                         boolean controllingTerminal, BpfProgram filter) {
    /** Largest encoded plan: fits one {@code SOCK_SEQPACKET} message with the default socket buffers. */
    public static final int MAX_PLAN_BYTES = 128 * 1024;
    /** Most paths in the read-only and read-write lists together. */
    public static final int MAX_LANDLOCK_PATHS = 256;
    static final int MAGIC = 0x4f534c31;

    /** How Landlock is applied. */
    public enum Mode {
        /** Every right the sandbox targets must be enforced, or the launch fails at {@link LaunchStep#LANDLOCK}. */
        REQUIRED,
        /** Enforce what the kernel supports and report the difference to the parent. */
        BEST_EFFORT
    }

    /** Validates and copies. */
    public LaunchPlan {
        requireAbsolute(executable, "executable");
        requireAbsolute(workingDirectory, "working directory");
        argv = List.copyOf(argv);
        envp = List.copyOf(envp);
        groups = List.copyOf(groups);
        namespaces = Map.copyOf(namespaces);
        Objects.requireNonNull(landlock, "landlock");
        readOnlyPaths = List.copyOf(readOnlyPaths);
        readWritePaths = List.copyOf(readWritePaths);
        rlimits = List.copyOf(rlimits);
        Objects.requireNonNull(filter, "filter");
        if (argv.isEmpty()) {
            throw new LinuxException("launch plan", Errno.EINVAL, "argv must contain argv[0]");
        }
        if (readOnlyPaths.size() + readWritePaths.size() > MAX_LANDLOCK_PATHS) {
            throw new LinuxException("launch plan", Errno.EINVAL,
                    "more than " + MAX_LANDLOCK_PATHS + " Landlock paths");
        }
        for (String path : readOnlyPaths) {
            requireAbsolute(path, "Landlock path");
        }
        for (String path : readWritePaths) {
            requireAbsolute(path, "Landlock path");
        }
        for (String entry : envp) {
            if (entry.indexOf('=') <= 0) {
                throw new LinuxException("launch plan", Errno.EINVAL, "environment entry without NAME=");
            }
        }
        for (String value : argv) {
            noNul(value);
        }
        for (String value : envp) {
            noNul(value);
        }
    }

    private static void requireAbsolute(String path, String what) {
        if (path == null || !path.startsWith("/") || path.indexOf('\0') >= 0) {
            throw new LinuxException("launch plan", Errno.EINVAL, what + " must be an absolute path: " + path);
        }
    }

    private static void noNul(String value) {
        if (value.indexOf('\0') >= 0) {
            throw new LinuxException("launch plan", Errno.EINVAL, "string contains NUL");
        }
    }

    /**
     * Starts a plan.
     *
     * @param executable absolute path of the target
     * @return a builder with argv {@code [executable]}, an empty environment, working directory
     *         {@code /}, no groups, Landlock required and the workload filter
     */
    public static Builder builder(String executable) {
        return new Builder(executable);
    }

    /** @return the plan's wire form */
    public byte[] encode() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(MAGIC);
            writeString(out, executable);
            writeStrings(out, argv);
            writeStrings(out, envp);
            writeString(out, workingDirectory);
            out.writeInt(uid);
            out.writeInt(gid);
            out.writeInt(groups.size());
            for (int group : groups) {
                out.writeInt(group);
            }
            out.writeInt(namespaces.size());
            Map<NamespaceType, String> ordered = new EnumMap<>(NamespaceType.class);
            ordered.putAll(namespaces);
            for (Map.Entry<NamespaceType, String> ns : ordered.entrySet()) {
                out.writeInt(ns.getKey().ordinal());
                writeString(out, ns.getValue());
            }
            out.writeInt(landlock.ordinal());
            writeStrings(out, readOnlyPaths);
            writeStrings(out, readWritePaths);
            out.writeInt(rlimits.size());
            for (ResourceLimit limit : rlimits) {
                out.writeInt(limit.resource());
                out.writeLong(limit.soft());
                out.writeLong(limit.hard());
            }
            out.writeBoolean(controllingTerminal);
            byte[] program = filter.encodedView();
            out.writeInt(program.length);
            out.write(program);
        } catch (IOException e) {
            throw new LinuxException("launch plan encode", 0, e.toString());
        }
        if (bytes.size() > MAX_PLAN_BYTES) {
            throw new LinuxException("launch plan encode", 7, bytes.size() + " bytes (at most " + MAX_PLAN_BYTES + ")");
        }
        return bytes.toByteArray();
    }

    /**
     * Reads a plan's wire form.
     *
     * @param encoded the bytes
     * @return the plan
     * @throws LinuxException with EINVAL for anything malformed
     */
    public static LaunchPlan decode(byte[] encoded) {
        if (encoded.length > MAX_PLAN_BYTES) {
            throw new LinuxException("launch plan decode", 7, encoded.length + " bytes");
        }
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(encoded))) {
            if (in.readInt() != MAGIC) {
                throw new LinuxException("launch plan decode", Errno.EINVAL, "bad magic");
            }
            String executable = readString(in);
            List<String> argv = readStrings(in);
            List<String> envp = readStrings(in);
            String cwd = readString(in);
            int uid = in.readInt();
            int gid = in.readInt();
            List<Integer> groups = new ArrayList<>();
            for (int i = count(in, Credentials.MAX_GROUPS); i > 0; i--) {
                groups.add(in.readInt());
            }
            Map<NamespaceType, String> namespaces = new EnumMap<>(NamespaceType.class);
            for (int i = count(in, NamespaceType.values().length); i > 0; i--) {
                namespaces.put(NamespaceType.values()[index(in.readInt(), NamespaceType.values().length)], readString(in));
            }
            Mode mode = Mode.values()[index(in.readInt(), Mode.values().length)];
            List<String> readOnly = readStrings(in);
            List<String> readWrite = readStrings(in);
            List<ResourceLimit> limits = new ArrayList<>();
            for (int i = count(in, 16); i > 0; i--) {
                limits.add(new ResourceLimit(in.readInt(), in.readLong(), in.readLong()));
            }
            boolean terminal = in.readBoolean();
            byte[] program = new byte[count(in, BpfProgram.MAX_INSTRUCTIONS * BpfProgram.INSTRUCTION_BYTES)];
            in.readFully(program);
            if (in.available() != 0) {
                throw new LinuxException("launch plan decode", Errno.EINVAL, "trailing bytes");
            }
            return new LaunchPlan(executable, argv, envp, cwd, uid, gid, groups, namespaces, mode, readOnly, readWrite,
                    limits, terminal, BpfProgram.decode(program));
        } catch (IOException e) {
            throw new LinuxException("launch plan decode", Errno.EINVAL, "truncated: " + e);
        }
    }

    private static int count(DataInputStream in, int max) throws IOException {
        int n = in.readInt();
        if (n < 0 || n > max) {
            throw new LinuxException("launch plan decode", Errno.EINVAL, "count " + n + " outside 0.." + max);
        }
        return n;
    }

    private static int index(int value, int size) {
        if (value < 0 || value >= size) {
            throw new LinuxException("launch plan decode", Errno.EINVAL, "index " + value);
        }
        return value;
    }

    private static void writeString(DataOutputStream out, String value) throws IOException {
        byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
        out.writeInt(bytes.length);
        out.write(bytes);
    }

    private static void writeStrings(DataOutputStream out, List<String> values) throws IOException {
        out.writeInt(values.size());
        for (String value : values) {
            writeString(out, value);
        }
    }

    private static String readString(DataInputStream in) throws IOException {
        byte[] bytes = new byte[count(in, MAX_PLAN_BYTES)];
        in.readFully(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static List<String> readStrings(DataInputStream in) throws IOException {
        List<String> values = new ArrayList<>();
        for (int i = count(in, MAX_PLAN_BYTES); i > 0; i--) {
            values.add(readString(in));
        }
        return values;
    }

    /** Builds a {@link LaunchPlan}. */
    public static final class Builder {
        private final String executable;
        private List<String> argv;
        private List<String> envp = List.of();
        private String workingDirectory = "/";
        private int uid = -1;
        private int gid = -1;
        private List<Integer> groups = List.of();
        private final Map<NamespaceType, String> namespaces = new EnumMap<>(NamespaceType.class);
        private Mode landlock = Mode.REQUIRED;
        private List<String> readOnly = List.of();
        private List<String> readWrite = List.of();
        private List<ResourceLimit> rlimits = List.of();
        private boolean terminal;
        private BpfProgram filter = WorkloadFilter.program();

        private Builder(String executable) {
            this.executable = executable;
            this.argv = List.of(executable);
        }

        /** @param value exact argv @return this */
        public Builder argv(List<String> value) {
            argv = value;
            return this;
        }

        /** @param value exact environment @return this */
        public Builder envp(List<String> value) {
            envp = value;
            return this;
        }

        /** @param value absolute working directory @return this */
        public Builder workingDirectory(String value) {
            workingDirectory = value;
            return this;
        }

        /**
         * Sets the workload identity.
         *
         * @param uid    user id
         * @param gid    group id
         * @param groups supplementary groups
         * @return this
         */
        public Builder identity(int uid, int gid, List<Integer> groups) {
            this.uid = uid;
            this.gid = gid;
            this.groups = groups;
            return this;
        }

        /**
         * Adds a namespace to be in.
         *
         * @param type the kind
         * @param path its namespace file, for example {@code /proc/<pid>/ns/net}
         * @return this
         */
        public Builder namespace(NamespaceType type, String path) {
            namespaces.put(type, path);
            return this;
        }

        /**
         * Sets the Landlock rules.
         *
         * @param mode      required or best effort
         * @param readOnly  read and execute beneath these
         * @param readWrite every file-system right beneath these
         * @return this
         */
        public Builder landlock(Mode mode, List<String> readOnly, List<String> readWrite) {
            this.landlock = mode;
            this.readOnly = readOnly;
            this.readWrite = readWrite;
            return this;
        }

        /** @param value limits to apply @return this */
        public Builder rlimits(List<ResourceLimit> value) {
            rlimits = value;
            return this;
        }

        /** @param value whether stdin becomes the controlling terminal @return this */
        public Builder controllingTerminal(boolean value) {
            terminal = value;
            return this;
        }

        /** @param value the seccomp program @return this */
        public Builder filter(BpfProgram value) {
            filter = value;
            return this;
        }

        /** @return the plan */
        public LaunchPlan build() {
            if (uid < 0 || gid < 0) {
                throw new LinuxException("launch plan", Errno.EINVAL, "identity (uid, gid) is required");
            }
            return new LaunchPlan(executable, argv, envp, workingDirectory, uid, gid, groups, namespaces, landlock,
                    readOnly, readWrite, rlimits, terminal, filter);
        }
    }
}
