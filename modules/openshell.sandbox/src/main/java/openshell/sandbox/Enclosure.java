package openshell.sandbox;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import openshell.linux.Cgroup;
import openshell.linux.LinuxException;

/**
 * What holds the workload's processes so they can be listed and killed as a whole: a cgroup v2
 * leaf where the runtime has one (the process driver delegates a cgroup), else, when the runtime is
 * PID 1 of its own PID namespace (a container's entry point), the namespace itself. Each workload
 * process gets a child enclosure for its own tree.
 *
 * <p>What the PID namespace gives and what it does not, said plainly: the whole workload is every
 * process of the namespace but the runtime, and {@code kill(-1, SIGKILL)} from PID 1 kills exactly
 * those (orphans, setsid'd and double-forked ones included), so ending the workload is as complete
 * as {@code cgroup.kill}. One process's own tree is its descendants by parent pid: a descendant that
 * double-forked away is re-parented to the runtime and is no longer in it, so terminating one exec
 * may leave such an orphan running until the workload ends (it is still the same workload's, under
 * the same walls, and dies with the rest).
 */
interface Enclosure {
    /** @param pid a process to hold (its later children are held with it) */
    void move(int pid);

    /** @return the pids held */
    List<Integer> members();

    /** @return whether any process is held */
    boolean populated();

    /** SIGKILLs every process held. */
    void killAll();

    /** Releases the enclosure once empty. */
    void remove();

    /**
     * @param name the child's name
     * @return an enclosure for one process's tree, inside this one
     */
    Enclosure child(String name);

    /** @return an enclosure of a cgroup v2 leaf */
    static Enclosure of(Cgroup cgroup) {
        return new OfCgroup(cgroup);
    }

    /** @return the PID namespace of which this runtime is PID 1 */
    static Enclosure pidNamespace() {
        if (ProcessHandle.current().pid() != 1) {
            throw new openshell.isolation.BackendException(openshell.isolation.BackendException.Kind.UNAVAILABLE,
                    "no cgroup v2 leaf and this runtime is not PID 1 of its own PID namespace (it is "
                            + ProcessHandle.current().pid() + "): it cannot guarantee to kill a whole process tree");
        }
        return new PidNamespace();
    }

    /** A cgroup v2 leaf, and leaves below it for each process. */
    record OfCgroup(Cgroup cgroup) implements Enclosure {
        @Override
        public void move(int pid) {
            cgroup.move(pid);
        }

        @Override
        public List<Integer> members() {
            return cgroup.members();
        }

        @Override
        public boolean populated() {
            return cgroup.events().populated();
        }

        @Override
        public void killAll() {
            cgroup.killAll();
        }

        @Override
        public void remove() {
            cgroup.remove();
        }

        @Override
        public Enclosure child(String name) {
            return new OfCgroup(Cgroup.create(cgroup.path(), name));
        }
    }

    /** Every process of the namespace but PID 1 (the runtime). */
    final class PidNamespace implements Enclosure {
        /** Rounds of kill-and-look for one process's tree (a fork between rounds is caught by the next). */
        static final int KILL_ROUNDS = 64;

        static {
            Native.register(PidNamespace.class, NativeLibrary.getInstance("libc.so.6"));
        }

        private static native int kill(int pid, int signal);

        private static final int SIGKILL = 9;

        @Override
        public void move(int pid) {
            // Already in it: every process this runtime starts is.
        }

        @Override
        public List<Integer> members() {
            List<Integer> pids = new ArrayList<>(parents().keySet());
            pids.remove(Integer.valueOf(1));
            return pids;
        }

        @Override
        public boolean populated() {
            return !members().isEmpty();
        }

        @Override
        public void killAll() {
            // From PID 1: every process of the namespace except the caller.
            if (kill(-1, SIGKILL) != 0 && Native.getLastError() != 3 /* ESRCH: none left */) {
                throw new LinuxException("kill(-1, SIGKILL)", Native.getLastError(), "");
            }
        }

        @Override
        public void remove() {
            // Nothing to release.
        }

        @Override
        public Enclosure child(String name) {
            return new Tree();
        }

        /** @return pid -> parent pid of every process in this namespace's /proc */
        static Map<Integer, Integer> parents() {
            Map<Integer, Integer> out = new HashMap<>();
            try (DirectoryStream<Path> entries = Files.newDirectoryStream(Path.of("/proc"), p -> p.getFileName().toString().matches("[0-9]+"))) {
                for (Path entry : entries) {
                    try {
                        String stat = Files.readString(entry.resolve("stat"));
                        // pid (comm) state ppid ...: comm may hold spaces and parentheses; the last ')' ends it.
                        String[] rest = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
                        out.put(Integer.parseInt(entry.getFileName().toString()), Integer.parseInt(rest[1]));
                    } catch (IOException | RuntimeException e) {
                        // Gone meanwhile.
                    }
                }
            } catch (IOException e) {
                throw new LinuxException("list /proc", 0, e.toString());
            }
            return out;
        }

        /** One process and its descendants by parent pid. */
        static final class Tree implements Enclosure {
            private volatile int root = -1;

            @Override
            public void move(int pid) {
                root = pid;
            }

            @Override
            public List<Integer> members() {
                if (root < 0) {
                    return List.of();
                }
                Map<Integer, Integer> parents = parents();
                Set<Integer> tree = new LinkedHashSet<>();
                if (parents.containsKey(root)) {
                    tree.add(root);
                }
                ArrayDeque<Integer> unvisited = new ArrayDeque<>(tree);
                while (!unvisited.isEmpty()) {
                    int parent = unvisited.poll();
                    parents.forEach((pid, ppid) -> {
                        if (ppid == parent && tree.add(pid)) {
                            unvisited.add(pid);
                        }
                    });
                }
                return List.copyOf(tree);
            }

            @Override
            public boolean populated() {
                return !members().isEmpty();
            }

            @Override
            public void killAll() {
                for (int round = 0; round < KILL_ROUNDS; round++) {
                    List<Integer> pids = members();
                    if (pids.isEmpty()) {
                        return;
                    }
                    // The root last: its children stay its own (not PID 1's) until they are dead too.
                    for (int i = pids.size() - 1; i >= 0; i--) {
                        kill(pids.get(i), SIGKILL);
                    }
                }
            }

            @Override
            public void remove() {
                // Nothing to release.
            }

            @Override
            public Enclosure child(String name) {
                throw new UnsupportedOperationException("one level");
            }
        }
    }
}
