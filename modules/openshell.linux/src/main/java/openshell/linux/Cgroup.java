package openshell.linux;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * A cgroup v2 leaf: create it, move processes in, read {@code cgroup.events}, kill every member at
 * once ({@code cgroup.kill}, which also catches setsid'd orphans), remove it.
 */
public final class Cgroup {
    /** Allowed leaf names: no path separators, no dot-names. */
    static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9_.-]{0,63}");

    private final Path path;

    private Cgroup(Path path) {
        this.path = path;
    }

    /**
     * {@code cgroup.events}.
     *
     * @param populated whether any process is in the cgroup or below
     * @param frozen    whether it is frozen
     */
    public record Events(boolean populated, boolean frozen) {
    }

    /**
     * Where cgroup v2 is mounted, from {@code /proc/self/mountinfo} (on hybrid hosts often
     * {@code /sys/fs/cgroup/unified}).
     *
     * @return the mount point, or empty if cgroup2 is not mounted
     */
    public static Optional<Path> v2Root() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
                int dash = line.indexOf(" - ");
                if (dash > 0 && line.substring(dash + 3).startsWith("cgroup2 ")) {
                    return Optional.of(Path.of(line.split(" ")[4]));
                }
            }
            return Optional.empty();
        } catch (IOException e) {
            throw new LinuxException("read /proc/self/mountinfo", 0, e.toString());
        }
    }

    /**
     * Creates a leaf cgroup.
     *
     * @param parent an existing cgroup v2 directory
     * @param name   the leaf's name ({@code [A-Za-z0-9][A-Za-z0-9_.-]{0,63}})
     * @return the leaf
     */
    public static Cgroup create(Path parent, String name) {
        if (!NAME.matcher(name).matches()) {
            throw new LinuxException("mkdir(cgroup)", Errno.EINVAL, "bad cgroup name " + name);
        }
        Path path = parent.resolve(name);
        try {
            Files.createDirectory(path);
        } catch (IOException e) {
            throw new LinuxException("mkdir(cgroup)", Errno.EACCES, path + ": " + e);
        }
        return new Cgroup(path);
    }

    /** @return the directory */
    public Path path() {
        return path;
    }

    /**
     * Moves a process (all its threads) into this cgroup.
     *
     * @param pid the process
     */
    public void move(int pid) {
        write("cgroup.procs", Integer.toString(pid));
    }

    /** @return the member processes */
    public List<Integer> members() {
        List<Integer> pids = new ArrayList<>();
        for (String line : read("cgroup.procs")) {
            if (!line.isBlank()) {
                pids.add(Integer.parseInt(line.trim()));
            }
        }
        return pids;
    }

    /** @return the current {@code cgroup.events} */
    public Events events() {
        boolean populated = false;
        boolean frozen = false;
        for (String line : read("cgroup.events")) {
            if (line.equals("populated 1")) {
                populated = true;
            } else if (line.equals("frozen 1")) {
                frozen = true;
            }
        }
        return new Events(populated, frozen);
    }

    /** SIGKILLs every process in the cgroup and below ({@code cgroup.kill}, Linux 5.14+). */
    public void killAll() {
        write("cgroup.kill", "1");
    }

    /** Removes the (empty) cgroup. */
    public void remove() {
        try {
            Files.delete(path);
        } catch (IOException e) {
            throw new LinuxException("rmdir(cgroup)", Errno.EBUSY, path + ": " + e);
        }
    }

    private void write(String file, String value) {
        try {
            Files.writeString(path.resolve(file), value);
        } catch (IOException e) {
            throw new LinuxException("write " + file, 0, path + ": " + e);
        }
    }

    private List<String> read(String file) {
        try {
            return Files.readAllLines(path.resolve(file));
        } catch (IOException e) {
            throw new LinuxException("read " + file, 0, path + ": " + e);
        }
    }
}
