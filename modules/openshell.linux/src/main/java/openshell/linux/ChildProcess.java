package openshell.linux;

import com.sun.jna.Memory;
import com.sun.jna.StringArray;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;

/**
 * A child started with {@code posix_spawn} (glibc uses {@code clone(CLONE_VM|CLONE_VFORK)}, safe
 * from a multithreaded JVM), with an exact argv and environment, chosen descriptors at chosen
 * numbers and every other descriptor closed ({@code closefrom}). Unlike {@link ProcessBuilder}
 * it can pass a descriptor beyond stdio (the launcher's plan socket) and start a new session. The
 * handle is a {@link Pidfd}, never a bare PID.
 */
public final class ChildProcess implements AutoCloseable {
    /** Highest descriptor number a child can be given. */
    public static final int MAX_CHILD_FD = 63;
    /** Most argv or environment entries accepted. */
    public static final int MAX_ARGUMENTS = 4096;

    static final short POSIX_SPAWN_SETSIGDEF = 0x04;
    static final short POSIX_SPAWN_SETSIGMASK = 0x08;
    static final short POSIX_SPAWN_SETSID = 0x80;
    static final int F_DUPFD_CLOEXEC = 1030;
    static final int SPAWN_FD_FLOOR = 100;

    private final Pidfd pidfd;

    private ChildProcess(Pidfd pidfd) {
        this.pidfd = pidfd;
    }

    /**
     * Starts describing a child.
     *
     * @param executable absolute path
     * @return a builder
     */
    public static Builder builder(String executable) {
        return new Builder(executable);
    }

    /** @return the process id */
    public int pid() {
        return pidfd.pid();
    }

    /** @return the handle */
    public Pidfd pidfd() {
        return pidfd;
    }

    /**
     * Waits for the child and reaps it.
     *
     * @param timeout the longest wait
     * @return the exit, or empty on timeout
     */
    public Optional<ChildExit> awaitExit(Duration timeout) {
        return pidfd.awaitExit(timeout);
    }

    /** Closes the handle (does not kill the child). */
    @Override
    public void close() {
        pidfd.close();
    }

    /** Describes a child; {@link #spawn()} starts it. */
    public static final class Builder {
        private final String executable;
        private final List<String> arguments = new ArrayList<>();
        private final List<String> environment = new ArrayList<>();
        private final Map<Integer, Integer> descriptors = new TreeMap<>();
        private boolean newSession;

        private Builder(String executable) {
            if (!Objects.requireNonNull(executable, "executable").startsWith("/")) {
                throw new LinuxException("posix_spawn", Errno.EINVAL, "executable must be absolute: " + executable);
            }
            this.executable = executable;
            this.arguments.add(executable);
        }

        /**
         * Sets argv exactly (argv[0] included).
         *
         * @param argv the arguments
         * @return this
         */
        public Builder argv(List<String> argv) {
            checkStrings(argv, "argv");
            arguments.clear();
            arguments.addAll(argv);
            return this;
        }

        /**
         * Sets the environment exactly ({@code NAME=value} entries); default empty.
         *
         * @param envp the entries
         * @return this
         */
        public Builder envp(List<String> envp) {
            checkStrings(envp, "envp");
            environment.clear();
            environment.addAll(envp);
            return this;
        }

        /**
         * Gives the child one of our descriptors under a chosen number; nothing else is inherited.
         *
         * @param childFd the number in the child, 0..{@link ChildProcess#MAX_CHILD_FD}
         * @param ourFd   our descriptor (not consumed)
         * @return this
         */
        public Builder descriptor(int childFd, int ourFd) {
            if (childFd < 0 || childFd > MAX_CHILD_FD || ourFd < 0) {
                throw new LinuxException("posix_spawn", Errno.EBADF,
                        "child fd " + childFd + " (0.." + MAX_CHILD_FD + ") from fd " + ourFd);
            }
            descriptors.put(childFd, ourFd);
            return this;
        }

        /**
         * Starts the child in a new session ({@code setsid}), so it can take a controlling terminal.
         *
         * @param value whether to
         * @return this
         */
        public Builder newSession(boolean value) {
            newSession = value;
            return this;
        }

        private static void checkStrings(List<String> values, String what) {
            if (values.size() > MAX_ARGUMENTS) {
                throw new LinuxException("posix_spawn", Errno.EINVAL,
                        what + " has " + values.size() + " entries (at most " + MAX_ARGUMENTS + ")");
            }
            for (String value : values) {
                if (value.indexOf('\0') >= 0) {
                    throw new LinuxException("posix_spawn", Errno.EINVAL, what + " entry contains NUL");
                }
            }
        }

        /**
         * Starts the child.
         *
         * @return the running child
         */
        public ChildProcess spawn() {
            List<Integer> copies = new ArrayList<>();
            try (Memory actions = new Memory(512); Memory attributes = new Memory(512); Memory signals = new Memory(128)) {
                // Fresh close-on-exec copies above every child number, so dup2 order cannot clobber a source.
                for (Map.Entry<Integer, Integer> entry : descriptors.entrySet()) {
                    copies.add(LibC.check(LibC.fcntl(entry.getValue(), F_DUPFD_CLOEXEC, SPAWN_FD_FLOOR),
                            "fcntl(F_DUPFD_CLOEXEC)"));
                }
                check(LibC.posix_spawn_file_actions_init(LibC.address(actions)), "posix_spawn_file_actions_init");
                check(LibC.posix_spawnattr_init(LibC.address(attributes)), "posix_spawnattr_init");
                try {
                    int index = 0;
                    int highest = -1;
                    for (int childFd : descriptors.keySet()) {
                        check(LibC.posix_spawn_file_actions_adddup2(LibC.address(actions), copies.get(index++), childFd),
                                "posix_spawn_file_actions_adddup2");
                        highest = Math.max(highest, childFd);
                    }
                    check(LibC.posix_spawn_file_actions_addclosefrom_np(LibC.address(actions), highest + 1),
                            "posix_spawn_file_actions_addclosefrom_np");
                    short flags = (short) (POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | (newSession ? POSIX_SPAWN_SETSID : 0));
                    check(LibC.posix_spawnattr_setflags(LibC.address(attributes), flags), "posix_spawnattr_setflags");
                    LibC.sigemptyset(LibC.address(signals));
                    check(LibC.posix_spawnattr_setsigmask(LibC.address(attributes), LibC.address(signals)),
                            "posix_spawnattr_setsigmask");
                    LibC.sigfillset(LibC.address(signals));
                    check(LibC.posix_spawnattr_setsigdefault(LibC.address(attributes), LibC.address(signals)),
                            "posix_spawnattr_setsigdefault");
                    int[] pid = new int[1];
                    StringArray argv = new StringArray(arguments.toArray(String[]::new), "UTF-8");
                    StringArray envp = new StringArray(environment.toArray(String[]::new), "UTF-8");
                    check(LibC.posix_spawn(pid, executable, LibC.address(actions), LibC.address(attributes), argv, envp),
                            "posix_spawn(" + executable + ")");
                    // Our unreaped child cannot be recycled, so this pidfd names exactly it.
                    return new ChildProcess(Pidfd.open(pid[0]));
                } finally {
                    LibC.posix_spawn_file_actions_destroy(LibC.address(actions));
                    LibC.posix_spawnattr_destroy(LibC.address(attributes));
                }
            } finally {
                for (int copy : copies) {
                    LibC.close(copy);
                }
            }
        }

        private static void check(int result, String call) {
            // posix_spawn* return the error number instead of setting errno.
            if (result != 0) {
                throw LinuxException.of(call, result);
            }
        }
    }
}
